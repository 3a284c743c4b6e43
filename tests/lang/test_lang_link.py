"""Link errors (unknown names and tools, misplaced forms, static types, what lashflow does
not support) and what linking fills in."""

from __future__ import annotations

import pytest

from lashflow.lang import Catalog, LangError, Operation, check, link, parse
from lashflow.lang import ast as A

CATALOG = Catalog.permissive({"tools": ["read", "get", "inc"], "billing": ["charge"]})
CATALOG.add("tools", Operation("typed", input_schema={
    "type": "object",
    "properties": {"mode": {"enum": ["default", "fast"]}, "n": {"type": "integer"}},
    "required": ["mode"],
}, output_schema={"type": "object", "properties": {"count": {"type": "integer"}},
                  "required": ["count"], "additionalProperties": False}))
CATALOG.add("workspace.default", Operation("read_file"))

CASES = [
    # declarations
    ("type A = int\ntype A = str", "duplicate declaration `A`"),
    ("process p() {}\nprocess p() {}", "duplicate declaration `p`"),
    ("process p(a: int, a: int) {}", "duplicate process parameter `a`"),
    ("process p() signals { s: int, s: str } {}", "duplicate process signal `s`"),
    ('process p() signals { decision: any } {\n  d = wait_signal("decsion")\n}',
     "process `p` declares no signal `decsion` (its signals: `decision`)"),
    ("process p(a: Nope) {}", "unknown type `Nope`"),
    ("type A = { b: list[Missing] }", "unknown type `Missing`"),
    ("process p() -> cron.Tick { finish 1 }", "unknown type `cron.Tick`"),
    # processes and start
    ("x = start q()", "unknown process `q`"),
    ("process p(a: int) {}\nx = start p()", "process `p` is missing argument `a`"),
    ("process p(a: int) {}\nx = start p(a: 1, b: 2)", "process `p` does not accept argument `b`"),
    ("process p(a: int) {}\nx = start p(a: 1, a: 2)", "duplicate process argument `a`"),
    ('process p(a: int) {}\nx = start p(a: "x")', "process `p` argument `a` expects int, got str"),
    ("type Item = { id: int, label: str? }\nprocess show(item: Item) {}\n"
     'x = start show(item: { id: "x" })',
     "process `show` argument `item` expects { id: int, label: str? }, got { id: str }"),
    ('process p(a: enum["x", "y"]) {}\nx = start p(a: "z")',
     'expected enum["x", "y"], got incompatible literal "z"'),
    ("process p(a: list[str]) {}\nx = start p(a: [1])",
     "process `p` argument `a` expects list[str], got list[int]"),
    ("process p(a: int | null) {}\nx = start p(a: {})",
     "process `p` argument `a` expects int | null, got {  }"),
    ("process p() -> str { finish 1 }", "process `p` return type is incompatible: "
     "expected str, got int"),
    ("process d(n: int) -> int { finish n / 2 }",
     "process `d` return type is incompatible: expected int, got float"),
    # names
    ("process p() { finish y }", "unknown name `y`"),
    ("process p() { x = [z for q in [1]] }", "unknown name `z`"),
    # builtins and tools
    ("x = foo(1)", "unknown builtin `foo`"),
    ("x = read({})", "tools must be called through module paths, e.g. `tools.read`"),
    ("x = charge({})", "tools must be called through module paths, e.g. `billing.charge`"),
    ("x = tools.nope({})", "module `tools` does not expose operation `nope`"),
    ("x = 1\nx.read()", "receiver for operation `read` is not a module authority"),
    ("tools = 1\ntools.get()", "receiver for operation `get` is not a module authority"),
    ("x = nomodule.read()", "receiver for operation `read` is not a module authority"),
    ("x = [1][0].read()", "receiver for operation `read` is not a module authority"),
    ("x = workspace.other.read_file({})",
     "receiver for operation `read_file` is not a module authority"),
    ("process w(t: Tools) { t.zap({}) }", "resource type `Tools` does not expose operation `zap`"),
    ("process w(t: Tools) { x = t.name }",
     "cannot access `.name` on opaque host descriptor `Tools`"),
    ('x = tools.typed({ mode: "slow" })',
     'expected enum["default", "fast"], got incompatible literal "slow"'),
    ('x = tools.typed({ mode: "fast", n: "3" })',
     'operation `typed` expects { mode: enum["default", "fast"], n: int? }, '
     'got { mode: str, n: str }'),
    ('x = tools.typed({ n: 1 })',
     'operation `typed` expects { mode: enum["default", "fast"], n: int? }, got { n: int }'),
    ('x = (await tools.typed({ mode: "fast" }))?\ny = x.total',
     "object type has no field `total`"),
    # process-only forms
    ('x = wait_signal("a")', "`wait_signal` can only be used inside a process body"),
    # static types: an operator refuses operands it cannot take
    ("finish {} + 1", "operator `+` does not accept {  } and int"),
    ("finish 1 and 2", "operator `and` does not accept int and int"),
    ('finish true or "x"', "operator `or` does not accept bool and str"),
    ("x = [1] < 2", "operator `<` does not accept list[int] and int"),
    ("x = [1] + 2", "operator `+` does not accept list[int] and int"),
    ("x = {a: 1} == [1]", "operator `==` does not accept { a: int } and list[int]"),
    ('x = {a: 1} * 2', "operator `*` does not accept { a: int } and int"),
    ("for c in \"abc\" {}", "cannot iterate over str; expected a list"),
    ("for c in 5 {}", "cannot iterate over int; expected a list"),
    ("x = [c for c in {a: 1}]", "cannot iterate over { a: int }; expected a list"),
    ("record = {}\nrecord.extra = \"ok\"", "object type has no field `extra`"),
    ("record = {a: 1}\nrecord.b = 2", "object type has no field `b`"),
    ('r = {a: 1}\nr["b"] = 2\nx = r.b', "object type has no field `b`"),
    ("r = {a: {b: 1}}\nx = r.a.c", "object type has no field `c`"),
    # forms lashflow does not support are refused by name
    ("x = triggers.register({})", "not supported by lashflow: triggers registry"),
    ("process p(t: TriggerHandle<any>) {}", "not supported by lashflow: triggers registry"),
]


@pytest.mark.parametrize("source,message", CASES, ids=[c[1][:50] for c in CASES])
def test_link_error(source: str, message: str) -> None:
    diags = check(source, CATALOG)
    assert [(d.code, d.message) for d in diags] == [("link_error", message)]
    assert diags[0].line is not None and diags[0].column is not None


OK = [
    "process d(n: int) -> int { finish n * 2 }",
    "process d(n: int) -> int { finish n + 1 - 2 % 3 }",
    "process d(n: int) -> float { finish n / 2 }",
    "process d(n: int) -> float { finish 1 }",
    "process d(n: int) -> int { finish -n }",
    "x = missing_name + 1",
    "r = {a: 1}\nr[\"b\"] = 2\nx = r[\"b\"]",
    "r = {a: {b: 1}}\nr.a.b = 2",
    "process p() { x = input; y = inputs }",
    "process p() { for i in [1] { y = i } finish y }",
    "process w(t: Tools) { x = await t.read({})? }\nfinish (await start w(t: tools))?",
    "x = await workspace.default.read_file({})?",
    "x = billing.charge({ amount: 1 })",
    'x = (await tools.typed({ mode: "fast", n: 2 }))?\ny = x.count + 1',
    "a = await tools.read({})?\nfinish [a or \"b\", a and 1, a + 1, a.x.y, a[0]]",
    "h = start p(a: 1)\nprocess p(a: int) { finish a }",
    "type A = { b: B }\ntype B = list[A]\nprocess p(a: A) { finish a.b }",
    'x = 1\nif x > 0 { x = "s" }\ny = x',
    "x = \"n=\" + 3 + true",
    "x = (1, 2) == [1, 2]",
    "x = null == 1",
    'x = validate({ a: 1 }, Type { a: int })',
    "tools = 1\nx = tools + 1",
    "process p(n: int) -> int { total = 0\n for i in range(n) { total = total + i }\n finish total }",
    'process p() {\n  d = wait_signal("any")\n}',  # no signals declared: any name
]


@pytest.mark.parametrize("source", OK)
def test_links(source: str) -> None:
    assert check(source, CATALOG) == []


def test_module_paths_are_filled() -> None:
    module = link(parse("a = tools.read({})\nb = workspace.default.read_file({})\n"
                        "process w(t: Tools) { x = t.read({}) }"), CATALOG)
    assert module.main[0].value.module == "tools"
    assert module.main[1].value.module == "workspace.default"
    assert module.processes[0].body.body[0].value.module is None


def test_declaration_errors_come_before_main_errors() -> None:
    [diag] = check("x = foo(1)\nprocess p() { finish y }", CATALOG)
    assert diag.message == "unknown name `y`"


def test_link_raises_lang_error_with_code() -> None:
    with pytest.raises(LangError) as info:
        link(parse("x = foo()"), CATALOG)
    assert info.value.code == "link_error"
    assert info.value.diagnostic.code == "link_error"


def test_default_catalog_is_empty() -> None:
    [diag] = check("x = tools.read({})")
    assert diag.message == "receiver for operation `read` is not a module authority"
    assert check("x = 1 + 2") == []


def test_catalog_module_shadowed_by_variable_gives_plain_value() -> None:
    module = link(parse("tools = { read: 1 }\nx = tools.read"), CATALOG)
    assert isinstance(module.main[1].value, A.Field)


@pytest.mark.parametrize("source, hint", [
    ("x = await tools.flakey({})", "did you mean `flaky`?"),
    ("x = await tols.flaky({})", "did you mean `tools`?"),
    ("x = await workspace.defualt.read_file({})", "did you mean `workspace.default`?"),
    ("x = lenn([1])", "did you mean `len`?"),
    ("process worker(n: int) { finish n }\nh = start wroker(n: 1)", "did you mean `worker`?"),
    ("process worker(count: int) { finish count }\nh = start worker(cuont: 1)",
     "did you mean `count`?"),
    ("process p(n: int) { total = n\n  finish totl }", "did you mean `total`?"),
    ("type Order = { id: str }\nprocess p(o: Ordr) { finish o }", "did you mean `Order`?"),
    ("x = await tools.zzz({})", None),  # nothing close: no guess
])
def test_link_errors_suggest_the_nearest_name(source: str, hint: str | None) -> None:
    catalog = Catalog()
    catalog.add("tools", Operation("flaky"))
    catalog.add("workspace.default", Operation("read_file"))
    with pytest.raises(LangError) as info:
        link(parse(source), catalog)
    assert info.value.diagnostic.hint == hint


def test_with_no_tools_loaded_the_error_says_so() -> None:
    with pytest.raises(LangError) as info:
        link(parse("x = await tools.read({})"), Catalog())
    assert info.value.diagnostic.message == "receiver for operation `read` is not a module authority"
    assert info.value.diagnostic.hint.startswith("no tools are loaded: lashflow looks for a .py "
                                                 "file beside the .lash file")


@pytest.mark.parametrize("source, message", [
    ('sleep for "2 minutes"', 'invalid duration "2 minutes" in `sleep for`: expected '
                              'milliseconds or a string like "5s", "250ms", "2m", "1h"'),
    ('sleep until "2030-01-01T00:00:00"', 'invalid deadline "2030-01-01T00:00:00" in '
                                          '`sleep until`: the timestamp needs a UTC offset'),
    ('sleep until "next tuesday"', 'invalid deadline "next tuesday" in `sleep until`: '
                                   'expected an RFC 3339 timestamp'),
])
def test_a_literal_sleep_that_cannot_work_is_a_link_error(source: str, message: str) -> None:
    [diagnostic] = check(source, Catalog())
    assert (diagnostic.code, diagnostic.message) == ("link_error", message)
    assert (diagnostic.line, diagnostic.column) == (1, source.index('"') + 1)  # at the literal


@pytest.mark.parametrize("source", ['sleep for "5s"', "sleep for 250", 'sleep for " 2m "',
                                    'sleep until "2030-01-01T00:00:00Z"', "sleep until 0",
                                    "d = \"2 minutes\"\nsleep for d"])  # computed: run time
def test_good_or_computed_sleeps_link(source: str) -> None:
    assert check(source, Catalog()) == []


@pytest.mark.parametrize("source, message, hint", [
    ("process p() { out = push(out, 1)\n  finish out }", "unknown name `out`",
     "`out` is assigned only later in the process body"),
    ("process p() -> int { if true { finish 1 } }",
     "process `p` return type is incompatible: expected int, got int | null",
     "the body can end without `finish`, which finishes with null"),
    ("process p() -> int { if true { finish 1 } else { finish 2.5 } }",
     "process `p` return type is incompatible: expected int, got int | float", None),
])
def test_process_bodies_are_checked_along_their_flow(source: str, message: str,
                                                     hint: str | None) -> None:
    with pytest.raises(LangError) as info:
        link(parse(source), CATALOG)
    assert (info.value.diagnostic.message, info.value.diagnostic.hint) == (message, hint)


@pytest.mark.parametrize("source", [
    "process p() -> int { finish 1\n  finish \"dead\" }",  # after `finish`: not what it returns
    "process p() -> int { if true { finish 1 } else { fail \"no\" } }",
    "process p() { if true { out = 1 }\n  finish out }",  # maybe assigned is enough
    "tools.read({})\ntools = 1",  # a module until the variable exists
])
def test_what_the_original_accepts_links(source: str) -> None:
    link(parse(source), CATALOG)
