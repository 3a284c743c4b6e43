"""An idempotent call writes nothing when it starts (its first write is its outcome), yet
a subscriber of the run hears of a call that has been running a while (ADR 0038): its
``started`` event comes before its outcome's, in the run's one gap-free log, on both
backends; a call that is cancelled leaves no announcement behind it."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from lashflow import Engine, RunStatus, ToolResult, tool

GATE: dict[str, asyncio.Event] = {}


@tool
async def slow(n: int) -> ToolResult:
    await GATE["open"].wait()
    return ToolResult.ok(n * 2)


SOURCE = """
process twice(n: int) {
  a = await tools.slow({n: n})?
  b = await [tools.slow({n: a}), tools.slow({n: a + 1})]
  finish b
}
"""


async def until(events: AsyncIterator[Any], wanted: Any) -> list[Any]:
    """The events up to and including the first ``wanted`` accepts."""
    seen = []
    async for event in events:
        if event is None:
            continue
        seen.append(event)
        if wanted(event):
            return seen
    raise AssertionError("the stream ended")


async def announced_run(engine: Engine) -> tuple[Any, AsyncIterator[Any], list[Any]]:
    """A run started with its first call held, its stream, and the stream's events up to
    that call's announcement."""
    GATE["open"] = asyncio.Event()
    handle = await engine.start(SOURCE, "twice", {"n": 1})
    events = await engine.subscribe(handle.run_id)
    started = await until(events, lambda e: e.kind == "step" and e.data["status"] == "started")
    return handle, events, started


async def test_a_running_idempotent_call_is_announced_before_its_outcome(
        backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[slow]) as engine:
        handle, events, started = await announced_run(engine)
        announced = started[-1].data
        assert (announced["tool"], announced["step_kind"]) == ("tools.slow", "tool")
        assert announced["attempts"][0]["status"] == "started"
        assert "index" not in announced  # the step has no row yet
        _, steps_before = await engine.store.load_journal(handle.run_id)
        assert steps_before == []  # nothing was written for it: only the event
        GATE["open"].set()
        seen = started + await until(events, lambda e: e.kind == "run"
                                     and e.data["status"] == "finished")
        await events.aclose()  # type: ignore[attr-defined]
        assert (await handle.result()).status is RunStatus.FINISHED
    steps = [(e.data["step"], e.data["status"]) for e in seen if e.kind == "step"]
    for key in {key for key, _ in steps}:  # each call: started (if announced), then done
        mine = [status for k, status in steps if k == key]
        assert mine[-1] == "done" and set(mine[:-1]) <= {"started"}, (key, mine)
    assert steps[0] == (announced["step"], "started")
    assert [e.seq for e in seen] == list(range(seen[0].seq, seen[0].seq + len(seen)))


async def test_a_cancelled_call_leaves_no_announcement_after_the_run_ends(
        backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[slow]) as engine:
        handle, events, _ = await announced_run(engine)
        await engine.cancel(handle.run_id, "enough")
        assert (await handle.result()).status is RunStatus.CANCELLED
        await events.aclose()  # type: ignore[attr-defined]
        logged = await engine.store.run_events(handle.run_id)
    assert logged[-1].kind == "run" and logged[-1].data["status"] == "cancelled"


WIDE = """
process wide(n: int) {
  finish await [tools.slow({n: i}) for i in range(n)]
}
"""


async def test_the_calls_of_a_batch_announced_together_share_one_write(
        backend_url: str) -> None:
    """A fan-out's calls come due together at the announcer: their started events share
    a write (they took one each), each before its call's outcome."""
    async with Engine(db=backend_url, tools=[slow]) as engine:
        commits: list[Any] = []
        commit = engine.store.commit

        async def recording(change: Any) -> None:
            commits.append(change)
            await commit(change)

        engine.store.commit = recording  # type: ignore[method-assign]
        GATE["open"] = asyncio.Event()
        handle = await engine.start(WIDE, "wide", {"n": 10})
        events = await engine.subscribe(handle.run_id)
        seen: list[Any] = []
        while len(seen) < 10:  # every call's started event
            seen += [e for e in await until(events, lambda e: e.kind == "step")
                     if e.data["status"] == "started"]
        GATE["open"].set()
        assert (await handle.result()).status is RunStatus.FINISHED
        await events.aclose()  # type: ignore[attr-defined]
        logged = await engine.store.run_events(handle.run_id)
    # one write per firing of the announcer that finds calls due: the ten calls start in
    # one turn of the loop, so a firing or two (three if the process was descheduled
    # while they started) where one write a call was ten
    writes = [c for c in commits if c.events]
    assert len(writes) < 10 and sum(len(c.events) for c in writes) == 10, \
        [len(c.events) for c in writes]
    steps = [(e.data["step"], e.data["status"]) for e in logged if e.kind == "step"]
    for key in {key for key, _ in steps}:
        assert [status for k, status in steps if k == key] == ["started", "done"], key
