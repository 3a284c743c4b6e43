"""Attempts and retries: journal entries, backoff under a fake clock, cancel, context facts."""

import asyncio
from datetime import timedelta

import pytest

from lashflow.testing import FakeClock
from lashflow.tools import (
    NESTED_DISPATCH_MESSAGE, CallEnv, MemoryJournal, PendingCompletion, RetryPolicy, ToolCall, ToolRegistry,
    ToolResult, run_attempts, tool,
)


def entry_of(fn):
    return ToolRegistry([fn]).get(fn.definition.module, fn.definition.name)


def test_backoff_rule():
    policy = RetryPolicy.safe(max_attempts=10, base_delay=0.5, max_delay=30.0)
    assert [policy.delay(i) for i in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert policy.delay(0, requested_after=100.0) == 30.0  # the cap applies to `after` too
    assert policy.delay(3, requested_after=0.25) == 0.25
    uncapped = RetryPolicy.safe(max_attempts=3, base_delay=1.0, max_delay=0)
    assert uncapped.delay(10) == 1024.0 and uncapped.delay(0, requested_after=500) == 500
    assert RetryPolicy.never().max_attempts == 1 and RetryPolicy.never().delay(0) == 0.0
    assert RetryPolicy.safe().max_attempts == 3
    assert RetryPolicy.safe(base_delay=1).delay(5000) == 30.0  # no overflow
    with pytest.raises(ValueError):
        RetryPolicy.safe(max_attempts=0)


async def test_retry_counts_and_delays_under_fake_clock():
    clock = FakeClock(start=1000.0)
    seen: list[tuple[int, int, float]] = []

    @tool(retry=RetryPolicy.safe(max_attempts=4, base_delay=0.5, max_delay=30.0))
    async def flaky(call: ToolCall) -> ToolResult:
        seen.append((call.context.attempt, call.context.max_attempts, clock.now()))
        return ToolResult.retryable_failure("upstream 503", code="upstream")

    journal = MemoryJournal()
    task = asyncio.ensure_future(run_attempts(entry_of(flaky), {}, CallEnv("r1", "s:0"), journal, clock))
    expected_delays = [0.5, 1.0, 2.0]
    for n, delay in enumerate(expected_delays, start=1):
        await clock.wait_for_sleepers(1)
        assert len(seen) == n
        assert clock.next_due() == pytest.approx(clock.now() + delay)
        clock.advance(delay - 0.01)
        await asyncio.sleep(0)
        assert len(seen) == n  # not yet
        clock.advance(0.01)
    outcome = await task
    assert [s[0] for s in seen] == [1, 2, 3, 4] and {s[1] for s in seen} == {4}
    assert [round(s[2] - 1000.0, 6) for s in seen] == [0.0, 0.5, 1.5, 3.5]
    assert outcome.status == "exhausted" and outcome.attempts == 4 and outcome.code == "upstream"
    assert outcome.to_wrapper() == {"ok": False, "error": "upstream 503"}
    entries = journal.attempts("s:0")
    assert [e.attempt for e in entries] == [1, 2, 3, 4]
    assert [e.outcome.retry_after for e in entries] == [0.5, 1.0, 2.0, None]
    assert [e.outcome.status for e in entries] == ["failed", "failed", "failed", "exhausted"]
    assert all(not e.durable_start for e in entries)  # idempotent tool: lazy start allowed


async def test_requested_after_and_zero_delay():
    clock = FakeClock()
    calls = []

    @tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=0.0))
    async def immediate() -> ToolResult:
        calls.append(clock.now())
        return ToolResult.retryable_failure("again")

    outcome = await run_attempts(entry_of(immediate), {}, CallEnv(), MemoryJournal(), clock)
    assert outcome.status == "exhausted" and outcome.attempts == 3 and clock.sleepers == 0

    @tool(retry=RetryPolicy.safe(max_attempts=2, base_delay=0.5, max_delay=10.0))
    async def asks_for_later() -> ToolResult:
        return ToolResult.retryable_failure("rate limited", after=timedelta(seconds=60))

    task = asyncio.ensure_future(run_attempts(entry_of(asks_for_later), {}, CallEnv(), MemoryJournal(), clock))
    await clock.wait_for_sleepers(1)
    assert clock.next_due() == pytest.approx(clock.now() + 10.0)  # capped by max_delay
    clock.advance(10.0)
    assert (await task).attempts == 2


@pytest.mark.parametrize("result, status", [
    (ToolResult.err("no"), "err"),
    (ToolResult.err({"reason": "declined"}), "err"),
    (ToolResult.cancelled("stop"), "cancelled"),
    (ToolResult.failure("broken", code="bad"), "failed"),
    (ToolResult.ok(1), "ok"),
])
async def test_only_retryable_failures_are_retried(result, status):
    calls = []

    @tool(retry=RetryPolicy.safe(max_attempts=5, base_delay=0))
    async def once() -> ToolResult:
        calls.append(1)
        return result

    outcome = await run_attempts(entry_of(once), {}, CallEnv(), MemoryJournal(), FakeClock())
    assert outcome.status == status and len(calls) == 1 and outcome.final


async def test_err_message_is_value_or_its_json():
    assert ToolResult.err("plain").message == "plain"
    assert ToolResult.err({"b": 1, "a": [1, "é"]}).message == '{"b":1,"a":[1,"é"]}'
    assert ToolResult.err("x").code == "tool_error"
    assert ToolResult.err("x", code="declined").code == "declined"


async def test_exception_is_retryable_tool_exception_with_traceback():
    clock = FakeClock()

    @tool(retry=RetryPolicy.safe(max_attempts=2, base_delay=0))
    async def explodes() -> int:
        raise KeyError("missing thing")

    journal = MemoryJournal()
    outcome = await run_attempts(entry_of(explodes), {}, CallEnv(step_key="x"), journal, clock)
    assert outcome.status == "exhausted" and outcome.code == "tool_exception" and outcome.attempts == 2
    assert outcome.message == "'missing thing'"
    assert "Traceback" in outcome.traceback and "KeyError" in outcome.traceback
    assert outcome.to_wrapper() == {"ok": False, "error": "'missing thing'"}  # no traceback for the process
    assert all("KeyError" in e.outcome.traceback for e in journal.attempts("x"))


async def test_never_policy_runs_once_even_for_retryable():
    @tool
    async def fails() -> int:
        raise RuntimeError("nope")

    outcome = await run_attempts(entry_of(fails), {}, CallEnv(), MemoryJournal(), FakeClock())
    assert outcome.attempts == 1 and outcome.status == "exhausted" and outcome.code == "tool_exception"


async def test_cancel_during_retry_delay_ends_at_once():
    clock = FakeClock()
    cancel = asyncio.Event()

    @tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=5.0))
    async def flaky() -> ToolResult:
        return ToolResult.retryable_failure("down")

    journal = MemoryJournal()
    task = asyncio.ensure_future(run_attempts(entry_of(flaky), {}, CallEnv(step_key="s", cancel=cancel), journal, clock))
    await clock.wait_for_sleepers(1)
    cancel.set()
    outcome = await asyncio.wait_for(task, 5)  # no clock advance needed
    assert outcome.status == "cancelled" and outcome.message == "tool call cancelled" and outcome.attempts == 1
    # attempt 1 stays recorded as failed; the cancel ends the step, it is not a second
    # record of attempt 1 (nor an attempt 2 that never ran)
    entries = journal.attempts("s")
    assert [(e.attempt, e.outcome.status.value) for e in entries] == [(1, "failed")]


async def test_context_facts_and_durable_start_for_non_idempotent():
    seen = {}

    @tool(idempotent=False, retry=RetryPolicy.safe(max_attempts=5))
    async def inspect_ctx(call: ToolCall) -> str:
        ctx = call.context
        seen.update(attempt=ctx.attempt, max=ctx.max_attempts, key=ctx.idempotency_key, run=ctx.run_id,
                    step=ctx.step_key)
        return "done"

    journal = MemoryJournal()
    outcome = await run_attempts(entry_of(inspect_ctx), {}, CallEnv("run-7", "ab12:3"), journal, FakeClock(),
                                 first_attempt=3)
    assert outcome.status == "ok" and outcome.attempts == 3
    assert seen == {"attempt": 3, "max": 5, "key": "run-7/ab12:3", "run": "run-7", "step": "ab12:3"}
    entry = journal.attempts("ab12:3")[0]
    assert entry.attempt == 3 and entry.durable_start is True


async def test_an_attempts_context_is_made_when_the_tool_first_reads_it():
    seen: list = []

    @tool
    async def reads(call: ToolCall) -> int:
        seen.append(call.made_context())  # not read yet: not made
        context = call.context
        seen.append(context is call.context is call.made_context())
        context.usage["requests"] = 2  # what a direct completion records
        return context.attempt

    @tool
    async def ignores(i: int) -> int:  # typed parameters: it never sees the call
        return i

    outcome = await run_attempts(entry_of(reads), {}, CallEnv("r", "s"), MemoryJournal(), FakeClock())
    assert seen == [None, True]
    assert outcome.value == 1 and outcome.usage == {"requests": 2}
    plain = await run_attempts(entry_of(ignores), {"i": 4}, CallEnv("r", "s"), MemoryJournal(), FakeClock())
    assert plain.value == 4 and plain.usage == {} and plain.attempts == 1
    call = ToolCall.of_attempt({"i": 1}, "t", "m", "r", "s", 2, 3, None, None, None, None, None)
    assert repr(call).startswith("ToolCall(input={'i': 1}, name='t', module='m', context=<")
    assert (call.context.attempt, call.context.max_attempts, call.context.idempotency_key) == (2, 3, "r/s")
    with pytest.raises(AttributeError):
        call.missing  # noqa: B018  # only the context is made on demand


async def test_interrupted_last_attempt_still_runs_once_more():
    @tool
    async def fine(call: ToolCall) -> list:
        return [call.context.attempt, call.context.max_attempts]

    outcome = await run_attempts(entry_of(fine), {}, CallEnv(), MemoryJournal(), FakeClock(), first_attempt=2)
    assert outcome.value == [2, 2]


async def test_pending_without_key_fails_once_and_never_waits():
    calls = []

    @tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=0))
    async def forgetful() -> ToolResult:
        calls.append(1)
        return ToolResult.pending(PendingCompletion().with_deadline(timedelta(hours=1)))

    outcome = await run_attempts(entry_of(forgetful), {}, CallEnv(), MemoryJournal(), FakeClock())
    assert outcome.status == "failed" and outcome.code == "pending_tool_missing_completion_key"
    assert outcome.final and outcome.key is None and outcome.deadline_at is None and len(calls) == 1


async def test_pending_with_key_records_key_and_absolute_deadline():
    clock = FakeClock(start=500.0)
    keys = []

    @tool
    async def approval(call: ToolCall) -> ToolResult:
        keys.append(await call.context.completion_key())
        keys.append(await call.context.completion_key())
        return ToolResult.pending(PendingCompletion().with_deadline(timedelta(minutes=2)).fail_turn_on_timeout())

    outcome = await run_attempts(entry_of(approval), {}, CallEnv("r", "s"), MemoryJournal(), clock)
    assert outcome.status == "pending" and not outcome.final
    assert outcome.key == keys[0] == keys[1] and keys[0].startswith("lfk_")
    assert outcome.deadline_at == 620.0
    assert outcome.pending.on_timeout == "fail_turn"
    with pytest.raises(ValueError):
        outcome.to_wrapper()


async def test_nested_dispatch_is_refused():
    @tool
    async def nesting(call: ToolCall) -> list:
        results = await call.context.dispatch().batch([("quote", {}), ("other", {"x": 1})])
        return [[r.kind.value, r.code, r.message] for r in results]

    outcome = await run_attempts(entry_of(nesting), {}, CallEnv(), MemoryJournal(), FakeClock())
    expected = ["err", "nested_tool_dispatch_unavailable", NESTED_DISPATCH_MESSAGE]
    assert outcome.value == [expected, expected]
    assert NESTED_DISPATCH_MESSAGE == ("nested tool batch dispatch is unavailable inside an atomic tool attempt; "
                                       "decompose the work into process steps")


async def test_outcome_json_round_trip():
    from lashflow.tools import ToolOutcome

    @tool
    async def approval(call: ToolCall) -> ToolResult:
        await call.context.completion_key()
        return ToolResult.pending(PendingCompletion().with_deadline(5).ignore_on_cancel())

    outcome = await run_attempts(entry_of(approval), {}, CallEnv(), MemoryJournal(), FakeClock())
    import json
    assert ToolOutcome.from_json(json.loads(json.dumps(outcome.to_json()))) == outcome
