"""What an operator does to a stopped run: retry it, or fork a new run from one of its
steps (optionally with a step's result set by hand).

Retry continues the same run: the steps before the one that made it stop replay, that
step and every step after it run again (or from a step the operator names). The old rows are not deleted: each retry is
recorded in the run's meta (``retries``: the first sequence number it retired), steps it
retired are hidden from replay by the replay machine, and new attempts of a retired tool
step go on numbering after the old ones, so ``show`` keeps the whole history.

Fork copies the journal before a step into a new run (linked both ways: ``forked_from``
on the new run, ``forks`` on the original) and drives it from there.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from ..errors import RunBusy, RunConflict, UnknownStep, UsageError
from ..states import SETTLED, STOPPED, AttemptStatus, RunStatus, StepStatus
from ..store import (
    AttemptRecord, Commit, JournalEntry, Reopening, RunRecord, StepRecord, Store,
)
from ..tools import OutcomeStatus, ToolOutcome
from ..tools.clock import Clock
from .replay import retired
from .order import batch_of, display_order, succeeded
from .reads import Reads
from ..slotted import Slotted

RETRYABLE = STOPPED - {RunStatus.FINISHED}


def restart_point(steps: list[StepRecord]) -> tuple[int, list[str]]:
    """Where a retry restarts: the step that made the run stop, which is its last step,
    or (when the last step is a fan-out member) the first member of that batch that did
    not succeed; with the batch's members that did succeed (``keep``: they replay). A
    run whose last step succeeded (it stopped on a ``fail`` or an error of its own)
    restarts after its journal: nothing it recorded runs again. An ``err`` an earlier
    step returned and the program handled is not what stopped it."""
    ordered = sorted(steps, key=lambda s: s.seq)
    if not ordered:
        return 1, []
    last = ordered[-1]
    batch = batch_of(last)
    group = [s for s in ordered if batch_of(s) == batch] if batch is not None else [last]
    failed = [s.seq for s in group if not succeeded(s)]
    if not failed:
        return last.seq + 1, []
    start = min(failed)
    return start, [s.step_key for s in group if s.seq > start and succeeded(s)]


def retry_plan(run: RunRecord, steps: list[StepRecord], attempts: list[AttemptRecord],
               from_step: str | None, now: float) -> tuple[list[StepRecord], Reopening]:
    """How a retry re-opens ``run``: the steps it retires (in ``show``'s order: those that
    run again if the code still asks for them), from the step that made it stop
    (``restart_point``) or ``from_step`` (a step key or the row number ``show`` prints).
    Their attempts that ride in a step row (``with_step``, ADR 0010) are written as rows
    of their own (those step rows get rewritten); a retired tool step's completion key is forgotten, so the step waits
    afresh (a run cancelled while it waited would else meet its cancel)."""
    retries = run.meta.get("retries") or []
    shown = display_order(steps)
    live = [s for s in shown if not retired(s, retries)]
    keep: list[str] = []
    if from_step is not None:
        from_seq = shown[_find_step(shown, from_step, run.run_id)].seq
    else:
        from_seq, keep = restart_point(live)
    again = [s for s in live if s.seq >= from_seq and s.step_key not in keep]
    keys = {s.step_key for s in again}
    kept = [AttemptRecord(a.run_id, a.step_key, a.attempt, a.status, a.code, a.message,
                          a.detail, a.started_at, a.finished_at)
            for a in attempts if a.step_key in keys and a.with_step]

    def record(meta: dict[str, Any]) -> None:
        entry: dict[str, Any] = {"from_seq": from_seq, "at": now}
        if keep:
            entry["keep"] = keep
        meta.setdefault("retries", []).append(entry)
    forget = sorted(s.step_key for s in again if s.kind == "tool")
    return again, Reopening(run.run_id, record, forget, kept)


class Operator:
    def __init__(self, store: Store, clock: Clock, reads: Reads) -> None:
        self.store = store
        self.clock = clock
        self.reads = reads

    async def reopen_for_retry(self, run_id: str, from_step: str | None = None, *,
                               dry_run: bool = False) -> list[StepRecord]:
        """Put a failed, cancelled or needs_attention run back in the queue as
        ``retry_plan`` says; the steps it retires. ``dry_run``: change nothing."""
        run = await self.reads.require(run_id)
        if run.status not in RETRYABLE:
            hint = ("; `lashflow resume` continues a run that has not stopped"
                    if run.status not in STOPPED else "")
            raise UsageError(f"run {run_id} is {run.status}: only a failed, cancelled or "
                             f"needs_attention run can be retried{hint}",
                             code="run_not_retryable")
        steps, attempts = await self.store.load_journal(run_id)
        now = self.clock.now()
        again, reopening = retry_plan(run, steps, attempts, from_step, now)
        if dry_run:
            return again
        if not await self.store.reopen_runs([reopening], now):
            raise RunBusy(f"run {run_id} changed while it was being retried; look again")
        return again

    async def retry_page(self, entries: list[JournalEntry]) -> list[str]:
        """Retry each of a page of stopped runs (read with their journals) from where it
        stopped, all in one transaction; the ids re-opened (a run that changed
        meanwhile, or whose journal cannot be trusted, is left as it is)."""
        now = self.clock.now()
        plans = [retry_plan(e.run, e.steps, e.attempts, None, now)[1] for e in entries
                 if e.journal_error is None and e.run.status in RETRYABLE]
        return await self.store.reopen_runs(plans, now)

    async def fork(self, run_id: str, from_step: str, overrides: dict[str, Any],
                   new_run_id: str | None = None) -> str:
        """Create the fork (queued, not driven) and return its id."""
        run = await self.reads.require(run_id)
        steps, attempts = await self.store.load_journal(run_id)
        retries = run.meta.get("retries") or []
        shown = display_order(steps)  # row numbers count every row `show` prints
        cut = _find_step(shown, from_step, run_id)
        step_key = shown[cut].step_key
        rows = {str(number): s.step_key for number, s in enumerate(shown[: cut + 1], 1)
                if s.kind == "tool" and not retired(s, retries)}
        settable = set(rows.values())
        before = [s for s in shown[:cut] if not retired(s, retries)]
        named: dict[str, Any] = {}
        for key, value in overrides.items():
            key = key if key in settable else rows.get(key, key)
            if key not in settable:
                tools = ", ".join(f"{n} ({k})" for n, k in list(rows.items())[:6]) or "none"
                raise UnknownStep(f"--set {key}: not a tool step of run {run_id} at or before "
                                  f"row {cut + 1} ({step_key}); those are, by row number "
                                  f"or key: {tools}")
            named[key] = value
        overrides = named
        copied = [s for s in before if s.status == StepStatus.DONE or s.step_key in overrides]
        if step_key in overrides:
            copied.append(shown[cut])
        now = self.clock.now()
        new_id = new_run_id or f"run_{os.urandom(8).hex()}"
        fork = RunRecord(new_id, run.source_hash, run.process, run.input, run.input_hash,
                         created_at=now, updated_at=now,
                         meta={key: run.meta[key] for key in ("file", "tool_modules")
                               if key in run.meta}
                         | {"forked_from": {"run_id": run_id, "step": step_key}})
        with self.store.writing():
            _, created = await self.store.create_run(fork)
            if not created:
                raise RunConflict(f"run {new_id} already exists; choose another --run-id")
            new_steps, new_attempts = [], []
            for step in copied:
                detail = {k: v for k, v in step.detail.items() if k != "retry"}
                if step.step_key in overrides:
                    outcome = ToolOutcome(OutcomeStatus.OK, overrides[step.step_key],
                                          finished_at=now).to_json()
                    new_steps.append(StepRecord(new_id, step.step_key, step.kind, step.tool,
                                                step.args_hash, StepStatus.DONE, outcome,
                                                dict(detail, set_by_fork=True), step.seq, now,
                                                now))
                    new_attempts.append(AttemptRecord(new_id, step.step_key, 1, AttemptStatus.OK,
                                                      message="set by fork", started_at=now,
                                                      finished_at=now))
                    continue
                new_steps.append(StepRecord(new_id, step.step_key, step.kind, step.tool,
                                            step.args_hash, step.status, step.outcome, detail,
                                            step.seq, step.created_at, step.updated_at))
                new_attempts += [AttemptRecord(new_id, a.step_key, a.attempt, a.status, a.code,
                                               a.message, a.detail, a.started_at, a.finished_at)
                                 for a in attempts if a.step_key == step.step_key]
            await self.store.commit(Commit(new_id, None, new_steps, new_attempts))
        await self.store.update_meta(
            run_id, lambda meta: meta.setdefault("forks", []).append(new_id))
        return new_id


class GcReport(Slotted):
    """What retention deleted (or, in a dry run, would delete)."""

    __slots__ = ("runs", "blobs", "dry_run", "run_ids")

    def __init__(
            self,
            runs: int,
            blobs: int,
            dry_run: bool,
            run_ids: list[str] | None = None,  # the first few, for a person to check
    ) -> None:
        self.runs = runs
        self.blobs = blobs
        self.dry_run = dry_run
        self.run_ids = [] if run_ids is None else run_ids

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "blobs": self.blobs, "dry_run": self.dry_run,
                "run_ids": self.run_ids}


GC_BATCH = 200  # runs per transaction: the write lock is never held long


async def collect(store: Store, before: float, statuses: Iterable[str], *,
                  dry_run: bool) -> GcReport:
    """Delete settled runs last updated before ``before`` (with their journals), then the
    blobs no step refers to, in batches of ``GC_BATCH`` that each commit on their own,
    so workers keep running beside it."""
    wanted = sorted(set(statuses))
    unknown = [s for s in wanted if s not in SETTLED]
    if unknown:
        raise UsageError(f"gc deletes only settled runs (finished, failed, cancelled), not "
                         f"{unknown[0]!r}")
    if dry_run:
        ids = await store.stale_runs(before, wanted, 1_000_000)
        return GcReport(len(ids), 0, True, ids[:20])
    deleted, shown = 0, list[str]()
    while True:
        ids = await store.stale_runs(before, wanted, GC_BATCH)
        if not ids:
            break
        deleted += await store.delete_runs(ids)
        shown += ids[: max(0, 20 - len(shown))]
    blobs = 0
    while True:
        gone = await store.delete_unreferenced_blobs(GC_BATCH)
        blobs += gone
        if gone < GC_BATCH:
            break
    return GcReport(deleted, blobs, False, shown)


def _find_step(steps: list[StepRecord], wanted: str, run_id: str) -> int:
    """A step by key, or by the row number ``show`` prints (1-based)."""
    for index, step in enumerate(steps):
        if step.step_key == wanted:
            return index
    if wanted.isdigit() and 1 <= int(wanted) <= len(steps):
        return int(wanted) - 1
    known = ", ".join(s.step_key for s in steps[:6]) + (", ..." if len(steps) > 6 else "")
    raise UnknownStep(f"run {run_id} has no step {wanted!r}"
                      + (f" (its steps: {known}, or a row number 1-{len(steps)})"
                         if steps else " (it has no steps yet)"))


__all__ = ["GC_BATCH", "GcReport", "Operator", "collect", "restart_point", "retry_plan"]
