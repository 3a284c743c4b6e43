"""One drive's journal: what the run recorded (read once per drive) and how it writes.

Every write of a drive goes through ``RunJournal.commit``, fenced by the lease generation
the drive holds. The outcomes of a finished tool batch may be *held* instead of written at
once: they go with the run's next write, which always comes before its next effect or
with its end (ADR 0009), so nothing observable happens while they are held.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import JournalCorrupt
from ..states import STEP_STATUSES
from ..store import AttemptRecord, Commit, StepRecord, Store
from ..tools.attempts import CancelSignal
from ..tools.clock import Clock
from .canonical import canonical_json, digest_text
from .events import Events

MAX_DETAIL_ARGS = 4096  # arguments above this size are kept as a hash only
_TOOL_OUTCOME_STATUSES = frozenset({"ok", "err", "failed", "exhausted", "cancelled", "pending"})


@dataclass(slots=True)
class DriveFlags:
    """What others ask of a drive while it runs; read by the host at each effect."""

    cancel_requested: bool = False
    drain_requested: bool = False
    retry_interrupted: bool = False
    cancel_reason: str | None = None
    cancel_signal: CancelSignal = field(default_factory=CancelSignal)

    def request_cancel(self) -> None:
        """Stop at the next effect; in-flight attempts get their grace, then are cancelled."""
        self.cancel_requested = True
        self.cancel_signal.set()


def check_journal(run_id: str, steps: list[StepRecord]) -> None:
    """What replay relies on, checked before anything replays: a row the store could
    decode but that holds no usable step is ``JournalCorrupt``, never taken as truth."""
    for step in steps:
        outcome = step.outcome
        if step.status not in STEP_STATUSES:
            raise JournalCorrupt.of(run_id, step.step_key, f"unknown status {step.status!r}")
        if step.kind == "tool" and (
                (step.status != "started" and not isinstance(outcome, dict))
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


class RunJournal:
    """The recorded steps and attempts of one run, and the writes of one drive of it.

    ``retries``: the run's retries (``lashflow retry``); steps they retired are not
    replayed, but their attempts stay known so new attempts go on numbering after them."""

    def __init__(self, store: Store, run_id: str, generation: int, clock: Clock, events: Events,
                 steps: list[StepRecord], attempts: list[AttemptRecord],
                 retries: list[dict[str, Any]] | None = None) -> None:
        retries = retries or []
        self.store = store
        self.run_id = run_id
        self.generation = generation
        self.clock = clock
        self.events = events
        self.retry = len(retries)
        self.steps: dict[str, StepRecord] = {step.step_key: step for step in steps
                                             if not (retries and retired(step, retries))}
        self.attempts: dict[str, list[AttemptRecord]] = {}
        for attempt in attempts:
            self.attempts.setdefault(attempt.step_key, []).append(attempt)
        self.seq = max((step.seq for step in steps), default=0) + 1
        self._held_steps: list[StepRecord] = []
        self._held_attempts: list[AttemptRecord] = []

    def get(self, step_key: str) -> StepRecord | None:
        return self.steps.get(step_key)

    def __contains__(self, step_key: str) -> bool:
        return step_key in self.steps

    def new_step(self, key: str, kind: str, tool: str | None, args: Any, status: str,
                 outcome: Any, detail: dict[str, Any] | None = None, *,
                 args_text: str | None = None) -> StepRecord:
        """A step record at the next sequence number (written by a later ``commit``)."""
        now = self.clock.now()
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

    def touch(self, record: StepRecord, status: str, outcome: Any) -> StepRecord:
        """An existing step's new status and outcome (written by a later ``commit``)."""
        record.status, record.outcome = status, outcome
        record.updated_at = self.clock.now()
        return record

    async def commit(self, steps: list[StepRecord] = (),  # type: ignore[assignment]
                     attempts: list[AttemptRecord] = ()) -> None:  # type: ignore[assignment]
        """Write ``steps`` and ``attempts`` durably, together with any held outcomes."""
        held_steps, held_attempts = self.take_held()
        steps, attempts = held_steps + list(steps), held_attempts + list(attempts)
        await self.store.commit(Commit(self.run_id, self.generation, steps, attempts))
        self.notify_steps(steps)

    def hold(self, steps: list[StepRecord], attempts: list[AttemptRecord]) -> None:
        """Keep a batch's final outcomes for the run's next write instead of writing them
        now. Safe because every effect first calls ``flush_held`` and every end of a
        drive writes them with the run's new status: nothing observable happens between.
        A crash in between loses them exactly as a crash just before their own commit
        would have (the attempt counts as interrupted); it saves one fsync per run."""
        self._held_steps += steps
        self._held_attempts += attempts

    def take_held(self) -> tuple[list[StepRecord], list[AttemptRecord]]:
        """The held outcomes, for a write that will carry them (they are no longer held)."""
        steps, attempts = self._held_steps, self._held_attempts
        if steps or attempts:
            self._held_steps, self._held_attempts = [], []
        return steps, attempts

    async def flush_held(self) -> None:
        if self._held_steps or self._held_attempts:
            await self.commit()

    def notify_steps(self, steps: list[StepRecord]) -> None:
        if self.events:
            for step in steps:
                self.events.notify({"type": "step", "run_id": self.run_id, "step": step.step_key,
                                    "kind": step.kind, "tool": step.tool, "status": step.status})


__all__ = ["DriveFlags", "MAX_DETAIL_ARGS", "RunJournal", "check_journal", "retired"]
