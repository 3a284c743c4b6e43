"""What the Engine hands back to users: run outcomes, waits, journal views."""

from __future__ import annotations

from typing import Any

from ..slotted import Slotted
from ..states import AttemptStatus, RunStatus, StepStatus


class RunError(Slotted):
    __slots__ = ("code", "message", "kind", "line", "column", "site")

    def __init__(
            self,
            code: str,
            message: str,
            kind: str | None = None,
            line: int | None = None,
            column: int | None = None,
            site: str | None = None,  # the ``fail`` statement that ended the run (its site id)
    ) -> None:
        self.code = code
        self.message = message
        self.kind = kind
        self.line = line
        self.column = column
        self.site = site

    def to_json(self) -> dict[str, Any]:
        return _set_fields(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "RunError | None":
        if not data:
            return None
        return cls(data["code"], data["message"], data.get("kind"), data.get("line"),
                   data.get("column"), data.get("site"))


class Wait(Slotted):
    """One thing a parked run waits on, with the CLI command that would resolve it."""

    __slots__ = ("kind", "step", "resolve", "tool", "key", "until", "signal",
                 "child_run_id", "state", "limit")

    def __init__(
            self,
            kind: str,  # completion | sleep | signal | child | rate
            step: str,
            resolve: str,
            tool: str | None = None,
            key: str | None = None,
            until: float | None = None,  # a rate wait: the call's reserved slot
            signal: str | None = None,
            child_run_id: str | None = None,
            # "resolved": its completion key was answered and the run has not resumed yet
            # (``resolve`` is then the command that resumes it); "undefined": a rate wait on a
            # named limit nobody defined (``limit``); None: still open
            state: str | None = None,
            limit: str | None = None,
    ) -> None:
        self.kind = kind
        self.step = step
        self.resolve = resolve
        self.tool = tool
        self.key = key
        self.until = until
        self.signal = signal
        self.child_run_id = child_run_id
        self.state = state
        self.limit = limit

    def to_json(self) -> dict[str, Any]:
        return _set_fields(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Wait":
        return cls(**data)


class CompletionInfo(Slotted):
    """What ``Engine.completion(key)`` tells about a genuine key: its run, its step and
    ``state``: ``open`` (waiting for a result), ``resolved`` (``resolution`` says by
    what), ``expired`` (its deadline passed) or ``not_waiting`` (the call has not parked
    on it yet)."""

    __slots__ = ("run_id", "step", "state", "deadline_at", "resolution")

    def __init__(
            self,
            run_id: str,
            step: str,
            state: str,
            deadline_at: float | None = None,
            resolution: dict[str, Any] | None = None,
    ) -> None:
        self.run_id = run_id
        self.step = step
        self.state = state
        self.deadline_at = deadline_at
        self.resolution = resolution

    def to_json(self) -> dict[str, Any]:
        return _set_fields(self)


class RunOutcome(Slotted):
    __slots__ = ("run_id", "status", "result", "error", "waiting", "prints", "paused")

    def __init__(
            self,
            run_id: str,
            status: RunStatus,
            result: Any = None,
            error: RunError | None = None,
            waiting: list[Wait] | None = None,
            prints: list[str] | None = None,
            paused: dict[str, Any] | None = None,  # who paused it, when and why (a paused run)
    ) -> None:
        self.run_id = run_id
        self.status = status
        self.result = result
        self.error = error
        self.waiting = [] if waiting is None else waiting
        self.prints = [] if prints is None else prints
        self.paused = paused

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"run_id": self.run_id, "status": self.status.value}
        if self.paused is not None:
            data["paused"] = dict(self.paused)
        if self.status is RunStatus.FINISHED:
            data["result"] = self.result
        if self.error is not None:
            data["error"] = self.error.to_json()
        if self.waiting:
            data["waiting"] = [wait.to_json() for wait in self.waiting]
        if self.prints:
            data["prints"] = list(self.prints)
        return data


class AttemptView(Slotted):
    __slots__ = ("attempt", "status", "code", "message", "started_at", "finished_at",
                 "usage")

    def __init__(
            self,
            attempt: int,
            status: AttemptStatus,
            code: str | None,
            message: str | None,
            started_at: float | None,
            finished_at: float | None,
            usage: dict[str, Any] | None = None,
    ) -> None:
        self.attempt = attempt
        self.status = status
        self.code = code
        self.message = message
        self.started_at = started_at
        self.finished_at = finished_at
        self.usage = usage


class StepView(Slotted):
    """``Engine.steps()`` rows: the journal in order, outcome full and projected.

    ``args``: the arguments the step was called with (left out when they were too big to
    journal beside their hash); ``wake_at``: when a sleep ends."""

    __slots__ = ("step_key", "kind", "tool", "status", "attempts", "outcome", "projected",
                 "args", "wake_at", "created_at", "updated_at")

    def __init__(
            self,
            step_key: str,
            kind: str,
            tool: str | None,
            status: StepStatus,
            attempts: list[AttemptView],
            outcome: Any,
            projected: str | None,
            args: Any = None,
            wake_at: float | None = None,
            created_at: float | None = None,
            updated_at: float | None = None,
    ) -> None:
        self.step_key = step_key
        self.kind = kind
        self.tool = tool
        self.status = status
        self.attempts = attempts
        self.outcome = outcome
        self.projected = projected
        self.args = args
        self.wake_at = wake_at
        self.created_at = created_at
        self.updated_at = updated_at

    @property
    def state(self) -> str:
        """One word: the tool outcome when done, ``interrupted`` for an attempt a crash
        cut off, else the step status."""
        if self.kind == "tool" and isinstance(self.outcome, dict) and self.status == StepStatus.DONE:
            return str(self.outcome.get("status", StepStatus.DONE.value))
        if self.status == StepStatus.STARTED and self.attempts and \
                self.attempts[-1].status == AttemptStatus.INTERRUPTED:
            return AttemptStatus.INTERRUPTED.value
        return self.status.value

    def timing(self) -> tuple[float | None, float | None]:
        """(first start, last finish) over the step's attempts; None when unknown."""
        starts = [a.started_at for a in self.attempts if a.started_at is not None]
        ends = [a.finished_at for a in self.attempts if a.finished_at is not None]
        if not starts and isinstance(self.outcome, dict):
            started, finished = self.outcome.get("started_at"), self.outcome.get("finished_at")
            return (started if isinstance(started, (int, float)) else None,
                    finished if isinstance(finished, (int, float)) else None)
        return (min(starts) if starts else None), (max(ends) if ends else None)

    def to_json(self) -> dict[str, Any]:
        """The step as ``show --json`` and the HTTP API give it (``attempts`` counts them,
        ``attempt_log`` lists them)."""
        started, finished = self.timing()
        data: dict[str, Any] = {
            "step": self.step_key, "kind": self.kind, "tool": self.tool, "status": self.status,
            "state": self.state, "attempts": len(self.attempts),
            "started_at": started, "finished_at": finished,
            "duration": (finished - started) if started is not None and finished is not None
            else None,
            "preview": self.projected,
            "attempt_log": [{"attempt": a.attempt, "status": a.status, "code": a.code,
                             "message": a.message, "started_at": a.started_at,
                             "finished_at": a.finished_at} for a in self.attempts],
        }
        if self.args is not None:
            data["args"] = self.args
        if self.wake_at is not None:
            data["wake_at"] = self.wake_at
        return data


def _set_fields(value: Slotted) -> dict[str, Any]:
    """The fields of ``value`` that are not None, by name, copied (as
    ``dataclasses.asdict`` copied them)."""
    import copy

    return {name: copy.deepcopy(getattr(value, name)) for name in type(value).__slots__
            if getattr(value, name) is not None}


def _present(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


class RunSummary(Slotted):
    """One run as a list shows it: no input, result or journal (``Engine.runs``).

    ``owner_gone``: the run is ``running`` or ``queued`` but its lease has expired, so no
    worker is moving it on (``lashflow recover`` or any worker will)."""

    __slots__ = ("run_id", "process", "status", "parent_run_id", "created_at", "updated_at",
                 "waiting", "error", "wake_at", "cancel_requested", "owner", "owner_gone",
                 "note", "version", "paused")

    def __init__(
            self,
            run_id: str,
            process: str | None,
            status: RunStatus,
            parent_run_id: str | None,
            created_at: float,
            updated_at: float,
            waiting: list[Wait] | None = None,
            error: RunError | None = None,
            wake_at: float | None = None,
            cancel_requested: bool = False,
            owner: str | None = None,
            owner_gone: bool = False,
            note: str | None = None,
            version: int | None = None,  # the deployed version it runs, if started by name
            # a paused run: {"by", "at", "reason"?, "was"} (who paused it, when, why, from what)
            paused: dict[str, Any] | None = None,
    ) -> None:
        self.run_id = run_id
        self.process = process
        self.status = status
        self.parent_run_id = parent_run_id
        self.created_at = created_at
        self.updated_at = updated_at
        self.waiting = [] if waiting is None else waiting
        self.error = error
        self.wake_at = wake_at
        self.cancel_requested = cancel_requested
        self.owner = owner
        self.owner_gone = owner_gone
        self.note = note
        self.version = version
        self.paused = paused

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_id": self.run_id, "status": self.status.value, "process": self.process,
            "parent_run_id": self.parent_run_id, "created_at": self.created_at,
            "updated_at": self.updated_at}
        data.update(_present({
            "wake_at": self.wake_at, "owner": self.owner, "note": self.note,
            "version": self.version,
            "error": self.error.to_json() if self.error is not None else None}))
        if self.waiting:
            data["waiting"] = [wait.to_json() for wait in self.waiting]
        if self.cancel_requested:
            data["cancel_requested"] = True
        if self.owner_gone:
            data["owner_gone"] = True
        if self.paused is not None:
            data["paused"] = dict(self.paused)
        return data


class RunPage(Slotted):
    """One page of ``Engine.runs``, newest first; pass ``next_cursor`` for the next."""

    __slots__ = ("runs", "next_cursor")

    def __init__(self, runs: list[RunSummary], next_cursor: str | None = None) -> None:
        self.runs = runs
        self.next_cursor = next_cursor

    def to_json(self) -> dict[str, Any]:
        return {"runs": [run.to_json() for run in self.runs], "next_cursor": self.next_cursor}


class RunDetail(Slotted):
    """Everything an operator looks at for one run, read in one go (``Engine.run_detail``).

    A journal that fails its integrity checks leaves ``steps`` empty and says why in
    ``journal_error``; the run itself still reads."""

    __slots__ = ("summary", "input", "result", "prints", "steps", "children", "file",
                 "journal_error", "pending_signals", "forked_from", "forks", "schedule")

    def __init__(
            self,
            summary: RunSummary,
            input: dict[str, Any],
            result: Any = None,
            prints: list[str] | None = None,
            steps: list[StepView] | None = None,
            children: list[RunSummary] | None = None,
            file: str | None = None,
            journal_error: RunError | None = None,
            # signals delivered that the process has not taken yet (``wait_signal`` takes them
            # in delivery order): [{"name", "payload"}]
            pending_signals: list[dict[str, Any]] | None = None,
            # fork lineage: {"run_id", "step"} of the run this one was forked from; runs forked
            # from this one
            forked_from: dict[str, Any] | None = None,
            forks: list[str] | None = None,
            # a schedule's run: {"name", "tick" (epoch seconds), "trigger" ("manual" or None)}
            schedule: dict[str, Any] | None = None,
    ) -> None:
        self.summary = summary
        self.input = input
        self.result = result
        self.prints = [] if prints is None else prints
        self.steps = [] if steps is None else steps
        self.children = [] if children is None else children
        self.file = file
        self.journal_error = journal_error
        self.pending_signals = [] if pending_signals is None else pending_signals
        self.forked_from = forked_from
        self.forks = [] if forks is None else forks
        self.schedule = schedule

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def status(self) -> RunStatus:
        return self.summary.status

    def to_json(self) -> dict[str, Any]:
        data = self.summary.to_json()
        data["input"] = self.input
        if self.status is RunStatus.FINISHED:
            data["result"] = self.result
        if self.prints:
            data["prints"] = list(self.prints)
        if self.file:
            data["file"] = self.file
        data["steps"] = [step.to_json() for step in self.steps]
        data["children"] = [child.to_json() for child in self.children]
        if self.journal_error is not None:
            data["journal_error"] = self.journal_error.to_json()
        if self.pending_signals:
            data["pending_signals"] = list(self.pending_signals)
        if self.forked_from is not None:
            data["forked_from"] = dict(self.forked_from)
        if self.forks:
            data["forks"] = list(self.forks)
        if self.schedule is not None:
            data["schedule"] = dict(self.schedule)
        return data
