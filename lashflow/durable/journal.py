"""One drive's writes: every write of a drive goes through ``RunJournal.commit``,
fenced by the lease generation the drive holds, and carries the outcomes the replay
machine holds (ADR 0009). What the run recorded, and every decision on it, is the
machine's (``replay.py``); this is the I/O around it.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import LashflowError
from ..store import AttemptRecord, Commit, StepRecord, Store
from ..tools.attempts import CancelSignal
from ..tools.clock import Clock
from .events import Events
from .replay import ReplayMachine
from ..slotted import Slotted


class DriveFlags(Slotted):
    """What others ask of a drive while it runs; read by the host at each effect."""

    __slots__ = ("cancel_requested", "drain_requested", "pause_requested",
                 "retry_interrupted", "cancel_reason", "cancel_signal")

    def __init__(
            self,
            cancel_requested: bool = False,
            drain_requested: bool = False,
            pause_requested: bool = False,  # an operator paused the run: stop at the next effect
            retry_interrupted: bool = False,
            cancel_reason: str | None = None,
            cancel_signal: CancelSignal | None = None,
    ) -> None:
        self.cancel_requested = cancel_requested
        self.drain_requested = drain_requested
        self.pause_requested = pause_requested
        self.retry_interrupted = retry_interrupted
        self.cancel_reason = cancel_reason
        self.cancel_signal = CancelSignal() if cancel_signal is None else cancel_signal

    def request_cancel(self) -> None:
        """Stop at the next effect; in-flight attempts get their grace, then are cancelled."""
        self.cancel_requested = True
        self.cancel_signal.set()


class RunJournal:
    """The writes of one drive of one run, around its replay machine."""

    def __init__(self, store: Store, machine: ReplayMachine, generation: int, clock: Clock,
                 events: Events) -> None:
        self.store = store
        self.machine = machine
        self.run_id = machine.run_id
        self.generation = generation
        self.clock = clock
        self.events = events
        self.exhausted: dict[str, str] = {}  # step -> last error, of calls out of retries

    async def commit(self, steps: Sequence[StepRecord] = (),
                     attempts: Sequence[AttemptRecord] = ()) -> None:
        """Write ``steps`` and ``attempts`` durably, together with any held outcomes."""
        machine = self.machine
        if machine.held_steps or machine.held_attempts:
            # the held lists are the machine's no more: this write extends them in place
            held_steps, held_attempts = machine.take_held()
            if steps:
                held_steps += steps
            if attempts:
                held_attempts += attempts
            steps, attempts = held_steps, held_attempts
        # a caller's own list is written as it is (nobody changes it while it is written)
        steps = steps if type(steps) is list else list(steps)
        attempts = attempts if type(attempts) is list else list(attempts)
        await self.store.commit(Commit(self.run_id, self.generation, steps, attempts))
        if self.events.listeners:
            self.notify_steps(steps)

    async def announce(self, events: list[tuple[str, str, float]]) -> None:
        """Write events with no row behind them (fenced like every write of the drive);
        best effort: a drive that lost its lease, or a database away, meets that at its
        next real write, which matters, so nothing is raised here."""
        try:
            with self.store.writing():  # off the loop's thread: a call is running on it
                await self.store.commit(Commit(self.run_id, self.generation, events=events))
        except LashflowError:
            pass

    async def flush_held(self) -> None:
        """Write what the machine holds, if anything (``commit`` carries it)."""
        if self.machine.held_steps or self.machine.held_attempts:
            await self.commit()

    def notify_steps(self, steps: list[StepRecord]) -> None:
        if self.events.listeners:
            for step in steps:
                self.events.notify({"type": "step", "run_id": self.run_id, "step": step.step_key,
                                    "kind": step.kind, "tool": step.tool, "status": step.status})


__all__ = ["DriveFlags", "RunJournal"]
