"""Durable runs through the Engine API: journal, replay, waits, cancel, mismatch, children."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lashflow import (
    Engine, LashflowError, PendingCompletion, RunStatus, ToolCall, ToolResult, tool,
)
from lashflow.testing import FakeClock
from lashflow.tools import CompletionError

CALLS: dict[str, int] = {}


def counted(name: str) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1


@pytest.fixture(autouse=True)
def reset_calls() -> None:
    CALLS.clear()


@tool
async def add(a: int, b: int) -> int:
    counted("add")
    return a + b


@tool
async def approve(call: ToolCall) -> ToolResult:
    counted("approve")
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(seconds=60)))


@tool
async def approve_strict(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(
        PendingCompletion().with_deadline(timedelta(seconds=10)).fail_turn_on_timeout())


EXTERNAL_CANCELS: list[str] = []


async def _cancel_external(key: str) -> None:
    EXTERNAL_CANCELS.append(key)


@tool(cancel_external=_cancel_external)
async def slow_job(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


TOOLS = [add, approve, approve_strict, slow_job]

SUM = """
process total(xs: list[int]) {
  acc = 0
  for x in xs { acc = await tools.add({ a: acc, b: x })? }
  finish acc
}
"""

APPROVAL = """
process flow(n: int) {
  a = await tools.add({ a: n, b: 1 })?
  ok = await tools.approve({ n: a })?
  b = await tools.add({ a: a, b: 100 })?
  finish { a: a, ok: ok, b: b }
}
"""


async def test_run_replays_recorded_steps_without_calling_tools(db_url: str) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        outcome = await engine.run(SUM, input={"xs": [1, 2, 3, 4]})
        assert outcome.status is RunStatus.FINISHED and outcome.result == 10
        assert CALLS["add"] == 4
        steps = await engine.steps(outcome.run_id)
        assert [s.tool for s in steps] == ["tools.add"] * 4
        assert all(s.status == "done" and len(s.attempts) == 1 for s in steps)
        assert len({s.step_key for s in steps}) == 4  # one site, four occurrences
    async with Engine(db=db_url, tools=TOOLS) as engine:
        again = await engine.resume(outcome.run_id)
        assert again.result == 10 and CALLS["add"] == 4


async def test_same_run_id_is_idempotent_and_conflicts_on_other_input(db_url: str) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        first = await engine.run(SUM, input={"xs": [5]}, run_id="r-1")
        second = await engine.run(SUM, input={"xs": [5]}, run_id="r-1")
        assert first.result == second.result == 5
        assert CALLS["add"] == 1
        with pytest.raises(LashflowError) as info:
            await engine.run(SUM, input={"xs": [6]}, run_id="r-1")
        assert info.value.code == "run_conflict"


async def test_input_is_checked_against_parameters(db_url: str) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        for bad, path in (({}, "$.xs"), ({"xs": [1, "2"]}, "$.xs[1]"),
                          ({"xs": [], "extra": 1}, "$.extra"), ([1], "$")):
            with pytest.raises(LashflowError) as info:
                await engine.run(SUM, input=bad)
            assert info.value.code == "input_invalid"
            assert info.value.message.startswith(path), info.value.message
        assert await engine.list() == []


async def test_completion_key_parks_and_resumes_without_repeating_steps(db_url: str) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        outcome = await engine.run(APPROVAL, input={"n": 1})
        assert outcome.status is RunStatus.WAITING
        [wait] = outcome.waiting
        assert wait.kind == "completion" and wait.tool == "tools.approve"
        assert [w.key for _, w in await engine.waiting()] == [wait.key]
    async with Engine(db=db_url, tools=TOOLS) as engine:  # a new process, later
        status = await engine.complete(wait.key, ToolResult.ok("yes"))
        assert status is RunStatus.FINISHED
        final = await engine.get(outcome.run_id)
        assert final.result == {"a": 2, "ok": "yes", "b": 102}
        assert CALLS == {"add": 2, "approve": 1}
        with pytest.raises(CompletionError) as info:
            await engine.complete(wait.key, ToolResult.ok("again"))
        assert info.value.code == "completion_already_resolved"


async def test_forged_and_foreign_keys_get_one_answer(db_url: str, tmp_path: Path) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        outcome = await engine.run(APPROVAL, input={"n": 1})
        key = outcome.waiting[0].key
        flipped = key[:-2] + ("A" if key[-2] != "A" else "B") + key[-1]  # one signature char
        assert flipped != key
        for bad in (flipped, key[:20], "lfk_x", "nope"):
            with pytest.raises(CompletionError) as info:
                await engine.complete(bad, ToolResult.ok(1))
            assert info.value.code == "unknown_completion_key"
    other_db = f"sqlite:///{tmp_path / 'other.db'}"
    async with Engine(db=other_db, tools=TOOLS) as other:
        with pytest.raises(CompletionError) as info:
            await other.complete(key, ToolResult.ok(1))
        assert info.value.code == "unknown_completion_key"


async def test_resolution_before_the_wait_is_delivered(db_url: str) -> None:
    clock = FakeClock(1000.0)
    async with Engine(db=db_url, tools=TOOLS, clock=clock) as engine:
        outcome = await engine.run(APPROVAL, input={"n": 1})
        key = outcome.waiting[0].key
        await engine.complete(key, ToolResult.err("declined"), resume=False)
        assert (await engine.get(outcome.run_id)).status is RunStatus.WAITING
        final = await engine.resume(outcome.run_id)
        assert final.status is RunStatus.FAILED
        assert "declined" in final.error.message


async def test_a_completion_makes_its_run_due_in_the_resolving_write(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's due mark travels in the write that resolves the key: a process that
    dies right after that write (no second write follows) still leaves the run where
    every worker looks."""
    clock = FakeClock(1000.0)
    async with Engine(db=db_url, tools=TOOLS, clock=clock) as engine:
        outcome = await engine.run(APPROVAL, input={"n": 1})
        assert await engine.store.due_runs(clock.now()) == []

        async def no_second_write(*args: object) -> None:
            raise AssertionError("a second write after the resolution")
        monkeypatch.setattr(engine.store, "mark_due", no_second_write)
        monkeypatch.setattr(engine.store, "wake", no_second_write)
        status = await engine.complete(outcome.waiting[0].key, ToolResult.ok(True), resume=False)
        assert status is RunStatus.WAITING
        assert await engine.store.due_runs(clock.now()) == [outcome.run_id]


async def test_deadline_timeout_error_as_result_and_fail_turn(db_url: str) -> None:
    clock = FakeClock(1000.0)
    source = """
    process p() {
      r = await tools.approve({})
      finish r
    }
    """
    strict = """
    process q() {
      r = await tools.approve_strict({})
      finish r
    }
    """
    async with Engine(db=db_url, tools=TOOLS, clock=clock) as engine:
        soft = await engine.run(source)
        hard = await engine.run(strict)
        assert soft.waiting[0].until == pytest.approx(1060.0)
        clock.advance(61)
        soft_done = await engine.resume(soft.run_id)
        assert soft_done.status is RunStatus.FINISHED
        assert soft_done.result == {"ok": False, "error": "pending tool completion timed out"}
        hard_done = await engine.resume(hard.run_id)
        assert hard_done.status is RunStatus.FAILED
        assert hard_done.error.code == "tool_completion_timeout"
        with pytest.raises(CompletionError) as info:
            await engine.complete(soft.waiting[0].key, ToolResult.ok(1))
        assert info.value.code == "completion_expired"


async def test_cancel_parked_run_calls_cancel_external_and_voids_the_key(backend_url: str) -> None:
    EXTERNAL_CANCELS.clear()
    source = "process p() { r = await tools.slow_job({})? \n finish r }"
    async with Engine(db=backend_url, tools=TOOLS) as engine:
        outcome = await engine.run(source)
        key = outcome.waiting[0].key
        assert await engine.cancel(outcome.run_id) is RunStatus.CANCELLED
        assert EXTERNAL_CANCELS == [key]
        assert (await engine.get(outcome.run_id)).status is RunStatus.CANCELLED
        with pytest.raises(CompletionError) as info:
            await engine.complete(key, ToolResult.ok(1))
        assert info.value.code == "unknown_completion_key"


async def test_replay_mismatch_after_editing_the_process(backend_url: str, tmp_path: Path) -> None:
    original = tmp_path / "flow.lash"
    original.write_text(APPROVAL)
    edited = tmp_path / "edited.lash"
    edited.write_text(APPROVAL.replace("{ a: n, b: 1 }", "{ a: n, b: 2 }"))
    async with Engine(db=backend_url, tools=TOOLS) as engine:
        outcome = await engine.run(original, input={"n": 1})
        assert outcome.status is RunStatus.WAITING
        changed = await engine.resume(outcome.run_id, source=edited)
        assert changed.status is RunStatus.NEEDS_ATTENTION
        assert changed.error.code == "replay_mismatch"
        assert "$.b" in changed.error.message
        assert CALLS["add"] == 1


async def test_comments_and_whitespace_edits_replay_cleanly(backend_url: str,
                                                         tmp_path: Path) -> None:
    original = tmp_path / "flow.lash"
    original.write_text(APPROVAL)
    edited = tmp_path / "edited.lash"
    edited.write_text("# reviewed\n" + APPROVAL.replace("  a = ", "  # first step\n  a =   "))
    async with Engine(db=backend_url, tools=TOOLS) as engine:
        outcome = await engine.run(original, input={"n": 1})
        again = await engine.resume(outcome.run_id, source=edited)
        assert again.status is RunStatus.WAITING
        assert CALLS["add"] == 1


async def test_thousand_parked_runs_completed_in_random_order(db_url: str) -> None:
    # a fake clock: the approvals' 60 s deadlines must not pass while a busy machine
    # parks and completes a thousand runs (what is tested is the order, not the deadline)
    async with Engine(db=db_url, tools=TOOLS, clock=FakeClock(1000.0)) as engine:
        handles = [await engine.start(APPROVAL, input={"n": i}) for i in range(1000)]
        parked = [await h.result() for h in handles]
        assert {o.status for o in parked} == {RunStatus.WAITING}
        order = list(range(1000))
        random.Random(7).shuffle(order)
        for i in order:
            status = await engine.complete(parked[i].waiting[0].key, ToolResult.ok(i))
            assert status is RunStatus.FINISHED
        for i in (0, 499, 999):
            final = await engine.get(parked[i].run_id)
            assert final.result == {"a": i + 1, "ok": i, "b": i + 101}
        assert CALLS == {"add": 2000, "approve": 1000}
        assert len(await engine.list("finished")) == 1000


async def test_sleep_waits_only_the_remaining_time_across_restarts(backend_url: str) -> None:
    clock = FakeClock(5000.0)
    source = """
    process nap() {
      a = await tools.add({ a: 1, b: 1 })?
      sleep for "10s"
      b = await tools.add({ a: a, b: 1 })?
      finish b
    }
    """
    async with Engine(db=backend_url, tools=TOOLS, clock=clock) as engine:
        outcome = await engine.run(source)
        assert outcome.status is RunStatus.WAITING
        assert outcome.waiting[0].kind == "sleep" and outcome.waiting[0].until == 5010.0
    clock.advance(4)
    async with Engine(db=backend_url, tools=TOOLS, clock=clock) as engine:
        early = await engine.resume(outcome.run_id)
        assert early.status is RunStatus.WAITING and early.waiting[0].until == 5010.0
        clock.advance(6)
        done = await engine.resume(outcome.run_id)
        assert done.status is RunStatus.FINISHED and done.result == 3
        assert CALLS["add"] == 2


async def test_signals_children_and_yield_through_the_engine(backend_url: str) -> None:
    source = """
    process approval(req: str) signals { decision: any } {
      yield { waiting: req }
      d = wait_signal("decision")
      if d.approved { finish { req: req, approved: true } }
      fail { req: req, approved: false }
    }
    h1 = start approval(req: "r1")
    h2 = start approval(req: "r2")
    finish await [h1, h2]
    """
    async with Engine(db=backend_url, tools=TOOLS) as engine:
        parent = await engine.run(source)
        assert parent.status is RunStatus.WAITING
        children = [w.child_run_id for w in parent.waiting if w.kind == "child"]
        assert children, parent.waiting
        records = {c: await engine.get_record(c) for c in children}
        by_req = {r.input["req"]: c for c, r in records.items()}
        for name in ("r1", "r2"):
            cid = by_req.get(name) or next(
                r.run_id for r in await engine.store.list_runs() if r.input.get("req") == name)
            await engine.signal(cid, "decision", {"approved": name == "r1"})
        final = await engine.get(parent.run_id)
        assert final.status is RunStatus.FINISHED, final
        assert final.result == [
            {"ok": True, "value": {"req": "r1", "approved": True}},
            {"ok": False, "error": '{"approved":false,"req":"r2"}'},
        ]


async def test_ten_thousand_steps_and_fast_replay(db_url: str) -> None:
    source = """
    process many(n: int) {
      i = 0
      while i < n { i = await tools.add({ a: i, b: 1 })? }
      finish i
    }
    """
    async with Engine(db=db_url, tools=TOOLS) as engine:
        outcome = await engine.run(source, input={"n": 10_000})
        assert outcome.result == 10_000 and CALLS["add"] == 10_000
    async with Engine(db=db_url, tools=TOOLS) as engine:
        record = await engine.get_record(outcome.run_id)
        await engine.store.commit(__import__("lashflow.store", fromlist=["Commit"]).Commit(
            outcome.run_id, None, run=__import__("lashflow.store", fromlist=["RunChange"]).RunChange(
                "running")))
        replayed = await engine.resume(record.run_id)
        assert replayed.result == 10_000 and CALLS["add"] == 10_000


async def test_main_block_prints_and_runtime_errors(db_url: str) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        outcome = await engine.run('x = await tools.add({ a: 1, b: 2 })?\nprint "x=" + x\nfinish x.y')
        assert outcome.status is RunStatus.FAILED
        assert outcome.prints == ["x=3"]
        assert outcome.error.code == "runtime_error" and outcome.error.kind == "TypeError"
        assert outcome.error.line == 3
        shown = await engine.get(outcome.run_id)
        assert shown.prints == ["x=3"]


async def test_unknown_run_is_a_clear_error(db_url: str) -> None:
    async with Engine(db=db_url, tools=TOOLS) as engine:
        for call in (engine.get, engine.resume, engine.cancel, engine.steps):
            with pytest.raises(LashflowError) as info:
                await call("missing")
            assert info.value.code == "unknown_run"


def _unused(_: Any) -> None:  # keeps linters quiet about the helper import style
    return None


@tool
async def hang(call: ToolCall) -> int:
    import asyncio

    counted("hang")
    await asyncio.sleep(60)
    return 1


async def test_cancel_a_running_run_cancels_the_attempt_in_flight(backend_url: str) -> None:
    import asyncio

    source = """
    process p() {
      a = await tools.add({ a: 1, b: 1 })?
      r = await tools.hang({})
      b = await tools.add({ a: a, b: 1 })?
      finish b
    }
    """
    async with Engine(db=backend_url, tools=TOOLS + [hang]) as engine:
        handle = await engine.start(source)
        while CALLS.get("hang", 0) == 0:
            await asyncio.sleep(0.01)
        assert await engine.cancel(handle.run_id) is RunStatus.RUNNING
        outcome = await asyncio.wait_for(handle.result(), timeout=5)
        assert outcome.status is RunStatus.CANCELLED
        assert CALLS == {"add": 1, "hang": 1}
        steps = await engine.steps(handle.run_id)
        assert [s.outcome["status"] for s in steps] == ["ok", "cancelled"]


async def test_a_200_kib_print_is_budgeted_in_history_but_journaled_whole(db_url: str) -> None:
    source = ('s = join(["0123456789abcdef" for i in range(12800)], "")\n'
              'print s\n'
              'lines = join(["row " + to_string(i) for i in range(1000)], "\\n")\n'
              'print lines\n'
              'finish len(s)')
    async with Engine(db=db_url, tools=TOOLS) as engine:
        outcome = await engine.run(source)
        assert outcome.result == 204800
        wide, tall = outcome.prints
        assert len(wide.encode()) < 17 * 1024
        kept = wide.split("\n\n")[0]
        assert f"...{204800 - len(kept)} bytes truncated..." in wide
        assert "lashflow output" in wide
        assert tall.startswith("row 0\nrow 1\n")
        assert "...600 lines truncated..." in tall
        steps = await engine.steps(outcome.run_id)
        assert len(steps[0].outcome["text"]) == 204800  # the journal keeps it whole
        assert (await engine.get(outcome.run_id)).prints == outcome.prints


async def test_limits_end_the_run_with_limit_exceeded(db_url: str) -> None:
    from lashflow.interp.limits import Limits

    limits = Limits(max_steps=50_000, max_effects=5)
    async with Engine(db=db_url, tools=TOOLS, limits=limits) as engine:
        spin = await engine.run("while true { }")
        assert spin.status is RunStatus.FAILED and spin.error.code == "limit_exceeded"
        many = await engine.run("i = 0\nwhile i < 10 { i = await tools.add({ a: i, b: 1 })? }")
        assert many.status is RunStatus.FAILED and many.error.code == "limit_exceeded"
        assert "effects" in many.error.message
        assert CALLS["add"] == 5
        fine = await engine.run("finish len(range(100))")
        assert fine.result == 100


async def test_cancel_while_an_unwrapped_call_is_in_flight_ends_cancelled(backend_url: str) -> None:
    import asyncio

    source = """
    process p() {
      r = await tools.hang({})?
      finish r
    }
    """
    async with Engine(db=backend_url, tools=TOOLS + [hang]) as engine:
        handle = await engine.start(source)
        while CALLS.get("hang", 0) == 0:
            await asyncio.sleep(0.01)
        await engine.cancel(handle.run_id)
        outcome = await asyncio.wait_for(handle.result(), timeout=5)
        assert outcome.status is RunStatus.CANCELLED
        assert outcome.error.code == "cancelled"
