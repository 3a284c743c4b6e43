"""Retry and fork: recorded successes replay, the failed step and those after it run
again with their history kept; a fork copies the journal before a step, may set a step's
result by hand, and is linked both ways."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from lashflow import (
    Engine, LashflowError, PendingCompletion, RunStatus, ToolCall, ToolResult, tool,
)


CALLS: list[str] = []
DOWN = {"charge": True}


@tool
async def quote(n: int) -> int:
    CALLS.append("quote")
    return n * 10


@tool
async def charge(amount: int) -> ToolResult:
    CALLS.append("charge")
    if DOWN["charge"]:
        return ToolResult.failure("card service down")
    return ToolResult.ok({"charged": amount})


@tool
async def approve(amount: int) -> bool:
    CALLS.append("approve")
    return amount < 100


FLOW = """
process pay() {
  q = await tools.quote({n: 3})?
  ok = await tools.approve({amount: q})?
  if not ok { fail "not approved" }
  r = await tools.charge({amount: q})?
  finish r
}
"""


@pytest.fixture(autouse=True)
def fresh() -> None:
    CALLS.clear()
    DOWN["charge"] = True
    FLAKY["bad"] = 2
    GATE.clear()



async def test_retry_replays_successes_and_reruns_the_failed_step(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[quote, charge, approve]) as engine:
        failed = await engine.run(FLOW, run_id="r")
        assert failed.status is RunStatus.FAILED
        assert CALLS == ["quote", "approve", "charge"]
        DOWN["charge"] = False
        retried = await engine.retry("r")
        assert retried.status is RunStatus.FINISHED and retried.result == {"charged": 30}
        assert CALLS == ["quote", "approve", "charge", "charge"]  # only the failed step ran
        charge_step = [s for s in await engine.steps("r") if s.tool == "tools.charge"][0]
        assert [(a.attempt, a.status) for a in charge_step.attempts] == [(1, "failed"), (2, "ok")]
        # a finished run is not retried; a second retry after it fails again works
        with pytest.raises(LashflowError) as info:
            await engine.retry("r")
        assert info.value.code == "run_not_retryable"


async def test_retry_of_a_cancelled_run_clears_the_cancel(backend_url: str) -> None:
    source = 'q = await tools.quote({n: 1})?\nsleep for "1h"\nfinish q'
    async with Engine(db=backend_url, tools=[quote]) as engine:
        parked = await engine.run(source, run_id="c")
        assert parked.status is RunStatus.WAITING
        assert await engine.cancel("c") is RunStatus.CANCELLED
        again = await engine.retry("c")
        assert again.status is RunStatus.WAITING  # sleeping again, not cancelled at once
        assert not (await engine.get_record("c")).cancel_requested
        assert CALLS == ["quote"]


async def test_fork_from_a_step_with_a_result_set_by_hand(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[quote, charge, approve]) as engine:
        DOWN["charge"] = False
        done = await engine.run(FLOW, run_id="orig")
        assert done.result == {"charged": 30}
        steps = await engine.steps("orig")
        approve_key = steps[1].step_key
        CALLS.clear()
        # what if approval had said no?
        forked = await engine.fork("orig", approve_key, set={approve_key: False},
                                   run_id_of_fork="what-if")
        assert forked.status is RunStatus.FAILED and forked.error is not None
        assert "not approved" in forked.error.message
        assert CALLS == []  # quote replayed, approve set by hand, charge never reached
        # a fork from the third row (show's numbering) re-runs charge only
        again = await engine.fork("orig", "3")
        assert again.status is RunStatus.FINISHED and CALLS == ["charge"]
        detail = await engine.run_detail("what-if")
        assert (await engine.get_record("what-if")).meta["forked_from"] == {
            "run_id": "orig", "step": approve_key}
        assert (await engine.get_record("orig")).meta["forks"] == ["what-if", again.run_id]
        assert detail.steps[1].attempts[0].message == "set by fork"
        with pytest.raises(LashflowError) as info:
            await engine.fork("orig", "nope")
        assert info.value.code == "unknown_step"


HANDLED = """
process ask() {
  first = await tools.approve({amount: 500})
  q = await tools.quote({n: 3})?
  r = await tools.charge({amount: q})?
  finish r
}
"""


@tool
async def deny(amount: int) -> ToolResult:
    CALLS.append("deny")
    return ToolResult.err("no")


async def test_retry_restarts_at_the_step_that_stopped_the_run(backend_url: str) -> None:
    """An earlier `err` the program handled is not where a retry restarts."""
    flow = HANDLED.replace("approve", "deny")
    async with Engine(db=backend_url, tools=[quote, charge, deny]) as engine:
        assert (await engine.run(flow, run_id="h")).status is RunStatus.FAILED
        plan = await engine.retry_plan("h")
        assert [s.tool for s in plan] == ["tools.charge"]
        assert CALLS == ["deny", "quote", "charge"]  # the plan ran nothing
        DOWN["charge"] = False
        assert (await engine.retry("h")).status is RunStatus.FINISHED
        assert CALLS == ["deny", "quote", "charge", "charge"]
        # --from: the operator names an earlier step (by show's row number)
        rows = await engine.steps("h")
        assert [s.tool for s in rows] == ["tools.deny", "tools.quote", "tools.charge"]


async def test_retry_from_a_step_and_its_dry_run(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[quote, charge, approve]) as engine:
        assert (await engine.run(FLOW, run_id="f")).status is RunStatus.FAILED
        plan = await engine.retry_plan("f", "2")
        assert [s.tool for s in plan] == ["tools.approve", "tools.charge"]
        with pytest.raises(LashflowError) as info:
            await engine.retry_plan("f", "9")
        assert info.value.code == "unknown_step"
        CALLS.clear()
        DOWN["charge"] = False
        assert (await engine.retry("f", from_step="2")).status is RunStatus.FINISHED
        assert CALLS == ["approve", "charge"]


FAN = """
process many() {
  xs = await [tools.flaky_charge({amount: n})? for n in [1, 2, 3]]
  finish xs
}
"""

FLAKY = {"bad": 2}


GATE: dict[str, asyncio.Event] = {}


@tool
async def flaky_charge(amount: int) -> ToolResult:
    gate = GATE.setdefault("last done", asyncio.Event())
    if amount == 1 and FLAKY["bad"]:  # the first member finishes after the last one
        await gate.wait()
    CALLS.append(f"charge {amount}")
    if amount == 3:
        gate.set()
    if amount == FLAKY["bad"]:
        return ToolResult.failure("card service down")
    return ToolResult.ok(amount)


async def test_retry_of_a_fan_out_reruns_only_its_failed_members(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[flaky_charge]) as engine:
        assert (await engine.run(FAN, run_id="fan")).status is RunStatus.FAILED
        assert CALLS == ["charge 2", "charge 3", "charge 1"]
        rows = await engine.steps("fan")
        assert [r.step_key.rsplit(":", 1)[1] for r in rows] == ["0", "1", "2"]  # index order
        assert [r.args for r in await engine.retry_plan("fan")] == [{"amount": 2}]
        CALLS.clear()
        FLAKY["bad"] = 0
        again = await engine.retry("fan")
        assert again.status is RunStatus.FINISHED and again.result == [1, 2, 3]
        assert CALLS == ["charge 2"]


@tool
async def ask_human(call: ToolCall) -> ToolResult:
    CALLS.append("ask")
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


async def test_retry_of_a_run_cancelled_while_it_waited_waits_afresh(backend_url: str) -> None:
    source = 'process p() {\n  a = await tools.ask_human({})?\n  finish a\n}'
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(Engine(db=backend_url, tools=[ask_human]))
        parked = await engine.run(source, run_id="w")
        assert parked.status is RunStatus.WAITING
        key = parked.waiting[0].key
        assert await engine.cancel("w") is RunStatus.CANCELLED
        again = await engine.retry("w")
        assert again.status is RunStatus.WAITING and CALLS == ["ask", "ask"]
        assert again.waiting[0].key == key
        info = await engine.completion(key)
        assert info is not None and info.state == "open"
        await engine.complete(key, {"yes": True}, resume=True)
        done = await engine.get("w")
        assert done.status is RunStatus.FINISHED and done.result == {"yes": True}


async def test_fork_set_takes_the_row_numbers_show_prints(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[quote, charge, approve]) as engine:
        DOWN["charge"] = False
        await engine.run(FLOW, run_id="orig")
        CALLS.clear()
        forked = await engine.fork("orig", "2", set={"2": False})
        assert forked.status is RunStatus.FAILED and "not approved" in forked.error.message
        assert CALLS == []
        with pytest.raises(LashflowError) as info:
            await engine.fork("orig", "2", set={"3": 1})
        assert info.value.code == "unknown_step"
        assert "1 (" in info.value.message and "2 (" in info.value.message


HANG: dict[str, asyncio.Event] = {}


@tool
async def hang() -> int:
    HANG["started"].set()
    await asyncio.Event().wait()  # until the cancel reaches the call
    return 1


async def test_a_cancel_reason_reaches_a_run_driven_by_another_engine(backend_url: str) -> None:
    HANG["started"] = asyncio.Event()
    source = 'process p() {\n  a = await tools.hang({})?\n  finish a\n}'
    async with Engine(db=backend_url, tools=[hang]) as driver, \
            Engine(db=backend_url, tools=[hang]) as operator:
        driving = asyncio.create_task(driver.run(source, run_id="busy"))
        await HANG["started"].wait()
        assert await operator.cancel("busy", reason="wrong customer") is RunStatus.RUNNING
        stopped = await driving
        assert stopped.status is RunStatus.CANCELLED
        assert stopped.error is not None and "wrong customer" in stopped.error.message
        again = await operator.get("busy")
        assert again.error is not None and "wrong customer" in again.error.message


async def test_a_key_answered_without_resume_is_no_longer_shown_open(backend_url: str) -> None:
    source = 'process p() {\n  a = await tools.ask_human({})?\n  finish a\n}'
    async with Engine(db=backend_url, tools=[ask_human]) as engine:
        key = (await engine.run(source, run_id="k")).waiting[0].key
        [(_, before)] = await engine.waiting()
        assert before.state is None and before.resolve.startswith(f"lashflow complete {key}")
        assert await engine.complete(key, {"yes": 1}, resume=False) is RunStatus.WAITING
        [(run_id, after)] = await engine.waiting()
        assert (run_id, after.state, after.resolve) == ("k", "resolved", "lashflow resume k")
        [shown] = (await engine.run_detail("k")).summary.waiting
        assert shown.state == "resolved" and shown.to_json()["state"] == "resolved"
        assert (await engine.resume("k")).result == {"yes": 1}


async def test_the_same_answer_twice_is_a_duplicate_not_an_error(backend_url: str) -> None:
    source = 'process p() {\n  a = await tools.ask_human({})?\n  finish a\n}'
    async with Engine(db=backend_url, tools=[ask_human]) as engine:
        key = (await engine.run(source, run_id="d")).waiting[0].key
        first = await engine.deliver(key, ToolResult.ok({"yes": 1}), resume=False)
        again = await engine.deliver(key, ToolResult.ok({"yes": 1}), resume=True)
        assert (first.duplicate, again.duplicate) == (False, True)
        assert again.status is RunStatus.FINISHED  # the repeat still drives the run on
        with pytest.raises(LashflowError) as info:
            await engine.deliver(key, ToolResult.ok({"yes": 2}))
        assert info.value.code == "completion_already_resolved"
