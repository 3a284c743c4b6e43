"""The replay machine as a table: every journal state of a step against every effect
kind, decided with no database, no event loop and no clock (``now`` is given)."""

from __future__ import annotations

from typing import Any

import pytest

from lashflow.durable import replay as R
from lashflow.durable.canonical import digest
from lashflow.durable.replay import ReplayMachine
from lashflow.errors import JournalCorrupt
from lashflow.interp import effects as fx
from lashflow.interp.errors import LashRuntimeError
from lashflow.store.base import AttemptRecord, StepRecord

NOW = 1000.0
STEP = "s:1"
CHILD = "run_child"
HANDLE = {"__handle__": "process", "id": CHILD}

EFFECTS: dict[str, Any] = {
    "tool": fx.ToolCall(STEP, "m", "op", {"a": 1}),
    "start": fx.StartProcess(STEP, "child", {"x": 1}),
    "await": fx.AwaitHandle(STEP, HANDLE),
    "cancel": fx.CancelHandle(STEP, HANDLE),
    "print": fx.Observe(STEP, "print", "hi", "hi"),
    "sleep": fx.SleepEffect(STEP, "for", "10s"),
    "wait_signal": fx.WaitSignalEffect(STEP, "go", 1),
    "signal_run": fx.SignalRunEffect(STEP, HANDLE, "go", 1),
}

# kind -> (recorded kind, tool, args, done outcome)
RECORDED: dict[str, tuple[str, str | None, Any, Any]] = {
    "tool": ("tool", "m.op", {"a": 1}, {"status": "ok", "value": 7, "attempts": 1}),
    "start": ("start", "child", {"process": "child", "args": {"x": 1}},
              {"__handle__": "process", "id": "run_other"}),
    "await": ("await", None, {"handle": CHILD}, {"ok": True, "value": 3}),
    "cancel": ("cancel", None, {"handle": CHILD}, None),
    "print": ("print", None, None, {"value": "hi", "text": "hi"}),
    "sleep": ("sleep", None, None, None),
    "wait_signal": ("wait_signal", "go", None, {"p": 1}),
    "signal_run": ("signal_run", "go", {"run": CHILD}, None),
}

STATES = ["fresh", "done", "pending", "started", "retired", "other_args", "other_kind"]

# state -> kind -> the action decided (a tool's idempotence is asked only when started)
EXPECTED: dict[str, dict[str, str]] = {
    "fresh": {"tool": R.RUN, "start": R.RUN, "await": R.RUN, "cancel": R.RUN, "print": R.RUN,
              "sleep": R.PARK, "wait_signal": R.RUN, "signal_run": R.RUN},
    "done": {"tool": R.REPLAY, "start": R.REPLAY, "await": R.REPLAY, "cancel": R.REPLAY,
             "print": R.REPLAY, "sleep": R.REPLAY, "wait_signal": R.REPLAY,
             "signal_run": R.REPLAY},
    # pending: a tool waits on its key; a sleep not yet due parks; an await or a signal
    # wait is looked up again
    "pending": {"tool": R.PENDING, "start": R.REPLAY, "await": R.RUN, "cancel": R.REPLAY,
                "print": R.REPLAY, "sleep": R.PARK, "wait_signal": R.RUN,
                "signal_run": R.REPLAY},
    "started": {"tool": R.ATTENTION, "start": R.REPLAY, "await": R.RUN, "cancel": R.REPLAY,
                "print": R.REPLAY, "sleep": R.PARK, "wait_signal": R.RUN,
                "signal_run": R.REPLAY},
    "retired": {"tool": R.RUN, "start": R.RUN, "await": R.RUN, "cancel": R.RUN, "print": R.RUN,
                "sleep": R.PARK, "wait_signal": R.RUN, "signal_run": R.RUN},
    "other_args": {"tool": R.MISMATCH, "start": R.MISMATCH, "await": R.MISMATCH,
                   "cancel": R.REPLAY, "print": R.REPLAY, "sleep": R.REPLAY,
                   "wait_signal": R.REPLAY, "signal_run": R.REPLAY},
    "other_kind": {kind: R.MISMATCH for kind in EFFECTS},
}


def record(kind: str, state: str) -> StepRecord:
    recorded, tool, args, outcome = RECORDED[kind]
    detail: dict[str, Any] = {}
    status = "done"
    if state == "other_args" and args is not None:
        args = {key: ("changed" if key != "handle" else "run_elsewhere") for key in args}
    if state == "other_kind":
        recorded, tool, args = ("print", None, None) if kind != "print" else ("tool", "m.op", {})
    if kind == "sleep":
        detail["wake_at"] = NOW + 10
    if state in ("pending", "started"):
        status = state
        if kind == "tool":
            outcome = {"status": "pending", "attempts": 1} if state == "pending" else None
    if args is not None:
        detail["args"] = args
    return StepRecord("r", STEP, recorded, tool, None if args is None else digest(args), status,
                      outcome, detail, seq=2)


def machine_for(kind: str, state: str) -> ReplayMachine:
    steps = [StepRecord("r", "c:1", "start", "child", None, "done",
                        {"__handle__": "process", "id": CHILD}, {}, seq=1)]
    attempts: list[AttemptRecord] = []
    retries: list[dict[str, Any]] = []
    if state != "fresh":
        steps.append(record(kind, state))
    if state == "retired":
        retries = [{"from_seq": 2}]
    if kind == "tool" and state in ("started", "retired"):
        attempts.append(AttemptRecord("r", STEP, 1, "started"))
    return ReplayMachine("r", steps, attempts, retries)


def decide(machine: ReplayMachine, kind: str, *, idempotent: bool = False,
           retry_interrupted: bool = False) -> R.Decision:
    effect = EFFECTS[kind]
    if kind == "tool":
        return machine.tool(effect, lambda call: idempotent, retry_interrupted)
    if kind == "start":
        return machine.start(effect, {"x": 1})
    if kind == "await":
        return machine.await_one(effect, NOW)
    if kind == "sleep":
        return machine.sleep(effect, NOW)
    if kind == "wait_signal":
        return machine.wait_signal(effect)
    return machine.once(STEP, RECORDED[kind][0])


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", list(EFFECTS))
def test_every_state_against_every_effect(state: str, kind: str) -> None:
    decision = decide(machine_for(kind, state), kind)
    assert decision.action == EXPECTED[state][kind], decision
    assert decision.step == STEP
    if decision.action == R.MISMATCH:
        assert decision.message.startswith(f"replay mismatch at step {STEP}: ")
        assert decision.record is not None


def test_a_recorded_tool_answers_its_wrapper_and_runs_nothing() -> None:
    decision = decide(machine_for("tool", "done"), "tool")
    assert (decision.action, decision.answer, decision.writes) == (R.REPLAY, {"ok": True, "value": 7}, ())


def test_a_changed_argument_names_the_json_path() -> None:
    decision = decide(machine_for("tool", "other_args"), "tool")
    assert decision.paths == ["$.a"]
    assert "they differ at $.a" in decision.message


def test_a_changed_fan_out_width_is_a_mismatch() -> None:
    machine = machine_for("tool", "done")
    machine.steps[STEP].detail["width"] = 3
    call = fx.ToolCall(STEP, "m", "op", {"a": 1}, width=2)
    decision = machine.tool(call, lambda c: True, False)
    assert decision.action == R.MISMATCH and "fan-out of 3 calls" in decision.message


def test_an_interrupted_call_runs_its_next_attempt_when_that_is_safe() -> None:
    for kwargs in ({"idempotent": True}, {"retry_interrupted": True}):
        machine = machine_for("tool", "started")
        decision = decide(machine, "tool", **kwargs)
        assert (decision.action, decision.attempt) == (R.RUN, 2)
        assert [(a.attempt, a.status) for a in decision.attempts] == [(1, "interrupted")]
    refused = decide(machine_for("tool", "started"), "tool")
    assert refused.action == R.ATTENTION and "--retry-interrupted" in refused.message


def test_a_retired_tool_step_goes_on_numbering_its_attempts() -> None:
    decision = decide(machine_for("tool", "retired"), "tool")
    assert (decision.action, decision.attempt) == (R.RUN, 2)


def test_a_sleep_writes_its_deadline_once_and_is_answered_when_due() -> None:
    machine = machine_for("sleep", "fresh")
    parked = machine.sleep(EFFECTS["sleep"], NOW)
    assert parked.action == R.PARK and parked.waits[0].until == NOW + 10
    assert [w.status for w in parked.writes] == ["pending"]
    again = machine.sleep(EFFECTS["sleep"], NOW + 5)
    assert again.action == R.PARK and not again.writes  # nothing new to write
    due = machine.sleep(EFFECTS["sleep"], NOW + 10)
    assert due.action == R.REPLAY and [w.status for w in due.writes] == ["done"]


def test_a_handle_of_a_run_this_one_did_not_start_is_refused() -> None:
    machine = machine_for("await", "fresh")
    with pytest.raises(LashRuntimeError, match="not a handle of a run this process started"):
        machine.await_one(fx.AwaitHandle(STEP, {"__handle__": "process", "id": "run_x"}), NOW)
    plain = machine.await_one(fx.AwaitHandle(STEP, 5), NOW)
    assert plain.action == R.REPLAY and plain.answer["ok"] is False and len(plain.writes) == 1


def test_held_outcomes_are_taken_once() -> None:
    machine = machine_for("tool", "fresh")
    call = EFFECTS["tool"]
    step = machine.tool_step(call, "done", {"status": "ok", "value": 1, "attempts": 1}, NOW)
    machine.hold([step], [])
    assert machine.take_held() == ([step], [])
    assert machine.take_held() == ([], [])
    assert machine.get(STEP) is step and step.seq == 2  # after the start at seq 1


def test_a_corrupt_row_is_refused_before_anything_replays() -> None:
    bad = StepRecord("r", STEP, "tool", "m.op", None, "done", "not an outcome", {}, seq=1)
    with pytest.raises(JournalCorrupt, match="without a usable outcome"):
        R.check_journal("r", [bad])


def test_a_fresh_machine_is_what_indexing_no_records_gives() -> None:
    """A fresh run's drive skips the indexing (ADR 0048): the state is the same."""
    fresh = ReplayMachine("r", [], [], [{"from_seq": 1}])
    indexed = ReplayMachine("r", [], [], [{"from_seq": 1}])
    indexed._index([], [], [{"from_seq": 1}])
    for machine in (fresh, indexed):
        assert (machine.steps, machine.attempts, machine.children, machine.seq,
                machine.retry) == ({}, {}, set(), 1, 1)
    assert ReplayMachine("r", [], []).retry == 0
    only_attempts = ReplayMachine("r", [], [AttemptRecord("r", STEP, 2, "failed")])
    assert only_attempts.tool(EFFECTS["tool"], lambda call: False, False).attempt == 3
