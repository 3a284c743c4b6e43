"""The parse and link cases of ../shared/lashlang/CONFORMANCE.md, one test each.

Programs that the original runs must parse and link here (with the harness catalog: one
module `tools` whose stub operations take and return `any`); programs it rejects at parse
or link time must fail with the same message at the same line and column.
"""

from __future__ import annotations

import pytest

from lashflow.lang import Catalog, LangError, check, link, parse

STUBS = ["read", "inc", "v", "quote", "request_approval", "charge", "get"]
CATALOG = Catalog.permissive({"tools": STUBS})

OK_PROGRAMS = {
    "C01": "finish [1 + 2 * 3, (1 + 2) * 3, 10 - 2 - 3, 7 % 3, -7 % 3, 2 * -3, 9 / 2, 0.1 + 0.2]",
    "C03": "# hash comment\nx = 1; y = 2 // slash comment\nlet z = x + y\nfinish z\n",
    "C05": 'n = 7\nlabel = n > 10 ? "big" : n > 5 ? "mid" : "small"\n'
    'safe = false ? undefined_thing : "ok"\nfinish [label, safe]\n',
    "C07": 'state = { groups: { a: { counts: [1, 2] } }, total: 0 }\nalias = state\ng = "a"\n'
    "state.groups[g].counts[1] = 5\nstate.total = state.total + 5\n"
    'state["extra"] = true\nfinish { state: state, alias: alias }\n',
    "C09": 'pair = 1, "x"\none = (1,)\nnone = ()\nfinish { pair: pair, first: pair[0], '
    "n: len(pair) + len(one) + len(none), text: to_string(pair), eq: (1, 2) == [1, 2], "
    "cat: (1,) + (2, 3) }\n",
    "C11": "n = 0\nlog = []\nwhile true {\n  n = n + 1\n  if n % 2 == 0 { continue }\n"
    "  if n > 7 { break }\n  log = push(log, n)\n}\nfinish { n: n, log: log }\n",
    "C13": 'finish [trim("  hi  "), split("a,b,,c", ","), split("ab", ""), '
    'join(["a", 1, true, null], "-"), starts_with("hello", "he"), ends_with("hello", "lo"), '
    'contains("hello", "ell"), find("hello", "l"), find("hello", "l", 3), find("hello", "z"), '
    'to_string(12), to_int("3.9"), to_int(-2.5), to_float("2.5"), len("héllo")]',
    "C15": 'finish [format("a={} b={}", 1, "x"), format("b={1} a={0}", "A", "B"), '
    'format("{{literal}} {}", [1, 2]), format("plain"), format("{}", { k: null })]',
    "C17": 'finish [to_string({ z: 1, a: [1, 2.5, "s"], m: null }), to_string(true), '
    'to_string(null), to_string(3.0), to_string(-0.5), "n=" + 3 + true]',
    "C19": 'a = await tools.read({ path: "a.txt" })?\nb = await tools.read({ path: "b.txt" })?\n'
    "finish [a, b]\n",
    "C21": "process double(n: int) { finish n * 2 }\nprocess boom(msg: str) { fail msg }\n"
    'a = start double(n: 21)\nb = start boom(msg: "bad input")\nboth = await { a: a, b: b }\n'
    "finish { a: both.a, b: both.b, direct: (await a)?, list: await [a, b] }\n",
    "C23": 'T = Type { name: str, tags: list[str], age: int?, kind: enum["a", "b"], '
    'note: str | null }\ngood = validate({ name: "x", tags: ["t"], kind: "a", note: null, '
    "extra: 1 }, T)\nfinish good\n",
    "C29": "process approval(req: str) signals { decision: any } {\n"
    "  yield { waiting: req }\n"
    '  sleep for "5s"\n'
    '  d = wait_signal("decision")\n'
    "  if d.approved {\n"
    '    wake { kind: "approved", req: req }\n'
    "    finish { req: req, approved: true }\n"
    "  }\n"
    "  fail { req: req, approved: false }\n"
    "}\n"
    'h1 = start approval(req: "r1")\nh2 = start approval(req: "r2")\nfinish await [h1, h2]\n',
    "C33": 'finish [keys(json_parse("{\\"b\\": 1, \\"a\\": {\\"d\\": 2, \\"c\\": 3}}")), '
    'json_parse("[1, 2.5, null]")]',
    "C37": "process p() { finish 1 }\nstart = 5\nh = start p()\nfinish [start, (await h)?]\n",
    "C39": "items = [3, 1, 2]\ntotal = 0\nfor i in items { total = total + i }\n"
    "for i in range(len(items)) { items[i] = items[i] * 10 }\n"
    "finish { total: total, items: items }\n",
    "C41": "process worker(t: Tools, n: int) {\n  out = []\n  for i in range(n) {\n"
    "    v = await t.inc({ i: i })?\n    out = push(out, v)\n  }\n  finish out\n}\n"
    "finish (await start worker(t: tools, n: 3))?\n",
    "C43a": "x = 5\nfinish x.field\n",
    "C43b": "finish len(5)",
    "C43c": "finish len(1, 2)",
    "C45a": 'r = { ok: false, error: "custom failure" }\nfinish r?\n',
    "C45b": "r = 5\nfinish r?\n",
    "C47": "process p(x: int) { finish x + 1 }\nh = start p(x: 1)\n"
    "finish [await h?, (await h)?, await h]\n",
    "C49": '@label(title: "Load", description: "reads input")\nx = await tools.read({})?\n'
    '@label(title: "Worker")\nprocess w(v: str) {\n  @label(title: "Done")\n  finish v\n}\n'
    "finish (await start w(v: x))?\n",
    "C51": "type Item = { id: int, label: str? }\n"
    'process show(item: Item) -> str { finish format("#{} {}", item.id, item.label) }\n'
    'finish (await start show(item: { id: 7, label: "seven" }))?\n',
    "C53": "finish await { a: tools.read({})?, b: [tools.read({}), 5] }",
    "C55": 'a = await tools.v({})?\nfinish [a or "b", a and "b", "x" or a, true or missing_name, '
    "a or a]\n",
    "C27-fixed": 'r = await tools.read({ path: "a.txt" })\nv = (r?)\n'
    'finish v == "alpha" ? "yes" : "no"\n',
}


@pytest.mark.parametrize("case", sorted(OK_PROGRAMS))
def test_program_parses_and_links(case: str) -> None:
    module = link(parse(OK_PROGRAMS[case]), CATALOG)
    assert module.main


def _error(source: str):
    diags = check(source, CATALOG)
    assert len(diags) == 1, diags
    return diags[0]


def test_c25_unclosed_block() -> None:
    d = _error("if true {\n  x = 1\n")
    assert (d.code, d.message, d.line, d.column) == (
        "parse_error", "expected `}`, found end of input", 3, 1)


def test_c27_unwrap_then_ternary_on_next_line() -> None:
    d = _error('r = await tools.read({ path: "a.txt" })\nv = r?\n'
               'finish v == "alpha" ? "yes" : "no"\n')
    assert (d.code, d.message, d.line, d.column) == (
        "parse_error", "expected `:`, found identifier `v`", 3, 8)


def test_c31_static_operand_check_plus() -> None:
    d = _error("finish {} + 1")
    assert (d.code, d.message) == ("link_error", "operator `+` does not accept {  } and int")


def test_c31_static_operand_check_and() -> None:
    d = _error("finish 1 and 2")
    assert (d.code, d.message) == ("link_error", "operator `and` does not accept int and int")


def test_c35_no_exponent_literals() -> None:
    d = _error("finish [1.5e3]")
    assert (d.code, d.message, d.line, d.column) == (
        "parse_error", "expected `]`, found identifier `e3`", 1, 12)


def test_c49_stacked_labels() -> None:
    d = _error('@label(title: "A")\n@label(title: "B")\nx = 1\n')
    assert d.code == "parse_error"
    assert d.message == ("@label can annotate statements or process declarations, but not "
                         "other declarations or another @label")
    assert (d.line, d.column) == (2, 1)


def test_c49_unknown_label_field() -> None:
    d = _error('@label(name: "a")\nx = 1\n')
    assert (d.code, d.message, d.line, d.column) == (
        "parse_error", "invalid @label annotation: unknown field `name`", 1, 8)


def test_c51_argument_type_mismatch() -> None:
    d = _error("type Item = { id: int, label: str? }\n"
               'process show(item: Item) -> str { finish format("#{} {}", item.id, item.label) }\n'
               'finish (await start show(item: { id: "x" }))?\n')
    assert (d.code, d.message) == (
        "link_error",
        "process `show` argument `item` expects { id: int, label: str? }, got { id: str }")


def test_c57_if_is_not_an_expression() -> None:
    d = _error("x = if true { 1 } else { 2 }")
    assert (d.code, d.message, d.line, d.column) == ("parse_error", "unexpected `if`", 1, 5)
    assert d.hint == "use `cond ? yes : no` for inline conditionals"


def test_parse_error_is_a_lang_error() -> None:
    with pytest.raises(LangError) as info:
        parse("x = ")
    assert info.value.code == "parse_error"
    assert info.value.diagnostic.message == "unexpected end of input"
