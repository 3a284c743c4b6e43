"""A run's events: what a live view shows, derived from each journal write (ADR 0033).

Every write that changes a run (a journal commit, creating it, re-opening it) also appends
its events to the run's event log, in the same transaction: a step recorded or parked, an
attempt, a print, a yield, a status change. Each event has the run's next offset
(``seq``, 1, 2, 3, ... with no gap), so a subscriber that saw offset N asks for what comes
after N and misses nothing and sees nothing twice, whatever crashed in between: the log is
the journal's, not a process's memory.

This module is pure: it turns a ``Commit`` into event rows (kind, data, time) and reads
rows back. Events are small: a value bigger than ``VALUE_LIMIT`` characters of JSON is
left out (``"truncated": true``; the run's journal keeps it whole), and no completion key
or resume command goes into one (waits keep their kind, step, tool, deadline, signal).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import UsageError
from ..states import TEXT, RunStatus, StepStatus
from .base import AttemptRecord, Commit, RunChange, RunRecord, StepRecord
from .rows import dumps, loads
from ..slotted import Frozen

VALUE_LIMIT = 4096  # characters of JSON a value may take inside an event
KINDS = ("run", "step", "attempt", "print", "yield")
_WAIT_FIELDS = ("kind", "step", "tool", "until", "signal", "child_run_id", "state")

EventRow = tuple[str, str, float]  # (kind, data as JSON text, at)
RunEventRow = tuple[str, str, str, float]  # (run_id, kind, data as JSON text, at)


class RunEvent(Frozen):
    """One event of a run: ``seq`` its offset in the run's log, ``cursor`` its place in
    the feed of every run (opaque; ``Store.feed`` resumes after it)."""

    __slots__ = ("run_id", "seq", "kind", "data", "at", "cursor")
    run_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    at: float
    cursor: str

    def __init__(
            self,
            run_id: str,
            seq: int,
            kind: str,
            data: dict[str, Any],
            at: float,
            cursor: str = "",
    ) -> None:
        setter = object.__setattr__
        setter(self, "run_id", run_id)
        setter(self, "seq", seq)
        setter(self, "kind", kind)
        setter(self, "data", data)
        setter(self, "at", at)
        setter(self, "cursor", cursor)

    def to_json(self) -> dict[str, Any]:
        return {**self.data, "run_id": self.run_id, "seq": self.seq, "kind": self.kind,
                "at": self.at}


def _small(into: dict[str, Any], name: str, value: Any) -> None:
    """``into[name] = value`` if its JSON is small, else ``into[name + "_truncated"]``."""
    if value is None:
        return
    if isinstance(value, (bool, int, float)) or isinstance(value, str) and \
            len(value) * 6 <= VALUE_LIMIT:
        into[name] = value  # small whatever its escapes: no encoding to measure it
        return
    text = dumps(value)
    if len(text) <= VALUE_LIMIT:
        into[name] = value
    else:
        into[f"{name}_truncated"] = len(text)


def waits_of(waiting: Sequence[Any]) -> list[dict[str, Any]]:
    """A run's waits without their completion keys and resume commands."""
    return [{k: w[k] for k in _WAIT_FIELDS if w.get(k) is not None}
            for w in waiting if isinstance(w, dict)]


def _attempt(attempt: AttemptRecord) -> dict[str, Any]:
    # statuses go in as plain text (``TEXT``): the fast encoder writes plain str only
    data: dict[str, Any] = {"attempt": attempt.attempt, "status": TEXT[attempt.status]}
    for name in ("code", "message", "started_at", "finished_at"):
        value = getattr(attempt, name)
        if value is not None:
            data[name] = value
    return data


def _step(step: StepRecord, attempts: list[AttemptRecord]) -> tuple[str, dict[str, Any]]:
    if step.kind in ("print", "yield") and isinstance(step.outcome, dict):
        data: dict[str, Any] = {"step": step.step_key}
        if step.kind == "print":
            _small(data, "text", step.outcome.get("text"))
        else:
            _small(data, "value", step.outcome.get("value"))
        return step.kind, data
    data = {"step": step.step_key, "index": step.seq, "step_kind": step.kind,
            "status": TEXT[step.status]}
    if step.tool:
        data["tool"] = step.tool
    outcome = step.outcome
    if step.status == StepStatus.DONE and isinstance(outcome, dict) and step.kind == "tool":
        data["outcome"] = outcome.get("status")
        error = outcome.get("error")
        if isinstance(error, dict):
            data["error"] = {k: error[k] for k in ("code", "message") if k in error}
        _small(data, "value", outcome.get("value"))
    elif step.status == StepStatus.DONE:
        _small(data, "value", outcome)
    if attempts:
        data["attempts"] = [_attempt(a) for a in attempts]
    return "step", data


def _run(change: RunChange) -> dict[str, Any]:
    data: dict[str, Any] = {"status": TEXT[change.status]}
    if change.error:
        data["error"] = {k: v for k, v in change.error.items() if k in ("code", "message")}
    if change.status == RunStatus.FINISHED:
        _small(data, "result", change.result)
    if change.waiting:
        data["waiting"] = waits_of(change.waiting)
    if change.wake_at is not None:
        data["wake_at"] = change.wake_at
    return data


def _when(change: Commit) -> float:
    """The commit's time by the engine's clock (its records carry it; the store reads
    no clock of its own): 0 for a commit that carries none."""
    times = [change.run.updated_at] if change.run is not None else []
    times += [step.updated_at for step in change.steps]
    times += [a.finished_at or a.started_at for a in change.attempts]
    return max((t for t in times if t), default=0.0)


def of_commit(change: Commit) -> list[EventRow]:
    """The events one journal commit makes, in order: its steps (each with the attempts
    written beside it), attempts of steps not in it, then the run's change. A record
    without a time of its own takes the commit's (``_when``), worked out only then: the
    engine's records all carry one."""
    if not (change.steps or change.attempts or change.run or change.events):
        return []
    by_step: dict[str, list[AttemptRecord]] = {}
    for attempt in change.attempts:
        by_step.setdefault(attempt.step_key, []).append(attempt)
    rows: list[EventRow] = []
    for step in change.steps:
        kind, data = _step(step, by_step.pop(step.step_key, []))
        rows.append((kind, dumps(data), step.updated_at or _when(change)))
    for attempts in by_step.values():
        for attempt in attempts:
            rows.append(("attempt", dumps({"step": attempt.step_key, **_attempt(attempt)}),
                         attempt.finished_at or attempt.started_at or _when(change)))
    rows += change.events
    if change.run is not None:
        rows.append(("run", dumps(_run(change.run)), change.run.updated_at or _when(change)))
    return rows


def announced(step: StepRecord, attempt: AttemptRecord) -> EventRow:
    """The event of a call under way whose start has no row (an idempotent call: its
    first write is its outcome, ADR 0038): what its ``started`` row would make, without
    ``index`` while the step has no row number yet (``seq`` 0)."""
    kind, data = _step(step, [attempt])
    if not step.seq:
        del data["index"]
    return kind, dumps(data), attempt.started_at or step.updated_at


def status_event(status: RunStatus, at: float, **data: Any) -> EventRow:
    """A status change made outside a journal commit (created, re-opened)."""
    return ("run", dumps({"status": TEXT[status], **{k: v for k, v in data.items()
                                                       if v is not None}}), at)


def created(run: RunRecord) -> EventRow:
    """A new run's first event."""
    return status_event(run.status, run.created_at, process=run.process,
                        parent_run_id=run.parent_run_id)


def _bad_cursor(text: str) -> UsageError:
    return UsageError(f"bad event cursor {text[:40]!r}: pass the id of the last event seen "
                      "(Last-Event-ID), or nothing to start from now")


def sqlite_cursor(text: str) -> int:
    """SQLite's feed cursor: the last event id seen ("" or "0" is the beginning)."""
    if text in ("", "0"):
        return 0
    if not text.isdigit() or len(text) > 18:
        raise _bad_cursor(text)
    return int(text)


def pg_cursor(text: str) -> tuple[int, int]:
    """PostgreSQL's feed cursor: (transaction id, event id) of the last event seen ("" or
    "0" is the beginning)."""
    if text in ("", "0"):
        return 0, 0
    tx, _, ident = text.partition(".")
    if not (tx.isdigit() and ident.isdigit() and len(tx) <= 19 and len(ident) <= 19):
        raise _bad_cursor(text)
    return int(tx), int(ident)


def event_from_row(row: Sequence[Any]) -> RunEvent:
    """A row of (run_id, seq, kind, data, at, feed cursor)."""
    run_id, seq, kind, data, at, cursor = row
    decoded = loads(data)
    return RunEvent(run_id, int(seq), kind, decoded if isinstance(decoded, dict) else {},
                    float(at), str(cursor))


__all__ = ["KINDS", "VALUE_LIMIT", "EventRow", "RunEvent", "RunEventRow", "created", "event_from_row",
           "of_commit", "pg_cursor", "sqlite_cursor", "status_event", "waits_of", "announced"]
