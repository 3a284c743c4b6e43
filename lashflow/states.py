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
        return self in SETTLED


RUN_STATUSES: tuple[str, ...] = tuple(status.value for status in RunStatus)

RUN_STATUS: dict[str, RunStatus] = {status.value: status for status in RunStatus}
"""A stored status to its member: one dict lookup per row (``RunStatus(text)`` goes
through the enum machinery, some forty times as much)."""

SETTLED = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED})
"""Ended: the run never moves again on its own (an operator may retry or fork it).
Members hash as their text, so a status read as plain text is found in these sets too."""

STOPPED = SETTLED | {RunStatus.NEEDS_ATTENTION, RunStatus.PAUSED}
"""Nothing will move the run on without an operator: settled, or needing attention."""

ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
"""A worker should be driving these; with no live lease owner they are orphaned."""

PAUSABLE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING})
"""What ``pause`` stops: runs that would move on by themselves."""

KEPT_PAUSED = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)
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
STEP_STATUS: dict[str, StepStatus] = {status.value: status for status in StepStatus}


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


FINAL_ATTEMPT_STATUSES = frozenset({AttemptStatus.OK, AttemptStatus.ERR, AttemptStatus.CANCELLED,
                                    AttemptStatus.EXHAUSTED})
ATTEMPT_STATUS: dict[str, AttemptStatus] = {status.value: status for status in AttemptStatus}

TEXT: dict[str, str] = {status.value: status.value
                        for kind in (RunStatus, StepStatus, AttemptStatus) for status in kind}
"""Any status, member or its text, to its plain ``str`` text: what goes into a JSON text or
a row. One lookup (``.value`` is a descriptor call, over ten times as much), and the fast JSON
encoder writes plain ``str`` only: a member would send the whole text to the slow one."""

__all__ = [
    "ACTIVE", "ATTEMPT_STATUS", "KEPT_PAUSED", "PAUSABLE", "AttemptStatus", "FINAL_ATTEMPT_STATUSES",
    "RUN_STATUS", "RUN_STATUSES", "RunStatus", "SETTLED", "STEP_STATUS", "STEP_STATUSES", "STOPPED",
    "StepStatus", "TEXT",
]
