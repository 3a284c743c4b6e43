"""The request bodies and the answers of the HTTP API: the bodies are validated with
these pydantic models, and bodies and answers make /openapi.json. The answers are built
by the engine's ``to_json`` (the CLI's ``--json`` says the same); where an answer is one
of the engine's classes as it is (``RunPage``, ``CompletionInfo``, ``Wait``) a dataclass
here with its fields is its schema, else a model here mirrors it. Tests check every route's answer
against its schema, so they cannot drift apart. An answer may carry fields a later
version adds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..durable.selection import EXAMPLE, FIELDS
from ..states import AttemptStatus, RunStatus


# The engine's answers as pydantic reads them: dataclasses with the fields, types and
# docstrings of ``lashflow.durable.outcome``'s classes, which are written out on
# ``lashflow.slotted`` (a resume builds no dataclass it need not; ADR 0044) and so have
# no schema of their own. tests/http checks the fields stay the same.

@dataclass
class RunError:
    code: str
    message: str
    kind: str | None = None
    line: int | None = None
    column: int | None = None
    site: str | None = None


@dataclass
class Wait:
    """One thing a parked run waits on, with the CLI command that would resolve it."""

    kind: str
    step: str
    resolve: str
    tool: str | None = None
    key: str | None = None
    until: float | None = None
    signal: str | None = None
    child_run_id: str | None = None
    state: str | None = None
    limit: str | None = None


@dataclass
class CompletionInfo:
    """What ``Engine.completion(key)`` tells about a genuine key: its run, its step and
    ``state``: ``open`` (waiting for a result), ``resolved`` (``resolution`` says by
    what), ``expired`` (its deadline passed) or ``not_waiting`` (the call has not parked
    on it yet)."""

    run_id: str
    step: str
    state: str
    deadline_at: float | None = None
    resolution: dict[str, Any] | None = None


@dataclass
class AttemptView:
    attempt: int
    status: AttemptStatus
    code: str | None
    message: str | None
    started_at: float | None
    finished_at: float | None
    usage: dict[str, Any] | None = None


@dataclass
class RunSummary:
    """One run as a list shows it: no input, result or journal (``Engine.runs``).

    ``owner_gone``: the run is ``running`` or ``queued`` but its lease has expired, so no
    worker is moving it on (``lashflow recover`` or any worker will)."""

    run_id: str
    process: str | None
    status: RunStatus
    parent_run_id: str | None
    created_at: float
    updated_at: float
    waiting: list[Wait] = field(default_factory=list)
    error: RunError | None = None
    wake_at: float | None = None
    cancel_requested: bool = False
    owner: str | None = None
    owner_gone: bool = False
    note: str | None = None
    version: int | None = None
    paused: dict[str, Any] | None = None


@dataclass
class RunPage:
    """One page of ``Engine.runs``, newest first; pass ``next_cursor`` for the next."""

    runs: list[RunSummary]
    next_cursor: str | None = None


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompletionBody(_Body):
    """A webhook's answer for a completion key: exactly one of ``result`` (any JSON, null
    included) or ``error`` (a message: the process sees ``{ok: false, error}``)."""

    result: Any = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> "CompletionBody":
        given = {"result", "error"} & self.model_fields_set
        if len(given) != 1:
            raise ValueError("give exactly one of `result` (JSON) or `error` (a message)")
        return self


class StartRun(_Body):
    """Start a run of a process file from the server's processes directory."""

    file: str = Field(description="A .lash file, relative to the server's --processes dir.")
    process: str | None = Field(None, description="The process to run (default: the only "
                                                  "one, or the main block).")
    input: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = Field(None, description="Idempotency: the same id with the same "
                                                 "file and input gives back the same run.")
    queue: str | None = Field(None, description="Wait in this queue until its limits let a "
                                                "worker start it.")
    key: str | None = Field(None, description="The run's key in its queue (per-key limits, "
                                              "fairness).")
    priority: int | None = Field(None, description="1 starts first (default: the queue's "
                                                   "middle level).")
    dedup_id: str | None = Field(None, description="The same id in the same queue gives back "
                                                   "the first run.")
    debounce: str | None = Field(None, description='A window ("30s"): submissions of the key '
                                                   "within it make one run.")
    debounce_keep: str = Field("newest", description="newest or oldest: the input it takes.")
    singleton: str | None = Field(None, description="skip or cancel-running: one run at a "
                                                    "time per key.")


class SignalBody(_Body):
    payload: Any = None


class CancelBody(_Body):
    reason: str | None = None


class RunPauseBody(_Body):
    reason: str | None = Field(None, description="Why: kept on the run and shown.")
    by: str | None = Field(None, description="Who pauses it, as shown (default: "
                           "\"api\" and the caller's address).")


class BulkBody(_Body):
    """A bulk action over every run ``where`` selects (``lashflow cancel --where``...)."""

    action: Literal["cancel", "retry", "pause", "unpause", "gc", "upgrade"]
    where: str = Field(description=f"Conditions joined by `and`, e.g. \"{EXAMPLE}\" "
                       f"(fields: {', '.join(FIELDS)}), or `all`.")
    dry_run: bool = Field(False, description="Count what would be acted on; change nothing.")
    reason: str | None = Field(None, description="cancel, pause: why (kept and shown).")
    by: str | None = Field(None, description="pause: who (default: \"api\" and the "
                           "caller's address).")
    to: int | None = Field(None, description="upgrade: the version (default: the latest).")


class ErrorDetail(BaseModel):
    code: str
    message: str
    path: str | None = Field(None, description="Where in the body (a JSON path such as "
                                               "`$.input.items[2]`), for `input_invalid`.")
    hint: str | None = None


class ErrorBody(BaseModel):
    """Every refusal: ``{"error": {"code", "message"}}`` with the CLI's codes."""

    error: ErrorDetail


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass
class WaitingItem(Wait):
    """An open wait with the run it belongs to."""

    run_id: str = field(kw_only=True)


@dataclass
class RunAnswer(RunSummary):
    """One run: its input, result (when finished) or error, waits and children."""

    input: dict[str, Any] = field(kw_only=True)
    result: Any = None
    prints: list[str] = field(default_factory=list)
    file: str | None = None
    children: list[RunSummary] = field(default_factory=list)
    journal_error: RunError | None = None
    pending_signals: list[dict[str, Any]] = field(default_factory=list)
    schedule: dict[str, Any] | None = None  # a schedule's run: name, tick, trigger


class StepInfo(_Answer):
    """One journal step; ``preview`` is its outcome within the output budget."""

    step: str
    kind: str
    tool: str | None
    status: str
    state: str
    attempts: int
    started_at: float | None
    finished_at: float | None
    duration: float | None
    preview: str | None
    attempt_log: list[AttemptView]
    args: Any = None
    wake_at: float | None = None


class StepsAnswer(_Answer):
    steps: list[StepInfo]


class StepOutputAnswer(_Answer):
    """A step's whole outcome, beyond the output budget."""

    run_id: str
    step: str
    kind: str
    tool: str | None
    status: str
    outcome: Any


class RunStatusAnswer(_Answer):
    """A run started or retried (it moves on in the background): its status now."""

    run_id: str
    status: RunStatus


class CompletionAnswer(_Answer):
    """``duplicate``: the very same answer was recorded before (a sender's retry)."""

    run_id: str
    status: RunStatus
    duplicate: bool


class SignalAnswer(_Answer):
    run_id: str
    signal: str
    status: RunStatus


class CancelAnswer(_Answer):
    run_id: str
    status: RunStatus
    already_settled: bool


class WaitingAnswer(_Answer):
    waiting: list[WaitingItem]


class JobAnswer(_Answer):
    """A bulk action's job: how far it got. ``state``: running, done or failed."""

    job_id: str
    action: str
    where: str
    dry_run: bool
    matched: int
    seen: int
    acted: int
    skipped: int
    state: Literal["running", "done", "failed"]
    sample: list[str]
    started_at: float
    finished_at: float | None
    seconds: float
    error: ErrorDetail | None = None


class HealthAnswer(_Answer):
    ok: bool


class RunEventData(_Answer):
    """The ``data:`` line of one Server-Sent Event of ``/v1/runs/{id}/events`` and
    ``/v1/events`` (its ``id:`` is ``seq`` for a run's stream, a cursor for the feed);
    the other fields depend on ``kind`` (docs/http.md)."""

    run_id: str
    seq: int
    kind: str  # run | step | attempt | print | yield
    at: float


__all__ = ["BulkBody", "JobAnswer", "RunPauseBody", "CancelAnswer", "CancelBody", "CompletionAnswer", "CompletionBody",
           "CompletionInfo", "ErrorBody", "ErrorDetail", "HealthAnswer", "RunAnswer",
           "RunEventData", "RunPage",
           "RunStatusAnswer", "RunSummary", "SignalAnswer", "SignalBody",
           "StartRun", "StepInfo", "StepOutputAnswer", "StepsAnswer", "WaitingAnswer",
           "WaitingItem"]
