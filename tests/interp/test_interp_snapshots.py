"""Snapshot at every effect boundary, JSON round trip, restore, continue: same result."""

import json

import pytest

from lashflow.interp import effects as fx
from lashflow.testing.memory_host import MemoryHost
from lashflow.interp.vm import Interpreter
from interp_support import build

TOOLS = {"inc": lambda p: p.get("i", 0) + 1, "read": {"seq": [{"ok": 1}, {"error": "e2"}] * 20},
         "echo": "echo"}

PROGRAMS = [
    # list and range cursors, loop restore, tuples, NaN, resources in the env
    ('x = "keep"\nt = (1, "a")\nn = 0 / 0\nr = tools\nout = []\n'
     'for x in [1, 2, 3] { for i in range(2) { out = push(out, await tools.inc({i: x * 10 + i})?) } }\n'
     'finish [x, t, out, to_string(n), r]'),
    # effects inside a comprehension and a ternary, short circuit
    "finish [await tools.inc({i: i})? for i in range(3) if i != 1 and tools.echo({}).ok]",
    # recursive await over several handles, aggregate batch
    ('process p(x: int) { y = await tools.inc({i: x})?\n finish y }\n'
     'hs = [start p(x: 1), start p(x: 2)]\nj = await {a: hs, b: (start p(x: 3),)}\n'
     'b = await {u: tools.read({}), v: [tools.read({}), 5]}\nfinish [j, b]'),
    # while with an effectful condition and print
    ('n = 0\nwhile (await tools.inc({i: n})?) < 4 { n = n + 1\n print n }\nfinish n'),
    # record built around an effect, path assignment with an effectful value
    ('s = {g: {c: [0, 0]}}\ns.g.c[1] = await tools.inc({i: 5})?\nfinish {s: s, k: tools.echo({k: 1})}'),
]


async def drive(program, host, restore_each_time: bool):
    vm = Interpreter(program)
    effect = vm.start()
    while not isinstance(effect, (fx.Finish, fx.Fail)):
        answer = await host.perform(effect)
        if restore_each_time:
            snap = json.loads(json.dumps(vm.snapshot(), allow_nan=False))
            vm = Interpreter.restore(program, snap)
        effect = vm.send(answer)
    return effect.value


@pytest.mark.parametrize("source", PROGRAMS)
async def test_restore_at_every_effect_gives_the_same_result(source):
    program = build(source, TOOLS)
    straight = await drive(program, MemoryHost(program, dict(TOOLS)), False)
    resumed = await drive(program, MemoryHost(program, dict(TOOLS)), True)
    assert json.dumps(resumed, sort_keys=True) == json.dumps(straight, sort_keys=True)


async def test_snapshot_before_start_and_mismatch():
    program = build("finish await tools.inc({i: 1})?", TOOLS)
    vm = Interpreter.restore(program, Interpreter(program).snapshot())
    effect = vm.start()
    assert isinstance(effect, fx.ToolCall)
    other = build("finish 2", TOOLS)
    with pytest.raises(Exception) as info:
        Interpreter.restore(other, vm.snapshot())
    assert getattr(info.value, "code", "") == "snapshot_mismatch"


async def test_steps_are_site_and_occurrence():
    program = build("for i in range(3) { tools.inc({i: i}) }\nx = await [tools.inc({}), tools.inc({})]",
                    TOOLS)
    vm = Interpreter(program)
    effect = vm.start()
    steps = []
    while isinstance(effect, (fx.ToolCall, fx.ToolBatch)):
        steps.append(effect.step)
        if isinstance(effect, fx.ToolBatch):
            steps.extend(c.step for c in effect.calls)
            effect = vm.send([{"ok": True, "value": 1}] * len(effect.calls))
        else:
            effect = vm.send({"ok": True, "value": 1})
    site = steps[0].rsplit(":", 1)[0]
    assert site and steps[:3] == [f"{site}:1", f"{site}:2", f"{site}:3"]
    batch = steps[3]
    assert batch.endswith(":1") and steps[4:] == [f"{batch}:0", f"{batch}:1"]
    assert vm.snapshot()["occ"][site] == 3


async def test_wait_signal_ordinals_survive_restore():
    program = build('process w() { a = wait_signal("s")\n b = wait_signal("s")\n finish [a, b] }')
    vm = Interpreter(program, "w")
    first = vm.start()
    assert (first.name, first.ordinal) == ("s", 1)
    vm = Interpreter.restore(program, json.loads(json.dumps(vm.snapshot())))
    second = vm.send({"n": 1})
    assert second.ordinal == 2
    assert vm.send(2).value == [{"n": 1}, 2]
