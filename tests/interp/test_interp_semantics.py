"""Statement and expression semantics through real programs."""


import pytest

from lashflow.interp.errors import LashRuntimeError
from interp_support import run


async def value(source, tools=None):
    _, result = await run(source, tools)
    assert result.status == "finished", result.error
    return result.value


async def error(source, tools=None):
    with pytest.raises(LashRuntimeError) as info:
        await run(source, tools)
    return info.value.kind, info.value.message


# -- value semantics ----------------------------------------------------------------------

async def test_copy_on_write_for_records_and_lists():
    assert await value("a = {x: [1]}\nb = a\nb.x[0] = 2\nfinish [a, b]") == [{"x": [1]}, {"x": [2]}]
    assert await value("a = [1, 2]\nb = a\nb = push(b, 3)\nfinish [a, b]") == [[1, 2], [1, 2, 3]]
    assert await value("a = [1]\nl = [a]\na[0] = 9\nfinish [a, l]") == [[9], [[1]]]
    assert await value('r = json_parse("{\\"a\\": 1}")\nr.self = r\nfinish r') == {"a": 1, "self": {"a": 1}}
    assert await value("xs = [1]\nxs = push(xs, xs)\nfinish xs") == [1, [1]]


async def test_iteration_sees_a_snapshot_of_the_list():
    src = "xs = [1, 2, 3]\nseen = []\nfor x in xs { xs[0] = 100\n seen = push(seen, x) }\nfinish [xs, seen]"
    assert await value(src) == [[100, 2, 3], [1, 2, 3]]


async def test_record_keys_keep_first_position_last_value():
    assert await value("r = {a: 1, b: 2, a: 4}\nfinish [keys(r), r.a]") == [["a", "b"], 4]
    assert await value('r = {b: 1}\nr["a"] = 2\nr["b"] = 3\nfinish keys(r)') == ["b", "a"]


@pytest.mark.parametrize("source, kind, message", [
    ('r = json_parse("{}")\nr.b.c = 1', "ValueError", "can't assign through missing field `.b`"),
    ('r = {}\nr["k"]["j"] = 1', "ValueError", "can't assign through missing key `k`"),
    ("l = [1]\nl[0.5] = 1", "TypeError", "list assignment index must be an integer"),
    ('l = [1]\nl["0"] = 1', "TypeError", "list assignment index must be an integer"),
    ("l = [1]\nl[1] = 1", "ValueError", "list assignment index out of bounds"),
    ("t = (1, 2)\nt[0] = 1", "TypeError", "can't assign tuple indexes; tuples are immutable"),
    ("n = 1\nn.f = 1", "TypeError", "can't assign `.f` on number"),
    ('s = "ab"\ns[0] = "x"', "TypeError", "can't assign index on string"),
    ("missing.f = 1", "UndefinedVariable", "unknown name `missing`"),
])
async def test_path_assignment_errors(source, kind, message):
    assert await error(source) == (kind, message)


async def test_negative_list_assignment_and_nested_mix():
    assert await value("l = [1, 2, 3]\nl[-1] = 9\nfinish l") == [1, 2, 9]
    assert await value('s = {g: [{c: 1}]}\ns.g[0]["c"] = 2\nfinish s') == {"g": [{"c": 2}]}


# -- reads --------------------------------------------------------------------------------

async def test_field_and_index_reads():
    src = ('r = json_parse("{\\"a\\": 1}")\nl = [1, 2, 3]\nfinish [r.missing, json_parse("null").x, l[-1], l[5], l["1"], l[true], '
           '"héllo"[1], r["a"], r[1], null[3], (1, 2)[1]]')
    assert await value(src) == [None, None, 3, None, 2, 2, "é", 1, None, None, 2]
    assert await error("l = [1]\nfinish l[0.5]") == ("TypeError", "index must be an integer")
    assert await error("x = 5\nfinish x[0]") == ("TypeError", "can't index number")
    assert await error("finish undefined_name") == ("UndefinedVariable", "unknown name `undefined_name`")


# -- operators ----------------------------------------------------------------------------

async def test_operators():
    src = ('finish [-7 % 3, 7.5 % 2, true + 2, "10" < "9", "B" < "a", "10" < 9, null < 1, 1 == true, '
           '"1" == 1, 1 == 1.0, [] == [], {a: 1, b: 2} == {b: 2, a: 1}, not 1 == 2, "a" + null, [1] + [2]]')
    assert await value(src) == [-1, 1.5, 3, True, True, False, True, False, False, True, True, True,
                                False, "anull", [1, 2]]
    assert await value("x = 1 / 0\ny = 0 / 0\nfinish [x, y, to_string(x), to_string(-1/0), to_string(y)]") \
        == [None, None, "inf", "-inf", "NaN"]
    assert await error("finish [1] + (2,)") == ("TypeError", "can't concatenate list and tuple")
    assert await error('finish json_parse("[1]") < 1') == ("TypeError", "expected a number, got list")
    assert await error('finish "x" * 2') == ("TypeError", "expected a number")


async def test_truthiness_and_logic_return_booleans():
    src = ('a = json_parse("5")\nb = json_parse("null")\n'
           'finish [[] ? 1 : 2, {} ? 1 : 2, () ? 1 : 2, "" ? 1 : 2, 0 ? 1 : 2, not [], a and "x", b or 0]')
    assert await value(src) == [1, 1, 2, 2, 2, False, True, False]


async def test_short_circuit_and_lazy_ternary():
    assert await value("finish [false and nope, true or nope, true ? 1 : nope]") == [False, True, 1]


# -- loops --------------------------------------------------------------------------------

async def test_loop_variables_are_restored():
    src = ('x = "keep"\nfor x in [1, 2] { y = x }\nfor z in [1, 2] { }\n'
           'c = [x for x in [7, 8]]\nfinish [x, y, c]')
    assert await value(src) == ["keep", 2, [7, 8]]
    assert await error("for z in [1] { }\nfinish z") == ("UndefinedVariable", "unknown name `z`")


async def test_loop_restore_after_break_and_in_effect_loops():
    src = ('x = 0\nfor x in [1, 2, 3] { if x == 2 { break } }\n'
           'y = 0\nfor y in [1, 2] { tools.noop({}) }\nfinish [x, y]')
    assert await value(src, {"noop": {"ok": 1}}) == [0, 0]


async def test_for_requires_list_or_tuple():
    assert await error('for c in json_parse("\\"abc\\"") { }') == ("NonListIteration", "`for` expects a list or tuple")
    assert await error('for c in json_parse("{}") { tools.noop({}) }', {"noop": {"ok": 1}}) == \
        ("NonListIteration", "`for` expects a list or tuple")


async def test_comprehensions():
    src = ("finish [[x * y for x in [1, 2] for y in range(3) if y > 0], "
           "[p for p in (1, 2, 3) if p != 2]]")
    assert await value(src) == [[1, 2, 2, 4], [1, 3]]


async def test_comprehension_with_effects():
    tools = {"double": lambda payload: payload["n"] * 2}
    src = "finish [await tools.double({n: i})? for i in range(4) if i != 2]"
    assert await value(src, tools) == [0, 2, 6]


async def test_while_with_effects_break_continue():
    src = ("n = 0\nout = []\nwhile n < 10 {\n n = n + 1\n if n % 2 == 0 { continue }\n"
           " if n > 7 { break }\n out = push(out, await tools.echo({n: n})?)\n}\nfinish out")
    assert await value(src, {"echo": "echo"}) == [{"n": 1}, {"n": 3}, {"n": 5}, {"n": 7}]


async def test_finish_from_inside_nested_loops():
    assert await value("for i in range(5) { for j in range(5) { if i * j == 6 { finish [i, j] } } }") \
        == [2, 3]


async def test_falling_off_the_end_finishes_null():
    assert await value("x = 1") is None


# -- effects ------------------------------------------------------------------------------

async def test_tool_inputs_follow_spec():
    tools = {"t": "echo"}
    host, _ = await run('tools.t({a: 1})\ntools.t()\ntools.t(1, "x")\ntools.t([1])', tools)
    assert [c["input"] for c in host.calls] == [{"a": 1}, {}, {"args": [1, "x"]}, {"args": [[1]]}]


async def test_receiver_call_without_await_and_wrappers():
    tools = {"ok": {"ok": {"b": 1, "a": 2}}, "bad": {"error": {"code": 7}}}
    v = await value("finish [tools.ok({}), tools.bad({})]", tools)
    assert v == [{"ok": True, "value": {"a": 2, "b": 1}}, {"ok": False, "error": '{"code":7}'}]


async def test_aggregate_await_keeps_pure_leaves_and_raises_after_batch():
    tools = {"read": {"by": {"field": "p", "cases": {"a": {"ok": "alpha"}, "b": {"error": "missing file"}}}}}
    v = await value('finish await {left: tools.read({p: "a"})?, right: tools.read({p: "b"}), tag: "kept"}',
                    tools)
    assert v == {"left": "alpha", "right": {"ok": False, "error": "missing file"}, "tag": "kept"}
    with pytest.raises(LashRuntimeError) as info:
        await run('x = await [tools.read({p: "b"})?, tools.read({p: "a"})?]', tools)
    assert info.value.message == "`?` unwrapped failed module operation: missing file"


async def test_await_joins_nested_handles():
    src = ("process p(x: int) { finish x }\nh = start p(x: 1)\nk = start p(x: 2)\n"
           "finish await {pair: (h, [k]), n: 3}")
    v = await value(src)
    assert v == {"pair": [{"ok": True, "value": 1}, [{"ok": True, "value": 2}]],
                 "n": {"ok": False, "error": "expected handle record"}}


async def test_fail_runtime_error_in_child_and_fail_text():
    src = ('process bad() { x = 1\n finish x.y.z }\nprocess f() { fail {code: 7} }\n'
           'finish [await start bad(), await start f()]')
    v = await value(src)
    assert v == [{"ok": False, "error": "can't read `.y` from number"},
                 {"ok": False, "error": '{"code":7}'}]


async def test_unwrapping_a_failed_child():
    assert await error('process f() { fail "nope" }\nfinish (await start f())?') == \
        ("ValueError", "`?` unwrapped failed tool result: nope")


async def test_process_fail_result_code_and_message():
    from interp_support import build
    from lashflow.testing.memory_host import MemoryHost

    program = build('process f(v: any) { fail v }')
    for payload, text in [("plain", "plain"), ({"b": 1, "a": [2]}, '{"a":[2],"b":1}')]:
        result = await MemoryHost(program).run("f", {"v": payload})
        assert result.status == "failed"
        assert result.error.code == "process_failed" and result.error.message == text


async def test_signals_between_runs_and_ordinals():
    src = ('process w() { a = wait_signal("go")\n b = wait_signal("go")\n finish [a, b] }\n'
           'h = start w()\nsignal_run(h, "go", 1)\nsignal_run(h, "go", {x: 2})\nfinish (await h)?')
    assert await value(src) == [1, {"x": 2}]
    assert await error('signal_run(5, "go", 1)') == ("ValueError", "signal_run expects a process handle")


async def test_print_text_and_prints():
    host, result = await run('print "raw"\nprint (1, "a")\nprint {b: 1, a: 2.5}\nprint 1 + 0.5')
    assert result.prints == ["raw", '(1, "a")', '{"a":2.5,"b":1}', "1.5"]


async def test_sleep_values_are_checked():
    # a literal is refused when the file links; a computed value when the sleep runs
    assert (await error('d = "soon"\nsleep for d'))[1].startswith("sleep failed: invalid duration")
    assert await value('sleep for "5s"\nsleep for 10\nsleep until 0\nfinish 1') == 1


async def test_process_refs_and_resources_as_values():
    v = await value("process p() { finish 1 }\nfinish [p, tools]")
    assert v[0]["$lash_process"] is True and v[0]["process_name"] == "p"
    assert v[1] == {"__resource__": True, "alias": "tools", "type": "Tools"}
    from lashflow.interp.instructions import receiver_module

    with pytest.raises(LashRuntimeError, match="receiver for operation `x` is not a module authority"):
        receiver_module(1.0, "x")


async def test_host_errors_carry_line_and_column():
    with pytest.raises(LashRuntimeError) as info:
        await run('x = "soon"\nsleep for x')
    assert (info.value.line, info.value.column) == (2, 1)


async def test_children_never_awaited_still_finish_or_are_cancelled():
    src = ('process quick() { tools.noop({}) }\nprocess stuck() { x = wait_signal("never") }\n'
           'a = start quick()\nb = start stuck()\nfinish 1')
    host, result = await run(src, {"noop": {"ok": 1}}, signal_timeout=0.2)
    assert result.value == 1
    assert all(h.task.done() for h in host.world.runs.values() if h.task is not None)
    assert any(c["tool"] == "tools.noop" for c in host.calls)


async def test_cancel_a_child():
    src = ('process stuck() { x = wait_signal("never") }\nh = start stuck()\ncancel h\nfinish await h')
    assert await value(src) == {"ok": False, "error": "lashlang process was cancelled"}


async def test_yield_and_wake_observations():
    host, result = await run('process p() { yield {n: 1}\n wake "done"\n finish 2 }\nfinish (await start p())?')
    assert result.value == 2
    observed = [(e["kind"], e["value"], e["text"]) for e in host.events if e["kind"] in ("yield", "wake")]
    assert observed == [("yield", {"n": 1}, '{"n":1}'), ("wake", "done", "done")]


async def test_batch_keeps_pure_handle_leaves_as_they_are():
    src = ('process p() { finish 1 }\nh = start p()\n'
           'r = await [tools.one({}), h]\nfinish [r[0], r[1].__handle__]')
    assert await value(src, {"one": {"ok": 1}}) == [{"ok": True, "value": 1}, "process"]


async def test_interpreter_api_misuse_is_a_clear_error():
    from lashflow.errors import LashflowError
    from lashflow.interp.vm import Interpreter
    from interp_support import build

    vm = Interpreter(build("finish 1"))
    assert vm.start().value == 1
    with pytest.raises(LashflowError, match="already started"):
        vm.start()
    with pytest.raises(LashflowError, match="no effect is waiting"):
        vm.send(None)
    with pytest.raises(LashflowError, match="unknown process `nope`"):
        Interpreter(build("finish 1"), "nope")
