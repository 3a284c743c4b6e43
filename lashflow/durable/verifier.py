"""Which runs to verify and what each needs, read from the store: the I/O around
``verify.verify_run``. Reads only: runs are streamed a page at a time (memory stays flat
over any number of runs), each run's own source is parsed once per source hash to say
where a recorded step came from."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterable

from ..errors import JournalCorrupt, LashflowError
from ..interp.limits import Limits
from ..lang.changes import site_of
from ..states import SETTLED, RUN_STATUSES
from ..store import JournalEntry, JournalPage, RunQuery, RunRecord, Store
from ..tools.clock import Clock
from ..slotted import replace
from .pages import pages_ahead
from .programs import Compiled
from .reads import Reads, check_run_filters
from .tool_runner import ToolRunner
from .verify import COMPATIBLE, INCOMPATIBLE, UNKNOWN, Schemas, Verdict, verify_run

PAGE = 500
LET_READ_EVERY = 10  # runs replayed between two turns of the loop for the page read ahead
UNSETTLED = tuple(status for status in RUN_STATUSES if status not in SETTLED)


@dataclass(slots=True)
class VerifyReport:
    """Counts by verdict, and every run that is not compatible (``all`` keeps them all)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (COMPATIBLE, INCOMPATIBLE, UNKNOWN), 0))
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        return self.counts[INCOMPATIBLE] == 0

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "total": self.total,
                "runs": [verdict.to_json() for verdict in self.verdicts]}


class Verifier:
    def __init__(self, store: Store, tools: ToolRunner, reads: Reads, limits: Limits,
                 clock: Clock) -> None:
        self.store = store
        self.tools = tools
        self.reads = reads
        self.limits = limits
        self.clock = clock
        self._places: dict[str, dict[str, tuple[int, int]]] = {}

    async def _entries(self, compiled: Compiled, process: str | None, run_ids: Iterable[str],
                       statuses: tuple[str, ...]) -> AsyncIterator[JournalEntry]:
        """Each run with its journal: the runs named one at a time, else a page of runs
        and their journals in a few statements, the next page read while this one is
        replayed."""
        ids = list(run_ids)
        if ids:
            for run_id in ids:
                yield await self.entry(await self.reads.require(run_id))
            return
        names: set[str | None] = ({process} if process is not None
                                  else {decl.name for decl in compiled.module.processes})
        if process is None and compiled.module.main:
            names.add(None)
        query = RunQuery(statuses=statuses, limit=PAGE)

        async def read(cursor: str | None) -> tuple[JournalPage, str | None]:
            page = await self.store.journal_page(replace(query, cursor=cursor),
                                                 processes=names)
            return page, page.next_cursor
        async with aclosing(pages_ahead(read)) as pages:
            async for page in pages:
                for index, entry in enumerate(page.entries):
                    if index % LET_READ_EVERY == 0:  # replays never wait: let the read ahead
                        await asyncio.sleep(0)      # move on (PostgreSQL: its next statement)
                    yield entry

    async def entry(self, run: RunRecord) -> JournalEntry:
        """One run with its journal, read now."""
        entry = JournalEntry(run)
        try:
            entry.steps, entry.attempts = await self.store.load_journal(run.run_id)
        except JournalCorrupt as exc:
            entry.journal_error = exc
        return entry

    async def _places_of(self, source_hash: str) -> dict[str, tuple[int, int]]:
        """Site id -> (line, column) in a run's own source (parsed once per hash)."""
        places = self._places.get(source_hash)
        if places is None:
            from ..lang import parse
            from ..lang.changes import call_sites

            places = {}
            text = await self.store.get_source(source_hash)
            if text is not None:
                try:
                    places = {site: (call.line, call.column)
                              for site, call in call_sites(parse(text)).items()}
                except LashflowError:
                    places = {}
            self._places[source_hash] = places
        return places

    async def verdicts(self, compiled: Compiled, *, process: str | None = None,
                       run_ids: Iterable[str] = (),
                       statuses: str | Iterable[str] | None = None) -> AsyncIterator[Verdict]:
        """One verdict per run: the runs named, or every run of the edited file's
        processes (or ``process``) whose status is in ``statuses`` (default: every run
        that has not settled)."""
        chosen = check_run_filters(statuses, PAGE) or UNSETTLED
        catalog = self.tools.catalog()

        def schema(module: str, operation: str) -> dict[str, Any] | None:
            found = catalog.operation(module, operation)
            return None if found is None else found.output_schema

        async for entry in self._entries(compiled, process, run_ids, chosen):
            yield await self.verdict(entry, compiled, schema)

    async def verdict(self, entry: JournalEntry, compiled: Compiled, schema: Schemas) -> Verdict:
        """One run (with its journal as read) under ``compiled``, recorded outputs checked
        against ``schema``."""
        run = entry.run
        if entry.journal_error is not None:
            return Verdict(run.run_id, run.process, run.status, UNKNOWN,
                           f"its journal cannot be trusted: {entry.journal_error.message}")
        places = await self._places_of(run.source_hash)
        return verify_run(
            run, entry.steps, entry.attempts, compiled, schemas=schema,
            locate=lambda key: places.get(site_of(key)), limits=self.limits,
            now=self.clock.now(),
            bind=lambda args: self.tools.bind_resources(compiled.module, run.process or "",
                                                        args))

    async def report(self, compiled: Compiled, *, keep_all: bool = False,
                     **options: Any) -> VerifyReport:
        report = VerifyReport()
        async for verdict in self.verdicts(compiled, **options):
            report.counts[verdict.verdict] += 1
            if keep_all or verdict.verdict != COMPATIBLE:
                report.verdicts.append(verdict)
        return report


__all__ = ["UNSETTLED", "Verifier", "VerifyReport"]
