"""The store's shared core: every ``Store`` method written once, over a small ``Backend``.

What both databases must decide alike lives here and in ``programs`` (the statement
programs): migrations, the claim rule, first-writer-wins completions, signals delivered
once, re-opening a run, meta edits, the source and secret caches, group commit and
``close``. A backend brings only its dialect: the SQL text of each statement the programs
name, how a program is executed (which connection, which thread, which transaction), and
how one group of journal commits is written (ADR 0024).
"""

from __future__ import annotations

import asyncio
import secrets
from functools import partial
from typing import Any, Callable, Collection, Mapping, Protocol, Sequence, TypeVar

from ..errors import DbError
from ..states import RunStatus
from . import programs
from .base import (
    SCHEMA_VERSION, SETTING_PREFIX, AttemptRecord, Claimed, Commit, JournalPage, Reopening, RunDetail, RunPage, RunQuery, RunRecord, StepRecord, Store,
    StoreStats,
)
from .events import RunEvent, event_from_row
from .group_commit import GroupCommit, Inline, Outcome
from .programs import Program, one
from .queries import STATE_COLUMNS, page_of, states_of
from .queues import QueueStore, claim_queued
from .ratelimits import RateLimitStore
from .schedules import ScheduleStore

T = TypeVar("T")
Job = Callable[[], Program[Any]]  # makes a fresh run of a program (a failed group is retried)


class Backend(Protocol):
    """One database dialect, as the core drives it."""

    label: str  # the database as messages name it (a path, or a URL without its password)
    # Every write joins the group commit (SQLite: one writer connection, so sharing its
    # transactions is the only way to share fsyncs); else only journal commits do.
    groups_writes: bool

    @property
    def inline(self) -> Inline | None:
        """The lone writer's commit on the caller's thread (ADR 0008), if the dialect has one."""

    # Groups may be written two at a time, elsewhere (SQLite's writer process, ADR 0050):
    # the group commit then sends them in cohorts, with ``send_group``.
    pipelines: bool
    # How many writers the store has registered (0: it knows nothing of its callers), for
    # a backend that decides by it; set by the core.
    writers: Callable[[], int]

    def send_group(self, ops: list[Commit | Job]) -> asyncio.Future[list[Outcome]] | None:
        """A group sent to be written elsewhere, its outcomes once durable; None: write it
        with ``apply_group`` instead."""

    @property
    def migrations(self) -> Mapping[int, Sequence[str]]:
        """Schema version -> its statements."""

    async def open(self, create: bool, schema: Job | None) -> None:
        """Connect and run ``schema`` (the migration program) exclusively: no two
        processes migrate at once. ``create=False``: raise ``NoDatabase`` rather than
        make a database where there is none. ``schema`` None: open read-only (the
        database refuses every write) and refuse a schema that is not this version's."""

    async def close(self) -> None: ...

    async def read(self, job: Job, *, scan: bool = False, snapshot: bool = False) -> Any:
        """Run a read-only program. ``scan``: it may read many rows (keep it off the
        event loop's thread); ``snapshot``: its statements must see one moment."""

    async def write(self, job: Job, *, atomic: bool = True) -> Any:
        """Run a writing program on its own (only when ``groups_writes`` is False);
        ``atomic``: in one transaction (else each statement commits by itself)."""

    async def apply_group(self, ops: list[Commit | Job]) -> list[Outcome]:
        """Write a group in one transaction: a ``Commit`` fenced by its generation
        (``programs.fenced`` when it moved), or a program's job; one outcome each."""


class CoreStore(QueueStore, RateLimitStore, ScheduleStore, Store):
    """A ``Store`` over a ``Backend``. ``close_timeout``: how long ``close`` waits for
    queued writes before it gives up on them (their writers get ``DbError``)."""

    close_timeout = 30.0

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        backend.writers = lambda: self._writers
        self._group = GroupCommit(backend.apply_group, backend.inline,
                                  pipelines=lambda: backend.pipelines, send=backend.send_group,
                                  cohort=lambda: max(1, self._writers // 2))
        self._crc_required = True  # False: the database was migrated from before checksums
        self._secret: bytes | None = None
        # Sources are content-addressed and never deleted: once one is known to be stored
        # (written or read), later put/get of that hash need no round trip.
        self._sources: dict[str, str] = {}

    @property
    def on_commit(self) -> Callable[[float, int], None] | None:
        return self._group.on_commit

    @on_commit.setter
    def on_commit(self, report: Callable[[float, int], None] | None) -> None:
        self._group.on_commit = report

    @property
    def group_commit(self) -> GroupCommit:
        return self._group

    async def _read(self, program: Callable[..., Program[T]], *args: Any, scan: bool = False,
                    snapshot: bool = False) -> T:
        result: T = await self.backend.read(partial(program, *args), scan=scan, snapshot=snapshot)
        return result

    async def _write(self, program: Callable[..., Program[T]], *args: Any,
                     atomic: bool = True) -> T:
        job = partial(program, *args)
        if self.backend.groups_writes:
            result: T = await self._group.submit(job, alone=self.lone_writer)
        else:
            result = await self.backend.write(job, atomic=atomic)
        return result

    # -- lifetime --------------------------------------------------------------------------
    async def open(self) -> None:
        backend = self.backend
        schema = None if self.readonly else partial(programs.migrate, backend.migrations,
                                                    backend.label, secrets.token_bytes(32))
        await backend.open(self.create and not self.readonly, schema)
        try:
            if schema is None:
                version = programs.schema_version_of(
                    await self._read(one, "schema_version", scan=True), backend.label)
                if version != SCHEMA_VERSION:
                    raise DbError(f"database {backend.label} has schema version {version}, "
                                  f"this lashflow reads {SCHEMA_VERSION}: open it once "
                                  "for writing (any command that runs) to migrate it")
            self._crc_required = not await self._read(one, "unchecked_mark", scan=True)
        except BaseException:
            await backend.close()
            raise

    async def close(self) -> None:
        """Write what is queued (waiting for it, at most ``close_timeout``), then close."""
        await self._group.drain(self.close_timeout)
        await self.backend.close()

    # -- identity --------------------------------------------------------------------------
    async def secret(self) -> bytes:
        if self._secret is None:
            self._secret = programs.secret_of(await self._read(one, "secret", scan=True),
                                              self.backend.label)
        return self._secret

    async def setting(self, name: str) -> str | None:
        value: str | None = await self._read(one, "setting", SETTING_PREFIX + name)
        return value

    async def put_setting(self, name: str, value: str) -> None:
        await self._write(one, "put_setting", SETTING_PREFIX + name, value, atomic=False)

    async def put_source(self, source_hash: str, text: str) -> None:
        if source_hash not in self._sources:  # what is stored wins: the first text
            self._sources[source_hash] = await self._write(one, "put_source", source_hash, text,
                                                           atomic=False)

    async def get_source(self, source_hash: str) -> str | None:
        cached = self._sources.get(source_hash)
        if cached is not None:
            return cached
        text: str | None = await self._read(one, "get_source", source_hash, scan=True)
        if text is not None:
            self._sources[source_hash] = text
        return text

    # -- runs --------------------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        # a run entering a queue gets its fairness tag in the same transaction
        return await self._write(programs.create_run, run, atomic="queue" in run.meta)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._read(programs.get_run, run_id)

    async def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]:
        return await self._read(programs.list_runs, status, limit, scan=True)

    async def query_runs(self, query: RunQuery) -> RunPage:
        return page_of(await self._read(one, "run_page", query, scan=True), query)

    async def run_states(self, query: RunQuery) -> tuple[list[tuple[str, str]], str | None]:
        return states_of(await self._read(one, "run_page", query, STATE_COLUMNS, scan=True),
                         query)

    async def stats(self, now: float) -> StoreStats:
        return await self._read(programs.stats, now, scan=True, snapshot=True)

    async def run_detail(self, run_id: str) -> RunDetail | None:
        return await self._read(programs.run_detail, run_id, self._crc_required, scan=True,
                                snapshot=True)

    async def stale_runs(self, before: float, statuses: Collection[str], limit: int) -> list[str]:
        return await self._read(programs.stale_runs, before, statuses, limit, scan=True)

    async def delete_runs(self, run_ids: Collection[str]) -> int:
        return await self._write(programs.delete_runs, list(run_ids)) if run_ids else 0

    async def delete_unreferenced_blobs(self, limit: int) -> int:
        return int(await self._write(one, "delete_unreferenced_blobs", limit, atomic=False))

    async def cancel_requests(self, run_ids: Collection[str]) -> set[str]:
        if not run_ids:
            return set()
        return set(await self._read(one, "cancel_requested", list(run_ids)))

    async def stop_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        if not run_ids:
            return {}
        return await self._read(programs.stop_requests, list(run_ids))

    async def pause_runs(self, run_ids: Collection[str], now: float,
                         info: dict[str, Any]) -> list[str]:
        if not run_ids:
            return []
        return await self._write(programs.pause_runs, list(run_ids), float(now), dict(info))

    async def count_runs(self, query: RunQuery) -> int:
        return int(await self._read(one, "run_count", query, scan=True))

    async def cancel_runs(self, run_ids: Collection[str], now: float,
                          reason: str | None) -> list[str]:
        if not run_ids:
            return []
        return await self._write(programs.cancel_runs, list(run_ids), float(now), reason)

    async def unpause_runs(self, run_ids: Collection[str], now: float) -> list[str]:
        if not run_ids:
            return []
        return await self._write(programs.unpause_runs, list(run_ids), float(now))

    async def claim_run(self, run_id: str, owner: str, ttl: float, now: float, *,
                        steal_from_dead: bool = True) -> Claimed | None:
        claimed = await self._write(programs.claim, run_id, owner, float(ttl), float(now),
                                    steal_from_dead, atomic=False)
        if claimed is programs.GATED:  # a run in a queue: its limits decide, under its lock
            claimed = await self._write(claim_queued, run_id, owner, float(ttl), float(now),
                                        steal_from_dead, atomic=False)
        assert not isinstance(claimed, programs.Gated)
        return claimed

    async def renew(self, run_id: str, owner: str, generation: int, ttl: float, now: float) -> bool:
        return bool(await self._write(one, "renew", run_id, owner, generation,
                                      float(now) + float(ttl), atomic=False))

    async def request_cancel(self, run_id: str) -> None:
        await self._write(one, "request_cancel", run_id, atomic=False)

    async def due_runs(self, now: float, limit: int = 100) -> list[str]:
        return list(await self._read(one, "due_runs", float(now), limit))

    async def orphaned_runs(self, now: float) -> list[str]:
        return await self._read(programs.orphaned_runs, float(now))

    async def mark_due(self, run_id: str, at: float) -> None:
        await self._write(one, "wake", run_id, float(at), (RunStatus.WAITING,), atomic=False)

    async def wake(self, run_id: str, at: float) -> None:
        """``mark_due``, and on a running run too: the wake time it leaves survives the
        run's park (the journal commit keeps an earlier wake time of a run that parks),
        so a delivery that raced the park is not lost."""
        await self._write(one, "wake", run_id, float(at), programs.WAKEABLE, atomic=False)

    async def update_meta(self, run_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
        await self._write(programs.update_meta, run_id, edit)

    async def deploy_version(self, process: str, source_hash: str, content_hash: str,
                             tools: dict[str, Any], now: float) -> tuple[int, bool]:
        return await self._write(programs.deploy_version, process, source_hash, content_hash,
                                 tools, float(now))

    async def versions(self, process: str | None = None) -> list[dict[str, Any]]:
        return await self._read(programs.versions, process, scan=True)

    async def move_run(self, run_id: str, from_hash: str, to_hash: str,
                       edit: Callable[[dict[str, Any]], None], now: float) -> str:
        return await self._write(programs.move_run, run_id, from_hash, to_hash, edit,
                                 float(now))

    async def reopen_runs(self, reopenings: Sequence[Reopening], now: float) -> list[str]:
        if not reopenings:
            return []
        return await self._write(programs.reopen_runs, list(reopenings), float(now))

    # -- journal -----------------------------------------------------------------------------
    async def load_journal(self, run_id: str) -> tuple[list[StepRecord], list[AttemptRecord]]:
        return await self._read(programs.journal, run_id, self._crc_required)

    async def journal_page(self, query: RunQuery, *,
                           processes: Collection[str | None] | None = None) -> JournalPage:
        return await self._read(programs.journal_page, query, processes, self._crc_required,
                                scan=True, snapshot=True)

    async def commit(self, change: Commit) -> None:
        await self._group.submit(change, alone=self.lone_writer)

    # -- events ------------------------------------------------------------------------------
    async def run_events(self, run_id: str, after: int = 0, limit: int = 500) -> list[RunEvent]:
        rows = await self._read(one, "run_events", run_id, int(after), int(limit))
        return [event_from_row(row) for row in rows]

    async def last_event(self, run_id: str) -> int:
        return int(await self._read(one, "last_event", run_id))

    async def feed(self, after: str, limit: int = 500, process: str | None = None, *,
                   settled: bool = True) -> list[RunEvent]:
        rows = await self._read(one, "feed", after, process, int(limit), settled)
        return [event_from_row(row) for row in rows]

    async def feed_head(self) -> str:
        head: str = await self._read(one, "feed_head")
        return head

    # -- completions and signals -------------------------------------------------------------
    async def completion_get(self, run_id: str, step_key: str) -> dict[str, Any] | None:
        return await self._read(programs.completion_get, run_id, step_key)

    async def completion_open_wait(self, row: dict[str, Any]) -> dict[str, Any]:
        return await self._write(programs.completion_open_wait, row, atomic=False)

    async def completion_settle(self, run_id: str, step_key: str, resolution: dict[str, Any], *,
                                now: float, respect_deadline: bool, wake_at: float | None = None
                                ) -> tuple[dict[str, Any], str]:
        return await self._write(programs.completion_settle, run_id, step_key, resolution,
                                 now, respect_deadline,
                                 None if wake_at is None else float(wake_at))

    async def completion_open_waits(self, run_id: str) -> list[dict[str, Any]]:
        return await self._read(programs.completion_open_waits, run_id)

    async def add_signal(self, run_id: str, name: str, payload: Any, *,
                         sender: str | None = None) -> int:
        return await self._write(programs.add_signal, run_id, name, payload, sender,
                                 atomic=False)

    async def get_signal(self, run_id: str, name: str, ordinal: int) -> tuple[bool, Any]:
        return await self._read(programs.get_signal, run_id, name, ordinal)


__all__ = ["Backend", "CoreStore"]
