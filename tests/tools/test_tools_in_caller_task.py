"""ADR 0011: with a ``CancelSignal`` (the durable host's), a tool runs in the task that
dispatches it, not a task of its own; cancel grace still cuts it off."""

from __future__ import annotations

import asyncio

import pytest

from lashflow.testing import FakeClock
from lashflow.tools import DispatchCall, Dispatcher, MemoryJournal, ToolRegistry, tool
from lashflow.tools.attempts import CancelSignal


async def test_a_tool_runs_in_the_dispatching_task() -> None:
    seen: list[asyncio.Task | None] = []

    @tool
    async def where() -> str:
        seen.append(asyncio.current_task())
        await asyncio.sleep(0)
        seen.append(asyncio.current_task())
        return "here"

    dispatcher = Dispatcher(ToolRegistry([where]))
    [result] = await dispatcher.batch([DispatchCall("tools", "where", {}, "s")], cancel=CancelSignal())
    assert result.outcome.status == "ok" and result.outcome.value == "here"
    assert seen == [asyncio.current_task()] * 2


async def test_asyncio_timeout_inside_a_tool_is_the_tools_own_business() -> None:
    """``asyncio.timeout`` cancels the current task: that must end in the tool's own
    TimeoutError, never in a cancelled call or a cancelled caller."""
    @tool
    async def impatient() -> str:
        try:
            async with asyncio.timeout(0.02):
                await asyncio.sleep(10)
        except TimeoutError:
            return "gave up"
        return "never"

    dispatcher = Dispatcher(ToolRegistry([impatient]))
    [result] = await dispatcher.batch([DispatchCall("tools", "impatient", {}, "s")],
                                      cancel=CancelSignal())
    assert result.outcome.status == "ok" and result.outcome.value == "gave up"
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation left pending on this task


@pytest.mark.parametrize("reraise", [True, False], ids=["re-raises", "swallows"])
async def test_grace_expiry_cuts_off_a_stubborn_tool_and_leaves_the_caller_whole(
        reraise: bool) -> None:
    clock = FakeClock()
    cancel = CancelSignal()
    caught: list[bool] = []

    @tool
    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            caught.append(True)
            if reraise:
                raise
        return "returned anyway"

    dispatcher = Dispatcher(ToolRegistry([stubborn]), clock=clock)
    call = asyncio.ensure_future(dispatcher.batch([DispatchCall("tools", "stubborn", {}, "s")],
                                                  journal=MemoryJournal(), cancel=cancel))
    await asyncio.sleep(0.01)
    cancel.set()
    await clock.wait_for_sleepers(1)
    clock.advance(0.05)
    [result] = await asyncio.wait_for(call, 5)
    assert result.outcome.status == "cancelled"
    assert result.wrapper == {"ok": False, "error": "tool call cancelled"}
    assert not call.cancelled() and call.cancelling() == 0
    assert caught == [True]


async def test_a_tool_that_finishes_within_grace_keeps_its_result() -> None:
    clock = FakeClock()
    cancel = CancelSignal()
    release = asyncio.Event()

    @tool
    async def polite() -> str:
        await release.wait()
        return "finished within grace"

    dispatcher = Dispatcher(ToolRegistry([polite]), clock=clock)
    call = asyncio.ensure_future(dispatcher.batch([DispatchCall("tools", "polite", {}, "s")],
                                                  cancel=cancel))
    await asyncio.sleep(0.01)
    cancel.set()
    await clock.wait_for_sleepers(1)
    release.set()
    [result] = await asyncio.wait_for(call, 5)
    assert result.outcome.status == "ok" and result.outcome.value == "finished within grace"
    clock.advance(1.0)  # the grace timer is gone: nothing is cancelled later
    await asyncio.sleep(0.01)
    assert not call.cancelled()
