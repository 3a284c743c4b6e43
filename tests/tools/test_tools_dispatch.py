"""The batch dispatcher: concurrency, emission order, step keys, limits, cancel grace."""

import asyncio

import pytest

from lashflow.errors import LashflowError
from lashflow.testing import FakeClock
from lashflow.tools import DispatchCall, Dispatcher, MemoryJournal, ToolCall, ToolRegistry, ToolResult, tool


async def until(predicate, what="condition", turns=100_000):
    """Yield to the loop until ``predicate`` holds; counted in loop turns, not seconds, so
    a loaded machine cannot make it fail (nothing here waits on anything outside)."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what}: not after {turns} turns of the event loop")


async def test_reverse_finish_reports_in_source_order_and_runs_concurrently():
    gates = [asyncio.Event() for _ in range(5)]
    started: list[int] = []
    finished: list[int] = []

    @tool
    async def step(i: int) -> int:
        started.append(i)
        await gates[i].wait()
        finished.append(i)
        return i * 10

    dispatcher = Dispatcher(ToolRegistry([step]))
    journal = MemoryJournal()
    calls = [DispatchCall("tools", "step", {"i": i}, f"site:0:{i}") for i in range(5)]
    batch = asyncio.ensure_future(dispatcher.batch(calls, run_id="r", journal=journal))
    # every call is in flight before any may finish: they overlap
    await until(lambda: len(started) == 5, "all five calls to start")
    assert finished == []
    for i in reversed(range(5)):
        gates[i].set()
        await until(lambda: i in finished, f"call {i} to finish")
    results = await batch
    assert finished == [4, 3, 2, 1, 0]
    assert [r.outcome.value for r in results] == [0, 10, 20, 30, 40]
    assert [r.step_key for r in results] == [f"site:0:{i}" for i in range(5)]
    assert [r.wrapper for r in results] == [{"ok": True, "value": i * 10} for i in range(5)]
    # the journal keys attempts by the step fixed at formation, not by completion order
    for i in range(5):
        assert journal.attempts(f"site:0:{i}")[0].outcome.value == i * 10


async def test_hundred_calls_are_all_in_flight_at_once():
    started: list[int] = []
    release = asyncio.Event()

    @tool
    async def nap() -> None:
        started.append(1)
        await release.wait()  # run one after another, the first would wait here for ever

    dispatcher = Dispatcher(ToolRegistry([nap]))
    batch = asyncio.ensure_future(
        dispatcher.batch([DispatchCall("tools", "nap", {}, str(i)) for i in range(100)]))
    await until(lambda: len(started) == 100, "all hundred calls to start")
    assert not batch.done()
    release.set()
    results = await batch
    assert len(results) == 100 and all(r.outcome.status == "ok" for r in results)


async def test_unknown_tool_refuses_the_whole_batch_before_running():
    ran = []

    @tool
    async def real() -> int:
        ran.append(1)
        return 1

    dispatcher = Dispatcher(ToolRegistry([real]))
    with pytest.raises(LashflowError) as info:
        await dispatcher.batch([DispatchCall("tools", "real", {}), DispatchCall("tools", "ghost", {})])
    assert info.value.code == "unknown_tool" and ran == []


async def test_mixed_outcomes_keep_order_and_default_step_keys():
    @tool
    async def mixed(kind: str) -> ToolResult:
        if kind == "boom":
            raise ValueError("boom")
        if kind == "err":
            return ToolResult.err("declined")
        return ToolResult.ok(kind)

    dispatcher = Dispatcher(ToolRegistry([mixed]))
    results = await dispatcher.batch([DispatchCall("tools", "mixed", {"kind": k}) for k in ("a", "boom", "err")])
    assert [r.step_key for r in results] == ["0", "1", "2"]
    assert [r.wrapper for r in results] == [
        {"ok": True, "value": "a"}, {"ok": False, "error": "boom"}, {"ok": False, "error": "declined"},
    ]
    assert results[1].outcome.code == "tool_exception"
    with pytest.raises(ValueError, match="share a step key"):
        await dispatcher.batch([DispatchCall("tools", "mixed", {"kind": "a"}, "x"),
                                DispatchCall("tools", "mixed", {"kind": "a"}, "x")])


async def test_a_call_continues_the_attempt_numbering_it_is_given():
    @tool
    async def echo(call: ToolCall) -> dict:
        return call.input

    call = DispatchCall("tools", "echo", {"args": [1, 2]}, "abc:2", first_attempt=2)
    result = await Dispatcher(ToolRegistry([echo])).call(call)
    assert result.outcome.value == {"args": [1, 2]} and result.outcome.attempts == 2


@pytest.mark.parametrize("limit_on", ["tool", "dispatcher"])
async def test_max_concurrency(limit_on):
    in_flight = 0
    peak = 0
    release = asyncio.Event()

    @tool(max_concurrency=2 if limit_on == "tool" else None)
    async def slot() -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await release.wait()
        in_flight -= 1
        return 1

    dispatcher = Dispatcher(ToolRegistry([slot]), max_concurrency=2 if limit_on == "dispatcher" else None)
    batch = asyncio.ensure_future(dispatcher.batch([DispatchCall("tools", "slot", {}, str(i)) for i in range(6)]))
    await until(lambda: in_flight == 2, "two calls in flight")
    for _ in range(20):
        await asyncio.sleep(0)
    assert in_flight == 2  # the others queue
    release.set()
    results = await batch
    assert peak == 2 and len(results) == 6


async def test_max_concurrency_is_engine_wide_across_batches():
    in_flight = 0
    peak = 0
    release = asyncio.Event()

    @tool(max_concurrency=1)
    async def exclusive() -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await release.wait()
        in_flight -= 1

    dispatcher = Dispatcher(ToolRegistry([exclusive]))
    a = asyncio.ensure_future(dispatcher.batch([DispatchCall("tools", "exclusive", {}, "a")], run_id="r1"))
    b = asyncio.ensure_future(dispatcher.batch([DispatchCall("tools", "exclusive", {}, "a")], run_id="r2"))
    await until(lambda: in_flight == 1, "one call in flight")
    for _ in range(20):
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(a, b)
    assert peak == 1


async def test_cancel_gives_fifty_ms_grace_then_reports_cancelled():
    clock = FakeClock()
    cancel = asyncio.Event()
    quick_release = asyncio.Event()
    stubborn_cancelled = asyncio.Event()

    @tool
    async def quick() -> str:
        await quick_release.wait()
        return "finished within grace"

    @tool
    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stubborn_cancelled.set()
            raise
        return "never"

    @tool
    async def instant() -> str:
        return "done before cancel"

    dispatcher = Dispatcher(ToolRegistry([quick, stubborn, instant]), clock=clock)
    journal = MemoryJournal()
    batch = asyncio.ensure_future(dispatcher.batch(
        [DispatchCall("tools", n, {}, n) for n in ("quick", "stubborn", "instant")], journal=journal, cancel=cancel))
    await until(lambda: journal.attempts("instant") and journal.attempts("instant")[0].outcome is not None,
                "instant to finish")
    cancel.set()
    await clock.wait_for_sleepers(2)  # both unfinished calls are in their grace period
    assert clock.next_due() == pytest.approx(0.05)
    quick_release.set()
    await until(lambda: journal.attempts("quick")[0].outcome is not None, "quick to finish in grace")
    clock.advance(0.05)
    results = await asyncio.wait_for(batch, 5)
    assert [r.outcome.status for r in results] == ["ok", "cancelled", "ok"]
    assert results[1].wrapper == {"ok": False, "error": "tool call cancelled"}
    assert results[1].projected == "tool call cancelled"
    await asyncio.wait_for(stubborn_cancelled.wait(), 5)  # the abandoned task was really cancelled
    assert journal.attempts("stubborn")[0].outcome.status == "cancelled"


async def test_cancel_before_start_runs_nothing():
    ran = []

    @tool
    async def never() -> None:
        ran.append(1)

    cancel = asyncio.Event()
    cancel.set()
    journal = MemoryJournal()
    result = await Dispatcher(ToolRegistry([never])).call(DispatchCall("tools", "never", {}, "s"), cancel=cancel,
                                                          journal=journal)
    assert result.outcome.status == "cancelled" and result.outcome.attempts == 0 and ran == []
    assert journal.attempts("s") == []


async def test_cancel_while_queued_for_a_slot():
    release = asyncio.Event()
    cancel = asyncio.Event()
    started = []

    @tool(max_concurrency=1)
    async def one(i: int) -> int:
        started.append(i)
        await release.wait()
        return i

    clock = FakeClock()
    dispatcher = Dispatcher(ToolRegistry([one]), clock=clock)
    batch = asyncio.ensure_future(dispatcher.batch([DispatchCall("tools", "one", {"i": i}, str(i)) for i in range(3)],
                                                   cancel=cancel))
    await until(lambda: started == [0], "first call")
    cancel.set()
    await clock.wait_for_sleepers(1)
    clock.advance(0.05)
    results = await asyncio.wait_for(batch, 5)
    assert [r.outcome.status for r in results] == ["cancelled"] * 3
    assert [r.outcome.attempts for r in results] == [1, 0, 0] and started == [0]


async def test_projection_budget_and_tail():
    from lashflow.tools import ToolOutputBudgetConfig

    @tool
    async def big() -> str:
        return "\n".join(f"line {i}" for i in range(1000))

    @tool(output_tail=True)
    async def log() -> str:
        return "\n".join(f"line {i}" for i in range(1000))

    @tool
    async def fails() -> ToolResult:
        return ToolResult.failure("x" * 100_000, code="big")

    dispatcher = Dispatcher(ToolRegistry([big, log, fails]), budget=ToolOutputBudgetConfig(max_lines=3))
    head, tail, failed = await dispatcher.batch(
        [DispatchCall("tools", n, {}, f"st:{n}") for n in ("big", "log", "fails")], run_id="run9")
    assert head.projected.startswith("line 0\nline 1\nline 2\n\n...997 lines truncated...")
    assert "`lashflow output run9 st:big`" in head.projected
    assert tail.projected.endswith("\n\nline 997\nline 998\nline 999")
    assert head.outcome.value.count("\n") == 999  # the outcome keeps everything
    assert failed.projected == "x" * 100_000  # failures are never truncated
