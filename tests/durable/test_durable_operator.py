"""Retry and fork: recorded successes replay, the failed step and those after it run
again with their history kept; a fork copies the journal before a step, may set a step's
result by hand, and is linked both ways."""

from __future__ import annotations


import pytest

from lashflow import Engine, LashflowError, RunStatus, ToolResult, tool

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
