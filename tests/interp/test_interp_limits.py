"""Every limit ends the run with limit_exceeded, never a hang."""

import time

import pytest

from lashflow.errors import LimitExceeded
from lashflow.interp.limits import Limits
from lashflow.testing.memory_host import MemoryHost
from interp_support import build


async def limited(source, limits, tools=None):
    host = MemoryHost(build(source, tools), tools or {}, limits=limits)
    with pytest.raises(LimitExceeded) as info:
        await host.run()
    assert info.value.code == "limit_exceeded"
    return info.value.message


async def test_endless_loop_ends_with_default_limit():
    started = time.process_time()  # CPU seconds: a busy machine does not inflate them
    message = await limited("while true {}", Limits())
    assert "10000000 interpreter steps" in message
    assert time.process_time() - started < 30


@pytest.mark.parametrize("source", [
    "while true {}",
    "n = 0\nwhile true { n = n + 1 }",
    "while true { if false { print 1 } }",  # instruction-level loop
    "while true { continue }",
    "x = [[i for i in range(1000)] for j in range(1000)]",
    "for i in range(1000000) { }",
])
async def test_step_limit(source):
    assert "interpreter steps" in await limited(source, Limits(max_steps=100_000))


async def test_steps_reset_at_each_effect():
    src = "for i in range(50) { for j in range(50) { } tools.noop({}) }\nfinish 1"
    host = MemoryHost(build(src, {"noop": {"ok": 1}}), {"noop": {"ok": 1}}, limits=Limits(max_steps=200))
    assert (await host.run()).value == 1


async def test_effect_limit():
    message = await limited("while true { tools.noop({}) }", Limits(max_effects=50), {"noop": {"ok": 1}})
    assert "more than 50 effects" in message


@pytest.mark.parametrize("source", [
    's = "x"\nwhile true { s = s + s }',
    "l = [1]\nwhile true { l = l + l }",
    "l = []\nwhile true { l = push(l, 1) }",
    'r = json_parse("{}")\nfor i in range(100000) { r[to_string(i)] = i }',
])
async def test_value_size_limit(source):
    assert "bytes per value" in await limited(source, Limits(max_value_bytes=1 << 16))


async def test_exponential_sharing_cannot_explode_serialisation():
    message = await limited("x = [1]\nfor i in range(200) { x = [x, x] }\nfinish x",
                            Limits(max_value_bytes=1 << 20))
    assert "bytes per value" in message


async def test_range_limit():
    message = await limited("x = range(11)", Limits(max_range_items=10))
    assert message == "`range` would create more than 10 items"


def test_deep_answer_is_a_limit_not_a_crash():
    from lashflow.interp.vm import Interpreter

    vm = Interpreter(build("x = await tools.t({})", {"t": 1}))
    vm.start()
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(LimitExceeded):
        vm.send({"ok": True, "value": deep})
