"""``resolve-step`` (ADR 0032): an operator records a step's outcome by hand, checked
against the tool's output schema and journaled with who and why; the run then goes on
from it. Both backends."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lashflow import Engine, LashflowError, PendingCompletion, RunStatus, ToolCall, ToolResult, tool

CALLS: list[str] = []


class Shipped(BaseModel):
    tracking: str


@tool
async def ship(order: str) -> Shipped:
    CALLS.append("ship")
    return ToolResult.failure("carrier down")  # type: ignore[return-value]


@tool
async def ask(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


SHIP = ('process s() {\n  t = await tools.ship({order: "o1"})?\n'
        '  finish t\n}')
ASK = "process a() {\n  r = await tools.ask({})?\n  finish r\n}"


async def test_a_failed_step_resolved_by_hand_lets_the_run_finish(backend_url: str) -> None:
    CALLS.clear()
    async with Engine(db=backend_url, tools=[ship]) as engine:
        failed = await engine.run(SHIP, run_id="s")
        assert failed.status is RunStatus.FAILED
        with pytest.raises(LashflowError) as info:  # not what the tool returns
            await engine.resolve_step("s", "1", result={"tracking": 7})
        assert info.value.code == "input_invalid" and "$.tracking" in info.value.message
        view = await engine.resolve_step("s", "1", result={"tracking": "T-1"},
                                         reason="shipped by phone", by="ann")
        assert view.status == "done"
        record = await engine.get_record("s")
        assert record.status == "queued"
        [action] = record.meta["operator_actions"]
        assert (action["by"], action["reason"], action["step"]) == (
            "ann", "shipped by phone", view.step_key)
        done = await engine.resume("s")
        assert (done.status, done.result, CALLS) == (RunStatus.FINISHED, {"tracking": "T-1"},
                                                     ["ship"])
        [step] = await engine.steps("s")
        assert [a.status for a in step.attempts] == ["failed", "ok"]
        assert "resolved by hand by ann: shipped by phone" in str(step.attempts[-1].message)
        with pytest.raises(LashflowError) as info:
            await engine.resolve_step("s", "1", result={"tracking": "T-2"})
        assert info.value.code == "run_not_resolvable"


async def test_a_pending_step_resolved_by_hand_spends_its_key(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[ask]) as engine:
        parked = await engine.run(ASK, run_id="a")
        key = parked.waiting[0].key
        await engine.resolve_step("a", "1", error="answered on the phone: no")
        done = await engine.resume("a")
        assert done.status is RunStatus.FAILED  # `?` on the error the operator recorded
        assert "answered on the phone: no" in (done.error.message if done.error else "")
        with pytest.raises(LashflowError) as info:
            await engine.complete(key, ToolResult.ok(1))
        assert info.value.code in ("completion_already_resolved", "unknown_completion_key")
