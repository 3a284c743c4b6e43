"""Every error a user can cause is a LashflowError with a stable ``code``.

The CLI renders these as one line ``error[code]: message`` (plus a caret excerpt when a
source location is known); nothing else should ever reach a user as a traceback.
"""

from __future__ import annotations

from typing import Any

from .slotted import Frozen


class LashflowError(Exception):
    """Base class: ``code`` is stable and documented, ``message`` is for humans."""

    code: str = "lashflow_error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details

    def __str__(self) -> str:
        return self.message


class UsageError(LashflowError):
    code = "usage_error"


class InputInvalid(LashflowError):
    """The run input does not fit the process parameters (carries a JSON path)."""

    code = "input_invalid"


class NotFound(LashflowError):
    """What was asked about does not exist (a server answers 404)."""

    code = "not_found"


class UnknownRun(NotFound):
    code = "unknown_run"


class UnknownStep(NotFound):
    code = "unknown_step"


class RunConflict(LashflowError):
    code = "run_conflict"


class DbError(LashflowError):
    code = "db_error"


class NoDatabase(DbError):
    """A read-only command found no lashflow database where it looked (and made none)."""

    code = "no_database"


class LimitExceeded(LashflowError):
    code = "limit_exceeded"


class PluginError(LashflowError):
    code = "plugin_error"


class RunBusy(LashflowError):
    """Another worker holds the run's lease: it is being driven elsewhere right now."""

    code = "run_busy"


class MissingTools(LashflowError):
    """The run needs tools this process has not loaded (another worker may have them)."""

    code = "missing_tools"


class RunSettled(LashflowError):
    """The run has ended; what was asked of it (a signal) no longer applies."""

    code = "run_settled"


class RunPaused(LashflowError):
    """An operator paused the run: nothing drives it until it is unpaused."""

    code = "run_paused"


class Fenced(LashflowError):
    """The run's lease moved to another worker: this worker must stop driving it."""

    code = "lease_lost"


class ScheduleInvalid(UsageError):
    """A schedule's spec cannot be used (a bad cron expression, zone, duration or name)."""

    code = "schedule_invalid"


class UnknownSchedule(NotFound):
    code = "unknown_schedule"


class ScheduleExists(LashflowError):
    code = "schedule_exists"


class QueueInvalid(UsageError):
    """A queue's limits, a key, a priority or a dedup id cannot be used."""

    code = "queue_invalid"


class UnknownQueue(NotFound):
    code = "unknown_queue"


class QueueExists(LashflowError):
    code = "queue_exists"


class RateInvalid(UsageError):
    """A rate that is not ``N/PERIOD`` with both above 0 (``@tool(rate=...)``, a named
    rate limit)."""

    code = "rate_invalid"


class UnknownRateLimit(NotFound):
    code = "unknown_rate_limit"


class JournalCorrupt(DbError):
    """A journal row that cannot be trusted (not JSON, truncated, checksum mismatch, a
    missing blob): the run is never replayed from it. ``details``: ``run_id``, ``step``."""

    code = "journal_corrupt"

    @classmethod
    def of(cls, run_id: str, step_key: str, what: str) -> "JournalCorrupt":
        return cls(f"run {run_id}: the journal row of step {step_key} is corrupt ({what}); it "
                   "is not replayed. Restore the database from a backup, or inspect the row in "
                   "the steps table", run_id=run_id, step=step_key)


class Position(Frozen):
    """1-based line and column; columns count characters, not bytes."""

    __slots__ = ("line", "column")
    line: int
    column: int

    def __init__(self, line: int, column: int) -> None:
        setter = object.__setattr__
        setter(self, "line", line)
        setter(self, "column", column)


def position_of(source: str, offset: int) -> Position:
    """Translate a character offset into a 1-based line/column pair."""
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset) + 1
    last_newline = source.rfind("\n", 0, offset)
    return Position(line, offset - last_newline)
