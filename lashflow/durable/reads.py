"""The read side: what the engine tells about runs, each answer from one store read
where the store can give it in one. The CLI and the HTTP service present what these
return and compute nothing."""

from __future__ import annotations

import builtins
from shlex import quote
from typing import Any, Iterable

from .. import store as st
from ..errors import JournalCorrupt, UnknownRun, UsageError
from ..json_kinds import storable_text
from ..states import ACTIVE, RUN_STATUSES, AttemptStatus, RunStatus, StepStatus
from ..store import AttemptRecord, RunRecord, StepRecord, Store
from ..store.leases import may_claim
from ..tools.clock import Clock
from ..tools.outcome import OutcomeStatus
from ..slotted import replace
from .replay import check_journal
from .order import display_order
from .outcome import (
    AttemptView, RunDetail, RunError, RunOutcome, RunPage, RunSummary, StepView, Wait,
)
from .prints import Prints
from .tool_runner import ToolRunner

MAX_PAGE = 1000



def check_run_filters(status: str | Iterable[str] | None, limit: int) -> tuple[str, ...]:
    """The statuses of a run query, refused (``usage_error``) if one is unknown or the
    page size is out of range; callers may check before opening anything."""
    statuses = (status,) if isinstance(status, str) else tuple(status or ())
    unknown = [s for s in statuses if s not in RUN_STATUSES]
    if unknown:
        raise UsageError(f"unknown status {unknown[0]!r}; use one of {', '.join(RUN_STATUSES)}")
    if not 1 <= limit <= MAX_PAGE:
        raise UsageError(f"limit must be between 1 and {MAX_PAGE}, not {limit}")
    return statuses


def _stored_id(run_id: str) -> str:
    """A run id no database can hold (a NUL, a lone surrogate) is unknown before any
    database sees it (PostgreSQL refuses a NUL in text with an error of its own)."""
    if not isinstance(run_id, str) or not storable_text(run_id):
        raise UnknownRun(f"no run with id {run_id!r}")
    return run_id

class Reads:
    def __init__(self, store: Store, tools: ToolRunner, clock: Clock) -> None:
        self.store = store
        self.tools = tools
        self.clock = clock

    async def require(self, run_id: str) -> RunRecord:
        run = await self.store.get_run(_stored_id(run_id))
        if run is None:
            raise UnknownRun(f"no run with id {run_id!r}")
        return run

    def outcome_of(self, run: RunRecord, prints: list[str] | None = None) -> RunOutcome:
        return RunOutcome(
            run_id=run.run_id, status=RunStatus(run.status),
            result=run.result if run.status == RunStatus.FINISHED else None,
            error=RunError.from_json(run.error),
            waiting=[Wait.from_json(w) for w in run.waiting]
            if run.status in (RunStatus.WAITING, RunStatus.PAUSED) else [],
            prints=list(prints or ()),
            paused=run.meta.get("paused") if run.status == RunStatus.PAUSED else None)

    async def get(self, run_id: str) -> RunOutcome:
        run = await self.require(run_id)
        try:
            steps, _ = await self.store.load_journal(run_id)
            check_journal(run_id, steps)
        except JournalCorrupt:
            steps = []  # the run's own row still reads; steps() reports the corruption
        return self.outcome_of(run, prints=self._prints(run_id, steps))

    def _prints(self, run_id: str, steps: list[StepRecord]) -> list[str]:
        texts = [s.outcome["text"] for s in steps if s.kind == "print" and s.outcome]
        return Prints.of(texts, self.tools.project).texts(run_id)

    async def list(self, status: str | None = None) -> builtins.list[RunOutcome]:
        return [self.outcome_of(r) for r in await self.store.list_runs(status)]

    # -- the read API ------------------------------------------------------------------------
    async def runs(self, *, status: str | Iterable[str] | None = None, process: str | None = None,
                   parent: str | None = None, since: float | None = None,
                   until: float | None = None, limit: int = 50,
                   cursor: str | None = None, queue: str | None = None,
                   key: str | None = None) -> RunPage:
        statuses = check_run_filters(status, limit)
        if key is not None and queue is None:
            raise UsageError("a key filter needs a queue (--queue NAME --key K)")
        for name, given in (("process", process), ("parent", parent), ("queue", queue),
                            ("key", key)):
            if given is not None and not storable_text(given):
                raise UsageError(f"{name} {given!r}: no name or run id holds a NUL or a "
                                 "lone surrogate")
        page = await self.store.query_runs(st.RunQuery(
            statuses, process, parent, since, until, limit, cursor, queue=queue, key=key))
        now = self.clock.now()
        return RunPage([self._summary(row, now) for row in page.runs], page.next_cursor)

    async def schedule_runs(self, name: str, limit: int) -> builtins.list[RunSummary]:
        """The runs a schedule started (ids ``name@...``), newest first."""
        now = self.clock.now()
        return [self._summary(row, now) for row in await self.store.schedule_runs(name, limit)]

    async def run_detail(self, run_id: str) -> RunDetail:
        detail = await self.store.run_detail(_stored_id(run_id))
        if detail is None:
            raise UnknownRun(f"no run with id {run_id!r}")
        run, now = detail.run, self.clock.now()
        summary = self._summary(run, now)
        journal_error = None
        steps: builtins.list[StepView] = []
        prints: builtins.list[str] = []
        if detail.journal_error is not None:
            journal_error = RunError(detail.journal_error.code, detail.journal_error.message)
        else:
            try:
                check_journal(run_id, detail.steps)
            except JournalCorrupt as exc:
                journal_error = RunError(exc.code, exc.message)
            else:
                in_flight = run.status == RunStatus.RUNNING and not summary.owner_gone
                steps = self.views(detail.steps, detail.attempts, in_flight=in_flight)
                prints = self._prints(run_id, detail.steps)
        taken: dict[str, int] = {}
        for step in detail.steps:
            if step.kind == "wait_signal" and step.status == StepStatus.DONE and step.tool:
                taken[step.tool] = taken.get(step.tool, 0) + 1
        pending = [{"name": name, "payload": payload} for name, ordinal, payload
                   in detail.signals if ordinal > taken.get(name, 0)]
        summary.waiting = await self.current_waits(run_id, summary.waiting)
        return RunDetail(
            summary, run.input, run.result if run.status == RunStatus.FINISHED else None, prints, steps,
            [self._summary(child, now) for child in detail.children], run.meta.get("file"),
            journal_error, pending, run.meta.get("forked_from"),
            list(run.meta.get("forks", [])), _started_by(run.meta))

    def _summary(self, row: RunRecord | st.RunSummary, now: float) -> RunSummary:
        status = row.status
        # gone: its lease ran out, or (on this machine) its process is provably dead, as
        # after a SIGKILL: recovery would take the run over at once, so say so at once
        owner_gone = status in ACTIVE and row.lease_owner is not None \
            and may_claim(row.lease_owner, row.lease_expires, None, now)
        note = row.meta.get("note") if isinstance(row, RunRecord) else row.note
        version = row.meta.get("version") if isinstance(row, RunRecord) else row.version
        paused = row.meta.get("paused") if isinstance(row, RunRecord) else row.paused
        parked = status is RunStatus.WAITING or status is RunStatus.PAUSED
        return RunSummary(
            row.run_id, row.process, status, row.parent_run_id, row.created_at, row.updated_at,
            [Wait.from_json(w) for w in row.waiting] if parked else [],
            RunError.from_json(row.error), row.wake_at, row.cancel_requested, row.lease_owner,
            owner_gone, note, version, paused if status is RunStatus.PAUSED else None)

    # -- the journal -------------------------------------------------------------------------
    async def steps(self, run_id: str) -> builtins.list[StepView]:
        await self.require(run_id)
        steps, attempts = await self.store.load_journal(run_id)
        check_journal(run_id, steps)
        return self.views(steps, attempts)

    def views(self, steps: builtins.list[StepRecord], attempts: builtins.list[AttemptRecord], *,
              in_flight: bool = True) -> builtins.list[StepView]:
        """Journal rows as views, in ``show``'s order (``display_order``). Unless the run is being driven right now (``in_flight``),
        an attempt still marked ``started`` was cut off by a crash: it reads
        ``interrupted``."""
        by_step: dict[str, builtins.list[AttemptView]] = {}
        for a in attempts:
            status = (a.status if in_flight or a.status != AttemptStatus.STARTED
                      else AttemptStatus.INTERRUPTED)
            by_step.setdefault(a.step_key, []).append(AttemptView(
                a.attempt, status, a.code, a.message, a.started_at, a.finished_at,
                a.detail.get("usage")))
        return [StepView(s.step_key, s.kind, s.tool, s.status, by_step.get(s.step_key, []),
                         s.outcome, self.preview(s), s.detail.get("args"),
                         s.detail.get("wake_at"), s.created_at, s.updated_at)
                for s in display_order(steps)]

    def preview(self, step: StepRecord) -> str | None:
        """What the run history shows of a step, through the output budget."""
        outcome: Any = step.outcome
        if outcome is None:
            return None
        if step.kind == "tool":
            if outcome.get("status") == OutcomeStatus.OK:
                return self.tools.project(outcome.get("value"), tool=step.tool,
                                          run_id=step.run_id, step_key=step.step_key,
                                          tail=bool(step.detail.get("tail")))
            said = outcome.get("message") or outcome.get("status")
            return None if said is None else str(said)
        if step.kind in ("print", "yield", "wake"):
            return self.tools.project(outcome.get("text", ""))
        return self.tools.project(outcome)

    async def waiting(self) -> builtins.list[tuple[str, Wait]]:
        out: builtins.list[tuple[str, Wait]] = []
        for run in await self.store.list_runs(RunStatus.WAITING):
            waits = await self.current_waits(run.run_id, [Wait.from_json(w) for w in run.waiting])
            out.extend((run.run_id, wait) for wait in waits)
        return out

    async def current_waits(self, run_id: str,
                            waits: builtins.list[Wait]) -> builtins.list[Wait]:
        """``waits`` with each completion wait whose key was answered since the run
        parked marked ``resolved``, its command the one that resumes the run (the key's
        own command would only be refused now)."""
        open_steps: dict[str, set[str]] = {}
        current = []
        for wait in waits:
            if wait.kind == "completion":
                owner = wait.child_run_id or run_id
                if owner not in open_steps:
                    open_steps[owner] = {row["step_key"] for row in
                                         await self.store.completion_open_waits(owner)}
                if wait.step not in open_steps[owner]:
                    wait = replace(wait, state="resolved",
                                   resolve=f"lashflow resume {quote(run_id)}")
            current.append(wait)
        return current


def _started_by(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The schedule and tick a schedule's run was started for (docs/schedules.md)."""
    if "schedule" not in meta:
        return None
    return {"name": meta["schedule"], "tick": meta.get("tick"),
            "trigger": meta.get("trigger")}


__all__ = ["Reads"]
