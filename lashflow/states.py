"""The vocabulary every layer shares: run statuses, step and attempt states.

Defined once here, below every other package, so the store, the durable layer, the CLI
and the HTTP service all speak of the same things by the same names.
"""

from __future__ import annotations

import enum


class RunStatus(str, enum.Enum):
    """Where a run stands. A run is created ``queued``, is ``running`` while a worker
    drives it, ``waiting`` while it is parked on something outside (a completion key, a
    timer, a signal, a child run) and ends ``finished``, ``failed`` or ``cancelled``.
    ``needs_attention`` means lashflow stopped it on purpose: an operator must look
    (a replay mismatch, an interrupted non-idempotent call, a corrupt journal row).
    ``paused``: an operator (or a retry policy that ran out) stopped it; no worker takes
    it until it is unpaused (it then goes back to the queue and replays to where it was)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NEEDS_ATTENTION = "needs_attention"
    PAUSED = "paused"

    def __str__(self) -> str:
        return self.value

    @property
    def settled(self) -> bool:
        return self.value in SETTLED


RUN_STATUSES: tuple[str, ...] = tuple(status.value for status in RunStatus)

SETTLED = frozenset({"finished", "failed", "cancelled"})
"""Ended: the run never moves again on its own (an operator may retry or fork it)."""

STOPPED = SETTLED | {"needs_attention", "paused"}
"""Nothing will move the run on without an operator: settled, or needing attention."""

ACTIVE = frozenset({"queued", "running"})
"""A worker should be driving these; with no live lease owner they are orphaned."""

PAUSABLE = frozenset({"queued", "running", "waiting"})
"""What ``pause`` stops: runs that would move on by themselves."""

KEPT_PAUSED = ("queued", "running", "waiting")
"""A drive's run change to one of these leaves a paused run paused (the drive was under
way when the pause landed: its attempts are recorded, its status stays ``paused``)."""


class StepStatus(str, enum.Enum):
    """A journal step: ``done`` (its outcome is final), ``pending`` (parked on a key,
    timer, signal or child) or ``started`` (an attempt is in flight, or was cut off by a
    crash)."""

    DONE = "done"
    PENDING = "pending"
    STARTED = "started"

    def __str__(self) -> str:
        return self.value


STEP_STATUSES = frozenset(status.value for status in StepStatus)


class AttemptStatus(str, enum.Enum):
    """One attempt of a tool call. ``ok``, ``err``, ``cancelled`` and ``exhausted`` are
    final; ``failed`` is followed by a retry; ``interrupted`` was cut off by a crash;
    ``started`` and ``pending`` are in flight (``pending``: parked on a completion key)."""

    STARTED = "started"
    OK = "ok"
    ERR = "err"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXHAUSTED = "exhausted"
    PENDING = "pending"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


FINAL_ATTEMPT_STATUSES = frozenset({"ok", "err", "cancelled", "exhausted"})

__all__ = [
    "ACTIVE", "KEPT_PAUSED", "PAUSABLE", "AttemptStatus", "FINAL_ATTEMPT_STATUSES", "RUN_STATUSES", "RunStatus", "SETTLED",
    "STEP_STATUSES", "STOPPED", "StepStatus",
]
