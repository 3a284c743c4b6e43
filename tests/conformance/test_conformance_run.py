"""Every runtime program of CONFORMANCE.md through the Python API:
parse -> link (permissive catalog) -> compile -> execute on MemoryHost."""

from __future__ import annotations

import json

import pytest

from lashflow.lang.catalog import Catalog
from lashflow.interp.compiler import compile_module
from lashflow.interp.errors import LashRuntimeError
from lashflow.testing.memory_host import MemoryHost

READ_BY_PATH = {"by": {"field": "path", "cases": {"a.txt": {"ok": "alpha"},
                                                  "b.txt": {"error": "missing file"}}}}


def build(source: str, tools: dict):
    from lashflow.lang import link, parse

    module = parse(source)
    catalog = Catalog.permissive({"tools": sorted(tools) or ["noop"]})
    module = link(module, catalog)
    return compile_module(module, catalog)


async def run(source: str, tools: dict | None = None, signals: dict | None = None):
    tools = tools or {}
    host = MemoryHost(build(source, tools), tools, signals)
    return host, await host.run()


def same(a, b) -> bool:
    """JSON equality with record key order ignored."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


FINISHED = [
    ("C01", "finish [1 + 2 * 3, (1 + 2) * 3, 10 - 2 - 3, 7 % 3, -7 % 3, 2 * -3, 9 / 2, 0.1 + 0.2]",
     {}, [7, 9, 5, 1, -1, -6, 4.5, 0.30000000000000004]),
    ("C03", "# hash comment\nx = 1; y = 2 // slash comment\nlet z = x + y\nfinish z\n", {}, 3),
    ("C05", 'n = 7\nlabel = n > 10 ? "big" : n > 5 ? "mid" : "small"\n'
            'safe = false ? undefined_thing : "ok"\nfinish [label, safe]\n', {}, ["mid", "ok"]),
    ("C07", 'state = { groups: { a: { counts: [1, 2] } }, total: 0 }\nalias = state\ng = "a"\n'
            'state.groups[g].counts[1] = 5\nstate.total = state.total + 5\nstate["extra"] = true\n'
            'finish { state: state, alias: alias }\n', {},
     {"state": {"groups": {"a": {"counts": [1, 5]}}, "total": 5, "extra": True},
      "alias": {"groups": {"a": {"counts": [1, 2]}}, "total": 0}}),
    ("C09", 'pair = 1, "x"\none = (1,)\nnone = ()\nfinish { pair: pair, first: pair[0], '
            'n: len(pair) + len(one) + len(none), text: to_string(pair), eq: (1, 2) == [1, 2], '
            'cat: (1,) + (2, 3) }\n', {},
     {"pair": [1, "x"], "first": 1, "n": 3, "text": '(1, "x")', "eq": False, "cat": [1, 2, 3]}),
    ("C11", "n = 0\nlog = []\nwhile true {\n  n = n + 1\n  if n % 2 == 0 { continue }\n"
            "  if n > 7 { break }\n  log = push(log, n)\n}\nfinish { n: n, log: log }\n", {},
     {"n": 9, "log": [1, 3, 5, 7]}),
    ("C13", 'finish [trim("  hi  "), split("a,b,,c", ","), split("ab", ""), join(["a", 1, true, null], "-"),'
            ' starts_with("hello", "he"), ends_with("hello", "lo"), contains("hello", "ell"), '
            'find("hello", "l"), find("hello", "l", 3), find("hello", "z"), to_string(12), '
            'to_int("3.9"), to_int(-2.5), to_float("2.5"), len("héllo")]', {},
     ["hi", ["a", "b", "", "c"], ["", "a", "b", ""], "a-1-true-null", True, True, True, 2, 3, None,
      "12", 3, -2, 2.5, 5]),
    ("C15", 'finish [format("a={} b={}", 1, "x"), format("b={1} a={0}", "A", "B"), '
            'format("{{literal}} {}", [1, 2]), format("plain"), format("{}", { k: null })]', {},
     ["a=1 b=x", "b=B a=A", "{literal} [1,2]", "plain", '{"k":null}']),
    ("C17", 'finish [to_string({ z: 1, a: [1, 2.5, "s"], m: null }), to_string(true), to_string(null), '
            'to_string(3.0), to_string(-0.5), "n=" + 3 + true]', {},
     ['{"a":[1,2.5,"s"],"m":null,"z":1}', "true", "null", "3", "-0.5", "n=3true"]),
    ("C21", 'process double(n: int) { finish n * 2 }\nprocess boom(msg: str) { fail msg }\n'
            'a = start double(n: 21)\nb = start boom(msg: "bad input")\nboth = await { a: a, b: b }\n'
            'finish { a: both.a, b: both.b, direct: (await a)?, list: await [a, b] }\n', {},
     {"a": {"ok": True, "value": 42}, "b": {"ok": False, "error": "bad input"}, "direct": 42,
      "list": [{"ok": True, "value": 42}, {"ok": False, "error": "bad input"}]}),
    ("C23", 'T = Type { name: str, tags: list[str], age: int?, kind: enum["a", "b"], note: str | null }\n'
            'good = validate({ name: "x", tags: ["t"], kind: "a", note: null, extra: 1 }, T)\n'
            'finish good\n', {},
     {"name": "x", "tags": ["t"], "kind": "a", "note": None, "extra": 1}),
    ("C27b", 'r = await tools.read({ path: "a.txt" })\nv = (r?)\nfinish v == "alpha" ? "yes" : "no"\n',
     {"read": {"ok": "alpha"}}, "yes"),
    ("C33", 'finish [keys(json_parse("{\\"b\\": 1, \\"a\\": {\\"d\\": 2, \\"c\\": 3}}")), '
            'json_parse("[1, 2.5, null]")]', {}, [["a", "b"], [1, 2.5, None]]),
    ("C37", "process p() { finish 1 }\nstart = 5\nh = start p()\nfinish [start, (await h)?]\n", {}, [5, 1]),
    ("C39", "items = [3, 1, 2]\ntotal = 0\nfor i in items { total = total + i }\n"
            "for i in range(len(items)) { items[i] = items[i] * 10 }\nfinish { total: total, items: items }\n",
     {}, {"total": 6, "items": [30, 10, 20]}),
    ("C47", "process p(x: int) { finish x + 1 }\nh = start p(x: 1)\nfinish [await h?, (await h)?, await h]\n",
     {}, [2, 2, {"ok": True, "value": 2}]),
    ("C49", '@label(title: "Load", description: "reads input")\nx = await tools.read({})?\n'
            '@label(title: "Worker")\nprocess w(v: str) {\n  @label(title: "Done")\n  finish v\n}\n'
            'finish (await start w(v: x))?\n', {"read": {"ok": "data"}}, "data"),
    ("C51", 'type Item = { id: int, label: str? }\n'
            'process show(item: Item) -> str { finish format("#{} {}", item.id, item.label) }\n'
            'finish (await start show(item: { id: 7, label: "seven" }))?\n', {}, "#7 seven"),
    ("C53", "finish await { a: tools.read({})?, b: [tools.read({}), 5] }",
     {"read": {"seq": [{"ok": 1}, {"error": "e2"}]}},
     {"a": 1, "b": [{"ok": False, "error": "e2"}, 5]}),
    ("C55", 'a = await tools.v({})?\nfinish [a or "b", a and "b", "x" or a, true or missing_name, a or a]\n',
     {"v": {"ok": 0}}, [True, False, True, True, False]),
]


@pytest.mark.parametrize("case, source, tools, expected", FINISHED, ids=[c[0] for c in FINISHED])
async def test_finished(case, source, tools, expected):
    _, result = await run(source, tools)
    assert result.status == "finished", result.error
    assert same(result.value, expected)


RUNTIME_ERRORS = [
    ("C19", 'a = await tools.read({ path: "a.txt" })?\nb = await tools.read({ path: "b.txt" })?\nfinish [a, b]\n',
     {"read": READ_BY_PATH}, "ValueError", "`?` unwrapped failed module operation: missing file"),
    ("C43a", "x = 5\nfinish x.field", {}, "TypeError", "can't read `.field` from number"),
    ("C43b", "finish len(5)", {}, "TypeError",
     "`len` requires a string, tuple, list, record, or null; use `.size` for images"),
    ("C43c", "finish len(1, 2)", {}, "TypeError", "`len` takes 1 arg(s), got 2"),
    ("C45a", 'r = { ok: false, error: "custom failure" }\nfinish r?', {}, "ValueError",
     "`?` unwrapped failed tool result: custom failure"),
    ("C45b", "r = 5; finish r?", {}, "TypeError", "`?` expected a tool result wrapper, got number"),
]


@pytest.mark.parametrize("case, source, tools, kind, message", RUNTIME_ERRORS,
                         ids=[c[0] for c in RUNTIME_ERRORS])
async def test_runtime_errors(case, source, tools, kind, message):
    with pytest.raises(LashRuntimeError) as info:
        await run(source, tools)
    assert (info.value.kind, info.value.message) == (kind, message)
    assert info.value.code == "runtime_error" and info.value.line is not None


async def test_c19_makes_both_calls():
    host = MemoryHost(build('a = await tools.read({ path: "a.txt" })?\n'
                            'b = await tools.read({ path: "b.txt" })?\nfinish [a, b]\n',
                            {"read": READ_BY_PATH}), {"read": READ_BY_PATH})
    with pytest.raises(LashRuntimeError):
        await host.run()
    assert [c["input"] for c in host.calls] == [{"path": "a.txt"}, {"path": "b.txt"}]


async def test_c29_signals_yield_sleep_wake_fail():
    source = (
        'process approval(req: str) signals { decision: any } {\n  yield { waiting: req }\n'
        '  sleep for "5s"\n  d = wait_signal("decision")\n  if d.approved {\n'
        '    wake { kind: "approved", req: req }\n    finish { req: req, approved: true }\n  }\n'
        '  fail { req: req, approved: false }\n}\nh1 = start approval(req: "r1")\n'
        'h2 = start approval(req: "r2")\nfinish await [h1, h2]\n')
    host, result = await run(source, signals={"decision": [{"approved": True}, {"approved": False}]})
    assert same(result.value, [{"ok": True, "value": {"req": "r1", "approved": True}},
                               {"ok": False, "error": '{"approved":false,"req":"r2"}'}])
    children = [e["child"] for e in host.events if e["kind"] == "start"]
    kinds = [[(e["kind"], e.get("mode"), e.get("value") if e["kind"] == "sleep" else e.get("name"))
              for e in host.events_of(child) if e["kind"] not in ("finish", "fail")]
             for child in children]
    assert kinds[0] == [("yield", None, None), ("sleep", "for", "5s"),
                        ("wait_signal", None, "decision"), ("wake", None, None)]
    assert kinds[1] == kinds[0][:3]


async def test_c41_capability_passing():
    source = ("process worker(t: Tools, n: int) {\n  out = []\n  for i in range(n) {\n"
              "    v = await t.inc({ i: i })?\n    out = push(out, v)\n  }\n  finish out\n}\n"
              "finish (await start worker(t: tools, n: 3))?\n")
    tools = {"inc": {"seq": [{"ok": 10}, {"ok": 11}, {"ok": 12}]}}
    host, result = await run(source, tools)
    assert result.value == [10, 11, 12]
    assert [c["input"] for c in host.calls] == [{"i": 0}, {"i": 1}, {"i": 2}]
    start = next(e for e in host.events if e["kind"] == "start")
    assert start["args"]["t"] == {"__resource__": True, "type": "Tools", "alias": "tools"}


async def test_c53_is_one_batch_of_two():
    tools = {"read": {"seq": [{"ok": 1}, {"error": "e2"}]}}
    host, _ = await run("finish await { a: tools.read({})?, b: [tools.read({}), 5] }", tools)
    steps = [c["step"] for c in host.calls]
    assert len(steps) == 2 and steps[0].endswith(":0") and steps[1].endswith(":1")
    assert steps[0].rsplit(":", 1)[0] == steps[1].rsplit(":", 1)[0]
