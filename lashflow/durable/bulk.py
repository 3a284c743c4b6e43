"""Bulk actions by query: cancel, retry, pause, unpause, gc or upgrade every run an
expression selects (``--where``), a page of runs at a time (ADR 0032).

The runs are counted first (one COUNT), then read newest first in pages of ``PAGE`` by
the run list's keyset (so rows the action changes, or deletes, never shift the next
page), and each page is acted on in one transaction: pause, unpause, cancel and gc are
a few statements each; retry reads the page with its journals (three statements) and
decides per run where it restarts, then re-opens them all in one write. Upgrade replays
each run against the new version (``versions``). Each status change appends its event to
the run's log in the same transaction (ADR 0038). A run the action does not apply to (a
finished run to pause, a waiting one to retry) is counted as skipped. The report is
updated in place after every page: a progress bar or an HTTP job reads it.
"""

from __future__ import annotations

import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from ..errors import LashflowError, UsageError
from ..states import PAUSABLE, RUN_STATUSES, SETTLED, RunStatus
from ..store import JournalEntry, RunQuery, Store
from ..tools.clock import Clock
from ..slotted import replace
from .operator import RETRYABLE, GC_BATCH, Operator
from .pages import pages_ahead
from .pauses import Pauses, pause_info
from .selection import parse_where

ACTIONS = ("cancel", "retry", "pause", "unpause", "gc", "upgrade")
PAGE = 1000  # runs read, and acted on, per statement
SAMPLE = 20  # run ids a report keeps, for a person to check

ELIGIBLE: dict[str, Callable[[str], bool]] = {
    "cancel": lambda status: status not in SETTLED,
    "retry": lambda status: status in RETRYABLE,
    "pause": lambda status: status in PAUSABLE,
    "unpause": lambda status: status == RunStatus.PAUSED,
    "gc": lambda status: status in SETTLED,
    "upgrade": lambda status: status not in SETTLED,
}


@dataclass(slots=True)
class BulkReport:
    """Where a bulk action stands: ``matched`` runs selected (counted before it began),
    ``seen`` of them read so far, ``acted`` on (or, dry, that would be), ``skipped``
    (the action does not apply to them, or they changed meanwhile)."""

    action: str
    where: str
    dry_run: bool
    matched: int = 0
    seen: int = 0
    acted: int = 0
    skipped: int = 0
    state: str = "running"  # running | done | failed
    error: dict[str, str] | None = None
    sample: list[str] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in (
            "action", "where", "dry_run", "matched", "seen", "acted", "skipped", "state",
            "sample", "started_at", "finished_at", "seconds")}
        if self.error is not None:
            data["error"] = dict(self.error)
        return data


Progress = Callable[[BulkReport], None]


class Bulk:
    def __init__(self, store: Store, clock: Clock, operator: Operator, pauses: Pauses,
                 upgrade: Callable[..., Awaitable[list[Any]]], active: Callable[[str], Any]
                 ) -> None:
        self.store = store
        self.clock = clock
        self.operator = operator
        self.pauses = pauses
        self.upgrade = upgrade
        self.active = active  # run id -> the drive under way in this process, if any

    def plan(self, action: str, where: str | RunQuery, dry_run: bool) -> tuple[BulkReport,
                                                                                RunQuery]:
        """The report to fill and the query, refused (``usage_error``) before any work."""
        if action not in ACTIONS:
            raise UsageError(f"unknown bulk action {action!r}; use one of {', '.join(ACTIONS)}")
        query = where if isinstance(where, RunQuery) else parse_where(where, self.clock.now())
        text = where if isinstance(where, str) else "(query)"
        return BulkReport(action, text, dry_run, started_at=self.clock.now()), query

    async def select(self, query: RunQuery) -> list[str]:
        """The ids of every run ``query`` selects, newest first."""
        ids: list[str] = []
        page_query = replace(query, limit=PAGE, cursor=None)
        while True:
            states, page_query.cursor = await self.store.run_states(page_query)
            ids += [run_id for run_id, _ in states]
            if page_query.cursor is None:
                return ids

    async def run(self, report: BulkReport, query: RunQuery, *, reason: str | None = None,
                  by: str | None = None, to: int | None = None,
                  progress: Progress | None = None) -> BulkReport:
        """Act on every run ``query`` selects, updating ``report`` after each page."""
        began = time.monotonic()
        try:
            report.matched = await self.store.count_runs(query)
            if progress is not None:
                progress(report)
            if report.dry_run and report.action != "upgrade":
                await self._count(report, query)
                return report
            act = self._action(report, reason, by, to)
            eligible = ELIGIBLE[report.action]
            page_query = replace(query, limit=PAGE, cursor=None)

            def read(cursor: str | None) -> Awaitable[tuple[list[tuple[str, str, Any]],
                                                            str | None]]:
                return self._page(report.action, replace(page_query, cursor=cursor))
            async with aclosing(pages_ahead(read)) as pages:  # the next page is read
                async for runs in pages:                      # while this one is acted on
                    chosen = [item for run_id, status, item in runs if eligible(status)]
                    acted = [run_id for run_id, status, _ in runs if eligible(status)] \
                        if report.dry_run and report.action != "upgrade" else await act(chosen)
                    report.seen += len(runs)
                    report.acted += len(acted)
                    report.skipped += len(runs) - len(acted)
                    report.sample += acted[: max(0, SAMPLE - len(report.sample))]
                    report.seconds = time.monotonic() - began
                    if progress is not None:
                        progress(report)
            if report.action == "gc" and not report.dry_run:
                while await self.store.delete_unreferenced_blobs(GC_BATCH) >= GC_BATCH:
                    pass
            report.state = "done"
        except LashflowError as exc:
            report.state, report.error = "failed", {"code": exc.code, "message": exc.message}
            raise
        finally:
            report.finished_at = self.clock.now()
            report.seconds = time.monotonic() - began
            if report.state == "running":  # cancelled, or a bug: not done either way
                report.state = "failed"
            if progress is not None:
                progress(report)
        return report

    async def _page(self, action: str, query: RunQuery
                    ) -> tuple[list[tuple[str, str, Any]], str | None]:
        """One page of runs as (run id, status, what the action takes of it: the run's
        journal for retry, which decides from it where each run restarts, else its id),
        and the cursor of the next page."""
        if action == "retry":
            journals = await self.store.journal_page(query)
            return ([(e.run.run_id, e.run.status, e) for e in journals.entries],
                    journals.next_cursor)
        states, cursor = await self.store.run_states(query)
        return [(run_id, status, run_id) for run_id, status in states], cursor

    async def _count(self, report: BulkReport, query: RunQuery) -> None:
        """A dry run: how many of the runs selected the action applies to, by their
        status (one COUNT), and the first few of them."""
        wanted = [s for s in RUN_STATUSES if ELIGIBLE[report.action](s)
                  and (not query.statuses or s in query.statuses)]
        eligible = replace(query, statuses=tuple(wanted), cursor=None)
        report.acted = await self.store.count_runs(eligible) if wanted else 0
        report.seen, report.skipped = report.matched, report.matched - report.acted
        if wanted:
            first = await self.store.query_runs(replace(eligible, limit=SAMPLE))
            report.sample = [run.run_id for run in first.runs]
        report.state = "done"

    def _action(self, report: BulkReport, reason: str | None, by: str | None,
                to: int | None) -> Callable[[list[Any]], Awaitable[list[str]]]:
        """What one page of eligible runs (as ``_page`` gives them) goes through; answers
        the ids acted on."""
        store, now = self.store, self.clock.now

        async def pause(ids: list[str]) -> list[str]:
            info = pause_info(now(), by, reason)
            done = await store.pause_runs(ids, info["at"], info)
            for run_id in done:
                self.pauses.tell_drive(run_id)
            return done

        async def unpause(ids: list[str]) -> list[str]:
            return await store.unpause_runs(ids, now())

        async def cancel(ids: list[str]) -> list[str]:
            done = await store.cancel_runs(ids, now(), reason)
            for run_id in done:
                drive = self.active(run_id)
                if drive is not None:  # driven here: it stops at its next effect
                    drive.flags.cancel_reason = reason
                    drive.flags.request_cancel()
            return done

        async def gc(ids: list[str]) -> list[str]:
            deleted = await store.delete_runs(ids)
            return ids[:deleted]  # the count is what matters; the ids deleted were settled

        async def retry(entries: list[JournalEntry]) -> list[str]:
            return await self.operator.retry_page(entries)

        async def upgrade(ids: list[str]) -> list[str]:
            verdicts = await self.upgrade(ids, to, dry_run=report.dry_run)
            if report.dry_run:  # would move: a replay against the version says compatible
                return [u.run_id for u in verdicts if u.verdict == "compatible"
                        and u.from_version != u.to_version]
            return [u.run_id for u in verdicts if u.moved]

        actions: dict[str, Callable[[list[Any]], Awaitable[list[str]]]] = {
            "pause": pause, "unpause": unpause, "cancel": cancel, "gc": gc, "retry": retry,
            "upgrade": upgrade}
        return actions[report.action]


__all__ = ["ACTIONS", "Bulk", "BulkReport", "PAGE", "Progress"]
