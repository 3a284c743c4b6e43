"""The replay machine: every decision replay makes, on a loaded journal, with no I/O.

A drive re-runs the program from the start; each effect it asks for is either recorded
(answer it from the journal), interrupted (run its next attempt, or stop if that is not
safe), pending (the outcome waits on a key, a timer or a signal), or fresh (run it).
This module holds the run's journal as read once per drive and answers those questions
as plain ``Decision`` values plus the records to write. It owns no event loop, no store
and no clock (the caller passes ``now``), so the live host, the tool runner and the
read-only verifier (``verify``) all decide the same way, and it is tested as a table.

Writes a decision asks for are made by the caller; the outcomes of a finished tool batch
may be *held* here instead: they go with the run's next write, which always comes before
its next effect or with its end (ADR 0009), so nothing observable happens while held.
"""

from __future__ import annotations

from shlex import quote
from typing import Any, Callable, Sequence

from ..errors import JournalCorrupt
from ..interp import effects as fx
from ..interp.errors import LashRuntimeError
from ..interp.timeparse import sleep_deadline
from ..states import ATTEMPT_STATUS, STEP_STATUSES, AttemptStatus, StepStatus
from ..store.base import AttemptRecord, StepRecord
from ..tools.outcome import OutcomeStatus, ToolOutcome
from .canonical import canonical_json, diff_paths, digest, digest_text
from .outcome import Wait
from ..slotted import Slotted

MAX_DETAIL_ARGS = 4096  # arguments above this size are kept as a hash only
_TOOL_OUTCOME_STATUSES = frozenset(OutcomeStatus)

# What a decision asks of its caller.
REPLAY = "replay"        # answer ``answer`` (nothing runs); ``writes`` if any first
RUN = "run"              # run the effect for real (a tool: from attempt ``attempt``)
PENDING = "pending"      # a tool step waits on its completion key: ask the key's book
PARK = "park"            # stop the run here, waiting on ``waits``
MISMATCH = "mismatch"    # the journal recorded something else here (``paths`` differ)
ATTENTION = "attention"  # not safe to go on alone (an interrupted non-idempotent call)
FAIL = "fail"            # the recorded outcome fails the run (a FAIL_TURN timeout)


class Decision(Slotted):
    """What to do about one effect (or one member of a batch)."""

    __slots__ = ("action", "step", "answer", "attempt", "record", "writes", "attempts",
                 "waits", "paths", "message")

    def __init__(
            self,
            action: str,
            step: str,
            answer: Any = None,
            attempt: int = 1,
            record: StepRecord | None = None,  # the recorded step it was decided on, if any
            # empty tuples by default: a replayed step (the common decision) allocates no lists
            writes: Sequence[StepRecord] = (),
            attempts: Sequence[AttemptRecord] = (),
            waits: Sequence[Wait] = (),
            paths: Sequence[str] = (),
            message: str = "",
    ) -> None:
        self.action = action
        self.step = step
        self.answer = answer
        self.attempt = attempt
        self.record = record
        self.writes = writes
        self.attempts = attempts
        self.waits = waits
        self.paths = paths
        self.message = message


def check_journal(run_id: str, steps: list[StepRecord]) -> None:
    """What replay relies on, checked before anything replays: a row the store could
    decode but that holds no usable step is ``JournalCorrupt``, never taken as truth."""
    for step in steps:
        outcome = step.outcome
        if step.status not in STEP_STATUSES:
            raise JournalCorrupt.of(run_id, step.step_key, f"unknown status {step.status!r}")
        if step.kind == "tool" and (
                (step.status != StepStatus.STARTED and not isinstance(outcome, dict))
                or (outcome is not None and (not isinstance(outcome, dict)
                                             or outcome.get("status") not in _TOOL_OUTCOME_STATUSES))):
            raise JournalCorrupt.of(run_id, step.step_key, "a tool step without a usable outcome")


def retired(step: StepRecord, retries: list[dict[str, Any]]) -> bool:
    """Whether a retry of the run took ``step`` out of replay: a retry retires every step
    from its ``from_seq`` on that was written before it, except the fan-out members it
    ``keep``s (a step written by a later drive carries that drive's retry number in
    ``detail["retry"]``)."""
    written_in = step.detail.get("retry", 0)
    return any(retry["from_seq"] <= step.seq and step.step_key not in retry.get("keep", ())
               for retry in retries[written_in:])


PENDING_TIMED_OUT = "pending tool completion timed out"  # a FAIL_TURN timeout's message


def tool_answer(step: str, outcome: ToolOutcome) -> Decision:
    """A final tool outcome as the program sees it: its result wrapper."""
    if outcome.fail_run:
        return Decision(FAIL, step, message=PENDING_TIMED_OUT)
    return Decision(REPLAY, step, outcome.to_wrapper())


def attempt_record(run_id: str, step: str, attempt: int, outcome: ToolOutcome | None,
                   started: float | None) -> AttemptRecord:
    """The journal row of one attempt (``outcome`` None: it has only started)."""
    if outcome is None:
        return AttemptRecord(run_id, step, attempt, AttemptStatus.STARTED, started_at=started)
    status = (AttemptStatus.FAILED if outcome.retry_after is not None
              else ATTEMPT_STATUS[outcome.status])
    detail: dict[str, Any] = {}
    if outcome.usage:
        detail["usage"] = dict(outcome.usage)
    if outcome.traceback:
        detail["traceback"] = outcome.traceback
    return AttemptRecord(run_id, step, attempt, status, outcome.code, outcome.message or None,
                         detail, outcome.started_at if outcome.started_at is not None else started,
                         outcome.finished_at)


class ReplayMachine:
    """One run's journal as loaded for a drive (or a verification), and the decisions.

    ``retries``: the run's retries (``lashflow retry``); steps they retired are not
    replayed, but their attempts stay known so new attempts go on numbering after them."""

    def __init__(self, run_id: str, steps: list[StepRecord], attempts: list[AttemptRecord],
                 retries: list[dict[str, Any]] | None = None) -> None:
        self.run_id = run_id
        self.retry = len(retries) if retries else 0
        self.steps: dict[str, StepRecord] = {}
        self.attempts: dict[str, list[AttemptRecord]] = {}
        # The runs this run started: the only ones it may await, cancel or signal. A
        # handle is a plain record, so one naming any other run is refused, never used.
        self.children: set[str] = set()
        self.seq = 1
        self.held_steps: list[StepRecord] = []
        self.held_attempts: list[AttemptRecord] = []
        if steps or attempts:  # (a fresh run's drive has nothing to index)
            self._index(steps, attempts, retries or [])

    def _index(self, steps: list[StepRecord], attempts: list[AttemptRecord],
               retries: list[dict[str, Any]]) -> None:
        self.steps = {step.step_key: step for step in steps
                      if not (retries and retired(step, retries))}
        for attempt in attempts:
            self.attempts.setdefault(attempt.step_key, []).append(attempt)
        self.seq = max((step.seq for step in steps), default=0) + 1
        self.children = {step.outcome["id"] for step in self.steps.values()
                         if step.kind == "start" and isinstance(step.outcome, dict)}

    def get(self, step_key: str) -> StepRecord | None:
        return self.steps.get(step_key)

    def __contains__(self, step_key: str) -> bool:
        return step_key in self.steps

    # -- records ---------------------------------------------------------------------------
    def new_step(self, key: str, kind: str, tool: str | None, args: Any, status: StepStatus,
                 outcome: Any, now: float, detail: dict[str, Any] | None = None, *,
                 args_text: str | None = None) -> StepRecord:
        """A step record at the next sequence number (the caller writes it)."""
        detail = dict(detail or {})
        if self.retry:
            detail["retry"] = self.retry
        args_hash = None
        if args is not None:
            text = canonical_json(args) if args_text is None else args_text
            args_hash = digest_text(text)
            if len(text) <= MAX_DETAIL_ARGS:
                detail["args"] = args
        record = StepRecord(self.run_id, key, kind, tool, args_hash, status, outcome, detail,
                            self.seq, now, now)
        self.seq += 1
        self.steps[key] = record
        return record

    @staticmethod
    def touch(record: StepRecord, status: StepStatus, outcome: Any, now: float) -> StepRecord:
        """An existing step's new status and outcome (the caller writes it)."""
        record.status, record.outcome, record.updated_at = status, outcome, now
        return record

    def hold(self, steps: list[StepRecord], attempts: list[AttemptRecord]) -> None:
        """Keep a batch's final outcomes for the run's next write instead of writing them
        now. Safe because every effect first writes what is held and every end of a drive
        writes it with the run's new status: nothing observable happens between. A crash
        in between loses them exactly as a crash just before their own commit would have
        (the attempt counts as interrupted); it saves one fsync per run."""
        self.held_steps += steps
        self.held_attempts += attempts

    def take_held(self) -> tuple[list[StepRecord], list[AttemptRecord]]:
        """The held outcomes, for a write that will carry them (they are no longer held)."""
        steps, attempts = self.held_steps, self.held_attempts
        if steps or attempts:
            self.held_steps, self.held_attempts = [], []
        return steps, attempts

    # -- checks ----------------------------------------------------------------------------
    @staticmethod
    def mismatch(record: StepRecord, kind: str, tool: str | None, args: Any) -> Decision | None:
        """A recorded step must be what the code asks now; otherwise stop, never re-run."""
        args_hash = digest(args) if args is not None else None
        if record.kind == kind and record.tool == tool and record.args_hash == args_hash:
            return None
        recorded = f"{record.kind} {record.tool or ''}".rstrip()
        asked = f"{kind} {tool or ''}".rstrip()
        paths: list[str] = []
        if record.args_hash != args_hash:
            old = record.detail.get("args")
            paths = diff_paths(old, args) if old is not None and args is not None else ["$"]
        where = f"replay mismatch at step {record.step_key}: "
        if recorded == asked:  # only the arguments changed: say where
            message = (f"{where}the journal recorded {recorded} with other arguments than the "
                       f"code now gives (they differ at {', '.join(paths)})")
        else:
            message = f"{where}the journal recorded {recorded} but the code now asks {asked}"
            if paths:
                message += f", with other arguments too (at {', '.join(paths)})"
        return Decision(MISMATCH, record.step_key, record=record, paths=paths, message=message)

    def own_child(self, handle: Any, action: str, span: Any) -> str | None:
        """The child run a handle names; ``None`` for a value that is no handle at all.
        A handle of a run this run did not start is refused without naming that run."""
        if not (isinstance(handle, dict) and ("__handle__" in handle or "handle" in handle)):
            return None
        child_id = handle.get("id")
        if not isinstance(child_id, str) or child_id not in self.children:
            raise LashRuntimeError("ValueError", f"{action} failed: not a handle of a run this "
                                   "process started", span)
        return child_id

    # -- tool calls ------------------------------------------------------------------------
    def tool(self, call: fx.ToolCall, idempotent: Callable[[fx.ToolCall], bool],
             retry_interrupted: bool) -> Decision:
        """A tool call (or a batch member): replay, run from which attempt, or wait.
        ``idempotent`` is asked only about a call a crash interrupted."""
        step = call.step
        record = self.steps.get(step)
        if record is None:
            rows = self.attempts.get(step)  # a step a retry retired: go on numbering
            return Decision(RUN, step, attempt=1 + max(a.attempt for a in rows) if rows else 1)
        wrong = self.mismatch(record, "tool", f"{call.module}.{call.operation}", call.input)
        if wrong is not None:
            return wrong
        recorded = record.detail.get("width")
        if recorded != call.width:
            # a fan-out member keeps its batch's width: a replay that forms another number
            # of calls would pair old outcomes with new elements
            return Decision(MISMATCH, step, record=record, paths=[], message=(
                f"replay mismatch at step {step}: the journal recorded a fan-out of "
                f"{recorded} calls but the code now forms {call.width}"))
        if record.status == StepStatus.DONE:
            return tool_answer(step, ToolOutcome.from_json(record.outcome))
        if record.status == StepStatus.PENDING:
            return Decision(PENDING, step, record=record)
        return self._interrupted(call, record, idempotent, retry_interrupted)

    def _interrupted(self, call: fx.ToolCall, record: StepRecord,
                     idempotent: Callable[[fx.ToolCall], bool], retry_interrupted: bool) -> Decision:
        """A step found ``started``: its last attempt was cut short by a crash."""
        rows = self.attempts.get(call.step, [])
        last = max((a.attempt for a in rows), default=0)
        cut = [a for a in rows if a.status in (AttemptStatus.STARTED, AttemptStatus.INTERRUPTED)]
        if (any(a.status == AttemptStatus.STARTED for a in cut) and not retry_interrupted
                and not idempotent(call)):
            return Decision(ATTENTION, call.step, record=record, attempt=last, message=(
                f"step {call.step} ({call.module}.{call.operation}) was interrupted during "
                f"attempt {last}; the tool is not idempotent, so it is not run again on its own. "
                f"Run `lashflow resume {quote(self.run_id)} --retry-interrupted` to retry it"))
        for row in cut:
            row.status = AttemptStatus.INTERRUPTED  # the journal shows the attempt a crash cut short
        return Decision(RUN, call.step, attempt=last + 1, record=record, attempts=cut)

    def tool_step(self, call: fx.ToolCall, status: StepStatus, outcome: Any, now: float,
                  args_text: str | None = None) -> StepRecord:
        """The call's step record with its new status (new, or the one replay found)."""
        existing = self.steps.get(call.step)
        if existing is not None:
            return self.touch(existing, status, outcome, now)
        detail = None if call.width is None else {"width": call.width}  # checked on replay
        return self.new_step(call.step, "tool", f"{call.module}.{call.operation}", call.input,
                             status, outcome, now, detail, args_text=args_text)

    def resolved(self, step: str, final: ToolOutcome, started: float | None,
                 now: float) -> Decision:
        """A pending step's key was resolved: the step and the attempt to write, and the
        answer (or the run's failure)."""
        decision = tool_answer(step, final)
        decision.writes = [self.touch(self.steps[step], StepStatus.DONE, final.to_json(), now)]
        decision.attempts = [AttemptRecord(self.run_id, step, final.attempts, ATTEMPT_STATUS[final.status],
                                           final.code, final.message or None, {}, started,
                                           final.finished_at)]
        return decision

    def pending_tools(self) -> list[StepRecord]:
        """The tool steps still waiting on a completion key (a cancel closes them)."""
        return [record for record in self.steps.values() if record.kind == "tool"
                and record.status == StepStatus.PENDING and isinstance(record.outcome, dict)]

    def completion_wait(self, step: str, key: str) -> Wait:
        record = self.steps[step]
        until = (record.outcome or {}).get("deadline_at")
        return Wait(kind="completion", step=step, tool=record.tool, key=key, until=until,
                    resolve=f"lashflow complete {key} --result '<json>' --resume")

    # -- processes -------------------------------------------------------------------------
    def start(self, effect: fx.StartProcess, args: Any) -> Decision:
        record = self.steps.get(effect.step)
        if record is None:
            return Decision(RUN, effect.step)
        wrong = self.mismatch(record, "start", effect.process,
                              {"process": effect.process, "args": args})
        if wrong is not None:
            return wrong
        return Decision(REPLAY, effect.step, {"__handle__": "process", "id": record.outcome["id"]},
                        record=record)

    def started(self, effect: fx.StartProcess, args: Any, child_id: str, now: float) -> StepRecord:
        """The record of a child run this run has just created."""
        self.children.add(child_id)
        return self.new_step(effect.step, "start", effect.process,
                             {"process": effect.process, "args": args}, StepStatus.DONE,
                             {"__handle__": "process", "id": child_id}, now)

    def await_one(self, one: fx.AwaitHandle, now: float) -> Decision:
        """One handle leaf of an ``await``: replay its outcome, answer a non-handle at
        once, or join the child (``answer`` is its run id)."""
        record = self.steps.get(one.step)
        child_id = self.own_child(one.handle, "await", one.span)
        if record is not None and record.status == StepStatus.DONE:
            wrong = self.mismatch(record, "await", None, {"handle": child_id})
            return wrong or Decision(REPLAY, one.step, record.outcome, record=record)
        if child_id is None:  # awaiting a plain value: the language's answer
            answer = {"ok": False, "error": "expected handle record"}
            return Decision(REPLAY, one.step, answer, writes=[self.new_step(
                one.step, "await", None, {"handle": None}, StepStatus.DONE, answer, now)])
        return Decision(RUN, one.step, child_id)

    def joined(self, one: fx.AwaitHandle, child_id: str, answer: Any, now: float) -> StepRecord:
        return self.new_step(one.step, "await", None, {"handle": child_id}, StepStatus.DONE, answer, now)

    def once(self, step: str, kind: str) -> Decision:
        """An effect run at most once whose answer is None (cancel, signal_run, print)."""
        record = self.steps.get(step)
        if record is None:
            return Decision(RUN, step)
        return self.other_kind(record, kind) or Decision(REPLAY, step, record=record)

    @staticmethod
    def other_kind(record: StepRecord, kind: str) -> Decision | None:
        """A step recorded as another kind of effect than the code asks now."""
        if record.kind == kind:
            return None
        return Decision(MISMATCH, record.step_key, record=record, message=(
            f"replay mismatch at step {record.step_key}: the journal recorded {record.kind} "
            f"but the code now asks {kind}"))

    # -- time and signals ------------------------------------------------------------------
    def sleep(self, effect: fx.SleepEffect, now: float) -> Decision:
        record = self.steps.get(effect.step)
        writes: list[StepRecord] = []
        if record is None:
            wake_at = sleep_deadline(effect.mode, effect.value, now, effect.span)
            record = self.new_step(effect.step, "sleep", None, None, StepStatus.PENDING, None, now,
                                   {"wake_at": wake_at, "mode": effect.mode})
            writes.append(record)
        elif (other := self.other_kind(record, "sleep")) is not None:
            return other
        if record.status == StepStatus.DONE:
            return Decision(REPLAY, effect.step, record=record)
        wake_at = record.detail["wake_at"]
        if now >= wake_at:
            if not writes:
                writes.append(record)
            self.touch(record, StepStatus.DONE, None, now)
            return Decision(REPLAY, effect.step, record=record, writes=writes)
        return Decision(PARK, effect.step, record=record, writes=writes, waits=[
            Wait(kind="sleep", step=effect.step, until=wake_at,
                 resolve=f"lashflow resume {quote(self.run_id)}")])

    def wait_signal(self, effect: fx.WaitSignalEffect) -> Decision:
        """Replay a received signal, or look for it (``RUN``)."""
        record = self.steps.get(effect.step)
        if record is None:
            return Decision(RUN, effect.step)
        wrong = self.other_kind(record, "wait_signal")
        if wrong is not None or record.status != StepStatus.DONE:
            return wrong or Decision(RUN, effect.step)
        return Decision(REPLAY, effect.step, record.outcome, record=record)

    def signal_wait(self, effect: fx.WaitSignalEffect) -> Wait:
        return Wait(kind="signal", step=effect.step, signal=effect.name,
                    resolve=f"lashflow signal {quote(self.run_id)} {quote(effect.name)} "
                            "--payload '<json>'")


__all__ = [
    "ATTENTION", "Decision", "FAIL", "MAX_DETAIL_ARGS", "MISMATCH", "PARK", "PENDING",
    "PENDING_TIMED_OUT", "REPLAY",
    "RUN", "ReplayMachine", "attempt_record", "check_journal", "retired", "tool_answer",
]
