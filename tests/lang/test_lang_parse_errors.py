"""Parse errors: every parse-time rule and every parse error message, with the exact
text and the 1-based line/column (in characters) the original reports."""

from __future__ import annotations

import pytest

from lashflow.lang import Catalog, LangError, check, parse

CATALOG = Catalog.permissive({"tools": ["read", "get"]})

LABEL_TARGET = ("@label can annotate statements or process declarations, but not other "
                "declarations or another @label")
TRIGGER = ("declarative trigger syntax has been removed; construct a source value and call the "
           "trigger registry register operation")
NESTING = "expression nesting too deep (limit 40); flatten the program"

# (source, message, line, column)
CASES = [
    # 1.x lexical
    ("naïve = 1", "unexpected `ï`", 1, 3),
    ('x = 1\ny = "abc', "unterminated string", 2, 5),
    ("x = '''abc", "unterminated string", 1, 5),
    ('x = r"abc', "unterminated string", 1, 5),
    ('x = """a\\', "unterminated string", 1, 5),
    ("x = a & b", "unexpected `&`", 1, 7),
    ("x = `a`", "unexpected `` ` ``".replace("`` ` ``", "```"), 1, 5),
    ("finish [1.5e3]", "expected `]`, found identifier `e3`", 1, 12),
    ("x += 1", "unexpected `=`", 1, 4),
    # 2.4 item 3: reserved statement words in expression position
    ("x = if true { 1 } else { 2 }", "unexpected `if`", 1, 5),
    ("x = [for]", "unexpected `for`", 1, 6),
    ("x = cancel h", "unexpected `cancel`", 1, 5),
    ("x = print 1", "unexpected `print`", 1, 5),
    ("else { }", "unexpected `else`", 1, 1),
    # 2.4 item 4: `?` ternary scan, the unwrap-then-ternary pitfall
    ('r = 1\nv = r?\nfinish v == "a" ? "y" : "n"', "expected `:`, found identifier `v`", 3, 8),
    ("x = a ? b c : d", "expected `:`, found identifier `c`", 1, 11),
    # 2.4 item 6: start
    ("start call foo()", "unexpected `start call`", 1, 1),
    ("h = start { }", "unexpected inline `start` process body", 1, 11),
    ("h = start (a) { }", "unexpected inline `start` process body", 1, 11),
    ("h = start p", "expected `(`, found end of input", 1, 12),
    ("h = start p(a 1)", "expected `:`, found number 1", 1, 15),
    ("h = start p(a: 1 b: 2)", "expected `)`, found identifier `b`", 1, 18),
    ("h = start p(a: 1,", "expected `)`, found end of input", 1, 18),
    # 2.4 item 7: sleep
    ("sleep 5", "expected `for` or `until`, found number 5", 1, 7),
    ("x = sleep", "expected `for` or `until`, found end of input", 1, 10),
    # 2.4 item 8: wait_signal / signal_run
    ('x = wait_signal("a", "b")', "expected one signal name argument, found 2 arguments", 1, 25),
    ("x = wait_signal()", "expected one signal name argument, found 0 arguments", 1, 17),
    ("x = wait_signal(n)", "unexpected non-literal signal name in `wait_signal`", 1, 17),
    ('signal_run(h, "s")',
     "expected run handle, signal name, and payload arguments, found 2 arguments", 1, 18),
    ("x = 1\nsignal_run(h, n, 1)", "unexpected non-literal signal name in `signal_run`", 2, 15),
    # 2.4 item 9: removed syntax
    ("submit 1", "`submit` was removed; use `finish <value>`", 1, 1),
    ("x = submit", "`submit` was removed; use `finish <value>`", 1, 5),
    ("trigger foo", TRIGGER, 1, 1),
    ("x = 1\nparallel { }", "unexpected `parallel`", 2, 1),
    ("call foo", "unexpected `call`", 1, 1),
    ("x = call", "unexpected `call`", 1, 5),
    # 2.4 item 10: finish needs a value
    ("finish", "`finish` requires a value; use `finish null` to finish with null", 1, 1),
    ("if true { finish }", "`finish` requires a value; use `finish null` to finish with null",
     1, 11),
    # 2.4 item 11: loop-only and process-only statements
    ("break", "`break` can only be used inside a loop", 1, 1),
    ("if true { continue }", "`continue` can only be used inside a loop", 1, 11),
    ("process p() { if true { while false { } } else { break } }",
     "`break` can only be used inside a loop", 1, 50),
    ("process p() { print 1 }", "`print` can't be used inside a `process` body", 1, 15),
    ("yield 1", "`yield` can only be used inside a `process` body", 1, 1),
    ("wake 1", "`wake` can only be used inside a `process` body", 1, 1),
    ("for i in [1] { fail 1 }", "`fail` can only be used inside a `process` body", 1, 16),
    # 2.4 item 13: @label
    ('@label(title: "a")\n@label(title: "b")\nx = 1', LABEL_TARGET, 2, 1),
    ('@label(title: "x")\ntype T = int', LABEL_TARGET, 2, 1),
    ('@label(title: "x")\ntrigger t', LABEL_TARGET, 2, 1),
    ('process p() {\n  @label(title: "x")\n  process = 1\n}', LABEL_TARGET, 3, 3),
    ('@label(name: "a")\nx = 1', "invalid @label annotation: unknown field `name`", 1, 8),
    ('@label(description: "d")\nx = 1', "invalid @label annotation: `title` is required", 1, 1),
    ('@label(title: "a", title: "b")\nx = 1',
     "invalid @label annotation: duplicate `title` field", 1, 20),
    ("@label(title: 1)\nx = 1", "expected string literal, found number 1", 1, 15),
    ("@lable(title: \"a\")", "expected label, found identifier `lable`", 1, 2),
    ('@label(title: "a")', "unexpected end of input", 1, 19),
    # 7.2: "expected E, found X" for each E
    ("if true {\n  x = 1\n", "expected `}`, found end of input", 3, 1),
    ("finish [1 2]", "expected `]`, found number 2", 1, 11),
    ("f(1 2)", "expected `)`, found number 2", 1, 5),
    ("x = (1, 2", "expected `)`, found end of input", 1, 10),
    ("x = (1,", "expected `)`, found end of input", 1, 8),
    ("{ a 1 }", "expected `:`, found number 1", 1, 5),
    ("{ a: 1 b: 2 }", "expected `}`, found identifier `b`", 1, 8),
    ("{ 1: 2 }", "expected identifier, string key, or keyword key, found number 1", 1, 3),
    ("x = { a: 1,", "expected identifier, string key, or keyword key, found end of input", 1, 12),
    ("x.", "expected identifier, string key, or keyword key, found end of input", 1, 3),
    ("x = a.(b)", "expected identifier, string key, or keyword key, found `(`", 1, 7),
    ("for 1 in x {}", "expected identifier, found number 1", 1, 5),
    ("for x 1 {}", "expected `in`, found number 1", 1, 7),
    ("for x in y }", "expected `{`, found `}`", 1, 12),
    ("if x == 1 then { }", "expected `{`, found identifier `then`", 1, 11),
    ("while x", "expected `{`, found end of input", 1, 8),
    ("process p { }", "expected `(`, found `{`", 1, 11),
    ("process p() - { }", "expected `{`, found `-`", 1, 13),
    ("process p(a: ) {}", "expected type expression, found `)`", 1, 14),
    ("process p(a: int b: int) {}", "expected `)`, found identifier `b`", 1, 18),
    ("process p(1: int) {}", "expected identifier, found number 1", 1, 11),
    ("process p(a: int,", "expected `)`, found end of input", 1, 18),
    ("process p() signals s {}", "expected `{`, found identifier `s`", 1, 21),
    ("process p() -> {", "expected identifier, string key, or keyword key, found end of input",
     1, 17),
    ("type X int", "expected `=`, found identifier `int`", 1, 8),
    ("type = 1\ntype X", "expected `=`, found end of input", 2, 7),
    ("type X = enum[]", "expected at least one enum string literal, found empty enum", 1, 10),
    ('type X = enum["a",]', "expected string literal, found `]`", 1, 19),
    ("type X = enum[1]", "expected string literal, found number 1", 1, 15),
    ('type X = enum["a" "b"]', "expected `]`, found string \"b\"", 1, 19),
    ("type X = list[int", "expected `]`, found end of input", 1, 18),
    ("type X = Process<int>", "expected `,`, found `>`", 1, 21),
    ("type X = { a: int, a: str }", "expected unique field name, found duplicate field `a`",
     1, 20),
    ("type X = { a: int } | null", "unexpected `|`", 1, 21),
    ("let 5", "expected identifier, found number 5", 1, 5),
    ("let x 5", "expected `=`, found number 5", 1, 7),
    ("x = [1,", "unexpected end of input", 1, 8),
    ("x = [1, )", "unexpected `)`", 1, 9),
    ("x = 1 )", "unexpected `)`", 1, 7),
    ("x = ", "unexpected end of input", 1, 5),
    ("x = [1 if]", "expected `]`, found `if`", 1, 8),
    ("x = [1 for]", "expected identifier, found `]`", 1, 11),
    ('x = ["a" "b\\n"]', "expected `]`, found string \"b\\n\"", 1, 10),
    ("x = [1 2.5]", "expected `]`, found number 2.5", 1, 8),
]


@pytest.mark.parametrize("source,message,line,column", CASES,
                         ids=[c[0][:40] for c in CASES])
def test_parse_error(source: str, message: str, line: int, column: int) -> None:
    with pytest.raises(LangError) as info:
        parse(source)
    diag = info.value.diagnostic
    assert diag.code == "parse_error"
    assert (diag.message, diag.line, diag.column) == (message, line, column)


HINTS = [
    ("x = if true { 1 } else { 2 }", "use `cond ? yes : no` for inline conditionals"),
    ("x = { a: for }",
     "`for` is a statement. Put it on its own line, not inside an expression or record literal."),
    ("trigger t", "construct a host-provided trigger source value and call the trigger "
     "registry register operation"),
]


@pytest.mark.parametrize("source,hint", HINTS)
def test_hints(source: str, hint: str) -> None:
    [diag] = check(source)
    assert diag.hint == hint


def test_expected_if_has_no_hint() -> None:
    [diag] = check("x = [1 if]")
    assert diag.hint is None


NESTING_CASES = [
    ("finish " + "(" * 40 + "1" + ")" * 40, 1, 48),
    ("finish " + "[" * 40 + "1" + "]" * 40, 1, 48),
    ("x = " + "{a: " * 40 + "1" + "}" * 40, 1, 165),
    ("if true { " * 40 + "x = 1" + " }" * 40, 1, 405),
    ("if true { " * 41 + "x = 1" + " }" * 41, 1, 404),
]


@pytest.mark.parametrize("source,line,column", NESTING_CASES)
def test_nesting_limit(source: str, line: int, column: int) -> None:
    [diag] = check(source)
    assert (diag.message, diag.line, diag.column) == (NESTING, line, column)


def test_nesting_just_under_the_limit_parses() -> None:
    parse("finish " + "(" * 39 + "1" + ")" * 39)
    parse("if true { " * 39 + "x = 1" + " }" * 39)


@pytest.mark.parametrize("source", [
    "x = " + "-" * 5000 + "1",
    "x = " + "+".join(["1"] * 5000),
    "x = a" + ".b" * 5000,
    "x = " + "f(" * 100_000,
    "[" * 100_000,
    "{" * 100_000,
    "x = " + "a ? " * 3000 + "1" + " : 2" * 3000,
])
def test_pathological_input_gives_a_diagnostic(source: str) -> None:
    [diag] = check(source)
    assert diag.code == "parse_error"


def test_unexpected_render_forms() -> None:
    assert check("x = )")[0].message == "unexpected `)`"
    assert check("x = ]")[0].message == "unexpected `]`"
    assert check("x = if")[0].message == "unexpected `if`"
    assert check("x = 1 2 =")[0].message == "unexpected `=`"
    assert check("(1 x")[0].message == "expected `)`, found identifier `x`"
    assert check('(1 "q\\"")')[0].message == 'expected `)`, found string "q\\""'
    assert check("(1 7.0)")[0].message == "expected `)`, found number 7"
