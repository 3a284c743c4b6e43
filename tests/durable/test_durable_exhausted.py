"""A retry policy that runs out may pause the run for an operator instead of failing it
(``on_exhausted="pause"`` on the tool, or for a run or a process; ADR 0032): the last
error is shown, ``retry`` runs the call again with a fresh budget. Both backends."""

from __future__ import annotations

import pytest

from lashflow import Engine, LashflowError, RetryPolicy, RunStatus, ToolResult, tool

STATE = {"down": True, "calls": 0}


@tool(retry=RetryPolicy.safe(max_attempts=2, base_delay=0, max_delay=0),
      on_exhausted="pause")
async def charge(n: int) -> int:
    STATE["calls"] += 1
    if STATE["down"]:
        return ToolResult.retryable_failure("card service down")  # type: ignore[return-value]
    return n


@tool(retry=RetryPolicy.safe(max_attempts=2, base_delay=0, max_delay=0))
async def notify(n: int) -> int:
    STATE["calls"] += 1
    if STATE["down"]:
        return ToolResult.retryable_failure("mail relay down")  # type: ignore[return-value]
    return n


PAY = "process pay(n: int) {\n  r = await tools.charge({n: n})?\n  finish r\n}"
NOTE = "process note(n: int) {\n  r = await tools.notify({n: n})?\n  finish r\n}"


@pytest.fixture(autouse=True)
def fresh() -> None:
    STATE.update(down=True, calls=0)


async def test_a_tool_that_runs_out_of_retries_pauses_the_run(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[charge]) as engine:
        paused = await engine.run(PAY, "pay", {"n": 5}, run_id="p")
        assert paused.status is RunStatus.PAUSED and STATE["calls"] == 2
        assert paused.error is not None and paused.error.code == "retries_exhausted"
        assert "card service down" in paused.error.message
        assert paused.paused is not None and paused.paused["by"] == "retry policy"
        [listed] = (await engine.runs(status="paused")).runs
        assert listed.run_id == "p"
        with pytest.raises(LashflowError) as info:
            await engine.unpause("p")
        assert "lashflow retry p" in info.value.message
        assert (await engine.bulk("unpause", "status=paused")).acted == 0  # left for retry
        STATE["down"] = False
        done = await engine.retry("p")
        assert (done.status, done.result, STATE["calls"]) == (RunStatus.FINISHED, 5, 3)


async def test_a_run_or_a_process_may_ask_for_the_pause(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[notify]) as engine:
        failed = await engine.run(NOTE, "note", {"n": 1}, run_id="plain")
        assert failed.status is RunStatus.FAILED  # the default: the call fails
        asked = await engine.run(NOTE, "note", {"n": 1}, run_id="asked", on_exhausted="pause")
        assert asked.status is RunStatus.PAUSED
        engine.exhausted_defaults["note"] = "pause"
        by_process = await engine.run(NOTE, "note", {"n": 2}, run_id="by-process")
        assert by_process.status is RunStatus.PAUSED
        with pytest.raises(LashflowError) as info:
            await engine.run(NOTE, "note", {"n": 3}, on_exhausted="explode")
        assert info.value.code == "input_invalid"
