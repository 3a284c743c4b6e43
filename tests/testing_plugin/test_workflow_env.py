"""The ``lashflow_env`` fixture against real runs: time skipped, tools mocked by name,
crashes injected, outside events delivered. Each test runs on its own SQLite file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lashflow import RetryPolicy, ToolResult
from lashflow.errors import LashflowError
from lashflow.testing import Pending, assert_called, assert_finished, assert_status, assert_step

ROOT = Path(__file__).resolve().parents[2]
FULFILL = ROOT / "processes" / "fulfill.lash"
ORDER = {"order": {"id": "ord-7", "items": [{"sku": "lamp", "qty": 2, "price": 19.5}],
                   "total": 39.0}}


def test_approval_granted_runs_every_tool_once(lashflow_env) -> None:
    run = lashflow_env.run(FULFILL, ORDER)
    assert run.status == "waiting"
    assert [w.tool for w in run.waiting] == ["tools.request_approval"]
    lashflow_env.complete(run, "tools.request_approval", {"approved": True})
    assert_finished(run)
    assert run.result["charged"] is True
    assert [c.tool for c in lashflow_env.calls] == ["tools.quote", "tools.request_approval",
                                                    "tools.charge"]
    assert lashflow_env.calls_of("charge")[0].input == {"approval": {"approved": True}}


def test_a_deadline_passes_only_when_time_is_advanced_past_it(lashflow_env) -> None:
    run = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.advance("23h")
    assert run.status == "waiting"
    lashflow_env.advance(timedelta(hours=1))
    assert_status(run, "failed")
    assert "timed out" in run.error.message
    assert lashflow_env.elapsed == timedelta(hours=24)
    assert_called(lashflow_env, "tools.charge", times=0)


def test_retry_delays_pass_in_simulated_time(lashflow_env) -> None:
    charge = lashflow_env.mock("tools.charge", outcomes=[
        ConnectionError("card network down"), ConnectionError("card network down"),
        {"charged": True}], retry=RetryPolicy.safe(3, base_delay=600, max_delay=0))
    run = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.complete(run, "request_approval", {"approved": True})
    assert_finished(run, {"charged": True})
    assert_step(run, "tools.charge", state="ok", attempts=3)
    starts = [a.started_at for a in run.step("tools.charge").attempts]
    assert [b - a for a, b in zip(starts, starts[1:])] == [600.0, 1200.0]
    assert charge.call_count == 3 and [c.attempt for c in charge.calls] == [1, 2, 3]
    assert lashflow_env.elapsed == timedelta(minutes=30)


def test_mock_outcomes_run_out_with_a_clear_failure(lashflow_env) -> None:
    lashflow_env.mock("tools.quote", outcomes=[{"amount": 1}])
    lashflow_env.run(FULFILL, ORDER)
    second = lashflow_env.run(FULFILL, ORDER)
    assert_status(second, "failed")
    step = second.step("tools.quote")
    assert step.state == "failed"
    assert step.outcome["message"] == ("mock of tools.quote has no outcome left for call 2 "
                                       "(it was given 1)")


def test_a_mock_function_sees_the_input_and_may_return_a_tool_result(lashflow_env) -> None:
    def charge(payload):
        if not payload["approval"].get("approved"):
            return ToolResult.err("refused by the mock")
        return {"charged": True, "amount": 10}

    lashflow_env.mock("tools.charge", fn=charge)
    run = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.complete(run, "tools.request_approval", {"approved": False})
    assert_status(run, "failed")
    assert run.step("tools.charge").state == "err"


def test_a_pending_mock_parks_and_completes_with_a_tool_result(lashflow_env) -> None:
    lashflow_env.mock("tools.request_approval", pending=Pending(deadline=timedelta(hours=2)))
    run = lashflow_env.run(FULFILL, ORDER)
    assert run.waiting[0].until == lashflow_env.now + 7200
    lashflow_env.complete(run, "tools.request_approval", ToolResult.ok({"approved": True}))
    assert_finished(run)


def test_an_unmocked_tool_that_is_not_loaded_is_the_usual_link_error(lashflow_env) -> None:
    source = "process p() { x = await tools.nowhere({})?\n finish x }"
    lashflow_env.mock("tools.somewhere", returns=1)  # the `tools` module exists
    with pytest.raises(LashflowError) as caught:
        lashflow_env.run(source)
    assert caught.value.code == "link_error"
    assert "nowhere" in caught.value.message
    lashflow_env.mock("tools.nowhere", returns={"here": True})
    assert_finished(lashflow_env.run(source), {"here": True})


def test_sleeps_are_skipped_and_advance_fires_timers_in_order(lashflow_env) -> None:
    source = """
process tick(n: int) {
  for i in range(n) {
    sleep for "6h"
    await tools.note({ i: i })?
  }
  finish n
}"""
    lashflow_env.mock("tools.note", returns=True)
    run = lashflow_env.run(source, {"n": 4})
    assert_finished(run, 4)
    assert lashflow_env.elapsed == timedelta(hours=24)
    stamps = [s.created_at for s in run.steps if s.kind == "tool"]
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [6 * 3600.0] * 3


def test_signal_and_cancel(lashflow_env) -> None:
    source = """
process approval(req: str) signals { decision: any } {
  d = wait_signal("decision")
  finish { req: req, approved: d.approved }
}"""
    run = lashflow_env.run(source, {"req": "r1"})
    assert_status(run, "waiting")
    lashflow_env.signal(run, "decision", {"approved": True})
    assert_finished(run, {"req": "r1", "approved": True})
    other = lashflow_env.run(source, {"req": "r2"})
    lashflow_env.cancel(other, "no longer needed")
    assert_status(other, "cancelled")
    assert "no longer needed" in other.error.message


def test_skip_jumps_to_the_next_deadline(lashflow_env) -> None:
    run = lashflow_env.run(FULFILL, ORDER)
    assert lashflow_env.skip() == 24 * 3600.0
    assert_status(run, "failed")
    assert lashflow_env.skip() == 0.0


def test_complete_names_what_the_run_waits_on_when_the_call_is_not_pending(lashflow_env) -> None:
    run = lashflow_env.run(FULFILL, ORDER)
    with pytest.raises(AssertionError) as caught:
        lashflow_env.complete(run, "tools.charge", {"ok": 1})
    text = str(caught.value)
    assert text.startswith(f"run {run.run_id} has no pending call of tools.charge")
    assert "tools.request_approval" in text and "waiting on completion key" in text


# -- crashes --------------------------------------------------------------------------------


def test_crash_after_an_idempotent_tool_runs_it_again_on_resume(lashflow_env) -> None:
    lashflow_env.crash_after("tools.charge")
    run = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.complete(run, "tools.request_approval", {"approved": True})
    assert lashflow_env.crashed and run.status == "running"
    assert len(run.steps) == 2  # the charge's outcome was never written
    lashflow_env.resume(run)
    assert_finished(run)
    assert_called(lashflow_env, "tools.charge", times=2)
    assert_called(lashflow_env, "tools.quote", times=1)


def test_crash_after_a_non_idempotent_tool_needs_attention(lashflow_env) -> None:
    lashflow_env.mock("tools.charge", returns={"charged": True}, idempotent=False)
    lashflow_env.crash_after("tools.charge")
    run = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.complete(run, "tools.request_approval", {"approved": True})
    assert_step(run, "tools.charge", state="started")
    lashflow_env.resume(run)
    assert_status(run, "needs_attention")
    assert_step(run, "tools.charge", state="interrupted")
    assert_called(lashflow_env, "tools.charge", times=1)
    lashflow_env.resume(run, retry_interrupted=True)
    assert_finished(run, {"charged": True})
    assert_called(lashflow_env, "tools.charge", times=2)


def test_crash_after_a_recorded_step_never_calls_it_again(lashflow_env) -> None:
    lashflow_env.crash_after("tools.quote", recorded=True)
    run = lashflow_env.run(FULFILL, ORDER)
    assert lashflow_env.crashed
    assert [s.state for s in run.steps] == ["ok"]  # the row is there, nothing after it
    assert_called(lashflow_env, "tools.request_approval", times=0)
    lashflow_env.resume(run)
    assert_status(run, "waiting")
    lashflow_env.complete(run, "tools.request_approval", {"approved": True})
    assert_finished(run)
    assert_called(lashflow_env, "tools.quote", times=1)


def test_crash_after_step_n(lashflow_env) -> None:
    lashflow_env.crash_after(step=2)
    run = lashflow_env.run(FULFILL, ORDER)
    assert [s.state for s in run.steps] == ["ok", "pending"]
    lashflow_env.resume(run)
    lashflow_env.complete(run, "tools.request_approval", {"approved": True})
    assert_finished(run)
    assert [c.tool for c in lashflow_env.calls] == ["tools.quote", "tools.request_approval",
                                                    "tools.charge"]


def test_a_killed_engine_writes_nothing_more(lashflow_env) -> None:
    """After the point, not even the failure of the drive is written: the run stays as
    the last commit left it, held by the dead engine's lease."""
    lashflow_env.crash_after("tools.quote")
    run = lashflow_env.run(FULFILL, ORDER)
    record = lashflow_env.call(lambda engine: engine.get_record(run.run_id))
    assert record.status == "running" and record.lease_owner is not None
    assert run.steps == []
    assert lashflow_env.crashes == 1


def test_parallel_retry_delays_end_at_their_own_simulated_moments(lashflow_env) -> None:
    """A fan-out whose members wait 5, 10 and 20 minutes before their second attempt:
    each second attempt starts at its own moment, not one after the other."""
    source = """
process fan(waits: list[int]) {
  got = await [tools.flaky({ wait: w })? for w in waits]
  finish got
}"""
    seen: dict[int, int] = {}

    def flaky(payload):
        wait = payload["wait"]
        seen[wait] = seen.get(wait, 0) + 1
        if seen[wait] == 1:
            return ToolResult.retryable_failure("busy", after=wait * 60)
        return wait

    lashflow_env.mock("tools.flaky", fn=flaky, retry=RetryPolicy.safe(2, max_delay=0))
    run = lashflow_env.run(source, {"waits": [20, 5, 10]})
    assert_finished(run, [20, 5, 10])
    second = {s.outcome["value"]: s.attempts[1].started_at - s.attempts[0].started_at
              for s in run.steps}
    assert second == {20: 1200.0, 5: 300.0, 10: 600.0}
    assert lashflow_env.elapsed == timedelta(minutes=20)


def test_start_then_wait(lashflow_env) -> None:
    async def quote(payload):
        return {"amount": 1, "order_id": payload["order"]["id"]}

    lashflow_env.mock("tools.quote", fn=quote)
    run = lashflow_env.start(FULFILL, ORDER)
    lashflow_env.wait(run)
    assert_status(run, "waiting")
    assert lashflow_env.calls_of("tools.quote")[0].input == ORDER


def test_prints_and_a_sleep_until_in_the_main_block(lashflow_env) -> None:
    run = lashflow_env.run('print("before")\nsleep until "2026-03-01T00:00:00Z"\n'
                           'print("after")\nfinish 1\n')
    assert_finished(run, 1)
    assert run.prints == ["before", "after"]
    assert lashflow_env.elapsed == timedelta(days=59)


def test_the_benchmarked_month_does_what_it_says(tmp_path: Path) -> None:
    """bench/bench_testing.py's workflow: 100 steps and more over 30 simulated days, with
    sleeps, retries and an expired deadline (its speed is the benchmark's business)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_testing",
                                                  ROOT / "bench" / "bench_testing.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    _, facts = bench.month(str(tmp_path / "month.db"))
    assert facts["status"] == "finished"
    assert facts["steps"] >= 100 and facts["simulated"] >= timedelta(days=30)
    assert facts["sleeps"] == 40 and facts["retried"] == 6 and facts["expired"] == 1


async def test_the_same_api_in_an_async_test(lashflow_env) -> None:
    run = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.complete(run, "tools.request_approval", {"approved": True})
    assert_finished(run)


def test_a_crash_on_postgresql(tmp_path: Path) -> None:
    from pg_support import postgres_base_url

    from lashflow.testing import WorkflowEnv
    from lashflow.testing.schemas import fresh_schema

    with fresh_schema(postgres_base_url()) as url, WorkflowEnv(url) as env:
        env.mock("tools.charge", returns={"charged": True}, idempotent=False)
        env.crash_after("tools.charge")
        run = env.run(FULFILL, ORDER)
        env.complete(run, "tools.request_approval", {"approved": True})
        assert env.crashed and run.status == "running"
        env.resume(run)
        assert_status(run, "needs_attention")
        assert_called(env, "tools.charge", times=1)


@pytest.mark.lashflow(max_timers=25)
def test_a_run_that_sleeps_forever_is_stopped_with_a_clear_error(lashflow_env) -> None:
    source = 'process forever() {\n  for i in range(1000000) {\n    sleep for "1h"\n  }\n}'
    with pytest.raises(AssertionError) as caught:
        lashflow_env.run(source)
    assert str(caught.value) == "run run-1 was still sleeping after 25 timers"
    assert lashflow_env.elapsed == timedelta(hours=25)
