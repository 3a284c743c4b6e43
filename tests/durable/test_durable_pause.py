"""Pausing runs by hand (ADR 0032): a paused run is claimed by no worker; an attempt in
flight finishes and is recorded; a wait keeps its deadline, and one that passed while the
run was paused is met on unpause. Both backends."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from lashflow import Engine, LashflowError, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.testing import FakeClock

CALLS: list[str] = []
GATE: dict[str, asyncio.Event] = {}


@tool
async def slow(n: int) -> int:
    CALLS.append("slow")
    GATE["started"].set()
    await GATE["go"].wait()
    return n + 1


@tool
async def after(n: int) -> int:
    CALLS.append("after")
    return n * 2


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(seconds=60)))


FLOW = "process p() {\n  a = await tools.slow({n: 1})?\n  b = await tools.after({n: a})?\n  finish b\n}"
APPROVAL = "process q() {\n  r = await tools.approve({})\n  finish r\n}"


@pytest.fixture(autouse=True)
def fresh() -> None:
    CALLS.clear()
    GATE["started"], GATE["go"] = asyncio.Event(), asyncio.Event()


async def test_a_pause_lets_the_attempt_in_flight_finish_and_stops_the_run(
        backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[slow, after]) as worker, \
            Engine(db=backend_url, tools=[slow, after]) as operator:
        driving = asyncio.create_task(worker.run(FLOW, run_id="r"))
        await GATE["started"].wait()
        assert await operator.pause("r", "checking the card service", by="ann") \
            is RunStatus.PAUSED
        drive = worker.driver.active("r")
        assert drive is not None
        while not drive.flags.pause_requested:  # the watcher beside the drive tells it
            await asyncio.sleep(0.02)
        GATE["go"].set()
        stopped = await driving
        assert stopped.status is RunStatus.PAUSED and CALLS == ["slow"]
        steps = await operator.steps("r")
        assert [(s.tool, s.status) for s in steps] == [("tools.slow", "done")]  # recorded
        record = await operator.get_record("r")
        assert record.lease_owner is None and record.meta["paused"]["by"] == "ann"
        assert "r" not in await worker.store.claimable(worker.clock.now())
        with pytest.raises(LashflowError) as info:
            await worker.resume("r")
        assert info.value.code == "run_paused" and "ann" in info.value.message
        page = await operator.runs(status="paused")
        [summary] = page.runs
        assert summary.paused is not None
        assert summary.paused["reason"] == "checking the card service"
        assert summary.to_json()["paused"]["by"] == "ann"
        assert await operator.unpause("r") is RunStatus.QUEUED
        done = await worker.resume("r")
        assert (done.status, done.result, CALLS) == (RunStatus.FINISHED, 4, ["slow", "after"])


async def test_a_deadline_that_passes_while_paused_is_met_on_unpause(backend_url: str) -> None:
    clock = FakeClock(1000.0)
    async with Engine(db=backend_url, tools=[approve], clock=clock) as engine:
        parked = await engine.run(APPROVAL, run_id="w")
        assert parked.status is RunStatus.WAITING
        assert await engine.pause("w") is RunStatus.PAUSED
        paused = await engine.get("w")
        assert paused.waiting and paused.waiting[0].until == pytest.approx(1060.0)
        clock.advance(61)
        assert await engine.store.claimable(clock.now()) == []  # due, but paused
        assert (await engine.recover()) == []
        assert await engine.unpause("w") is RunStatus.QUEUED
        assert "w" in await engine.store.claimable(clock.now())
        done = await engine.resume("w")
        assert done.status is RunStatus.FINISHED
        assert done.result == {"ok": False, "error": "pending tool completion timed out"}


async def test_pausing_twice_keeps_the_first_and_stopped_runs_are_refused(
        backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[approve, after]) as engine:
        await engine.run(APPROVAL, run_id="w")
        await engine.pause("w", "first", by="ann")
        await engine.pause("w", "second", by="bob")
        assert (await engine.get_record("w")).meta["paused"]["reason"] == "first"
        finished = await engine.run("process f() { finish 1 }", run_id="f")
        assert finished.status is RunStatus.FINISHED
        for run_id, code, call in (("f", "run_settled", engine.pause),
                                   ("f", "run_not_paused", engine.unpause)):
            with pytest.raises(LashflowError) as info:
                await call(run_id)
            assert info.value.code == code


async def test_a_paused_run_can_be_cancelled(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[approve]) as engine:
        await engine.run(APPROVAL, run_id="w")
        await engine.pause("w")
        assert await engine.cancel("w", reason="not needed") is RunStatus.CANCELLED
