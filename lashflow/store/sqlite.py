"""SQLite journal on aiosqlite: WAL, one writer connection, IMMEDIATE transactions,
group commit.

Each aiosqlite call hops to the connection's thread (~0.1 ms), so every operation here is
ONE hop: a plain function run in that thread that does all its statements at once.
aiosqlite has no public call for "run this function in your thread", so the function
travels through its public ``execute_fetchall``, which runs
``conn.execute(sql, params).fetchall()`` in that thread: the connection aiosqlite opens is
our ``sqlite3.Connection`` subclass (``factory=``, passed through to ``sqlite3.connect``),
whose ``execute`` runs an ``_Op`` instead of parsing it as SQL (ADR 0016).
Concurrent ``commit`` calls queue up while a transaction is being written and are then
committed together in the next transaction (group commit): many runs share one fsync,
and each run continues only once its own write is durable. The other writes (creating
and claiming runs, completions, signals, lease renewals) join the same queue, so with
many runs in flight they share those fsyncs too instead of paying one each.

A lone writer (the engine says no other caller can be waiting to write: one run, as in a
CLI ``run`` or a sequential loop of ``Engine.run``) has nobody to share an fsync with, so
its writes skip the hop and commit on the caller's thread (ADR 0008): the event loop
waits the commit out, the run would have waited for it anyway.

The small reads of the drive path (a run's row, its journal, a key's row, due runs) run
on the caller's thread too, on a second, read-only connection (ADR 0019): a WAL reader
never waits for the writer, a point read takes microseconds, and a hop would cost a
thread switch each way plus a wait for the GIL while the loop is busy. If that
connection is ever told the database is busy, the read hops to the thread after all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sqlite3
import threading
import time
from typing import Any, Callable, Collection, TypeVar

import aiosqlite

from ..errors import DbError, Fenced, JournalCorrupt, NoDatabase
from ..states import SETTLED
from .base import (
    CHECKSUMS_REQUIRED_FROM, SCHEMA_VERSION, SETTING_PREFIX, UNCHECKED_ROWS, AttemptRecord, Claimed, Commit, RunDetail, RunPage, RunQuery, RunRecord, StepRecord,
    Store, StoreStats,
)
from .leases import owner_is_dead
from .queries import (
    PARKED_WAITS, RUNS_BY_STATUS, SIGNALS_OF_RUN, SUMMARY_COLUMNS, page_of, page_sql, stats_of,
    summary_from_row,
)
from .rows import (
    RUN_COLUMNS, STEP_READ_COLUMNS, dumps, encode_step, folded_attempts, journal_from_rows, loads,
    run_from_row,
)

T = TypeVar("T")
_Write = Callable[[sqlite3.Connection], Any]  # a write op run inside the group transaction

def _add_column(table: str, column: str) -> str:
    """An ``ADD COLUMN`` that a file already holding the column skips (SQLite has no
    ``IF NOT EXISTS`` for columns): marked for ``_migrate_statement``."""
    return f"-- add column {table} {column}"


def _migrate_statement(conn: sqlite3.Connection, statement: str) -> None:
    if statement.startswith("-- add column "):
        table, column = statement.removeprefix("-- add column ").split(" ", 1)
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column.split()[0] not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        return
    conn.execute(statement)


_MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS sources (hash TEXT PRIMARY KEY, text TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY, parent_run_id TEXT, process TEXT, source_hash TEXT NOT NULL,
            input TEXT NOT NULL, input_hash TEXT NOT NULL, status TEXT NOT NULL, result TEXT,
            error TEXT, waiting TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            lease_owner TEXT, lease_expires REAL NOT NULL DEFAULT 0,
            generation INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0,
            wake_at REAL, meta TEXT)""",
        "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status)",
        "CREATE INDEX IF NOT EXISTS runs_by_wake ON runs (wake_at) WHERE wake_at IS NOT NULL",
        """CREATE TABLE IF NOT EXISTS steps (
            run_id TEXT NOT NULL, step_key TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
            tool TEXT, args_hash TEXT, status TEXT NOT NULL, outcome TEXT, blob TEXT,
            detail TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (run_id, step_key))""",
        """CREATE TABLE IF NOT EXISTS attempts (
            run_id TEXT NOT NULL, step_key TEXT NOT NULL, attempt INTEGER NOT NULL,
            status TEXT NOT NULL, code TEXT, message TEXT, detail TEXT, started_at REAL,
            finished_at REAL, PRIMARY KEY (run_id, step_key, attempt))""",
        """CREATE TABLE IF NOT EXISTS completions (
            run_id TEXT NOT NULL, step_key TEXT NOT NULL, waiting INTEGER NOT NULL DEFAULT 0,
            deadline_at REAL, on_timeout TEXT, on_cancel TEXT, module TEXT, tool TEXT,
            resolution TEXT, PRIMARY KEY (run_id, step_key))""",
        """CREATE TABLE IF NOT EXISTS signals (
            run_id TEXT NOT NULL, name TEXT NOT NULL, ordinal INTEGER NOT NULL, payload TEXT,
            PRIMARY KEY (run_id, name, ordinal))""",
        "CREATE TABLE IF NOT EXISTS blobs (hash TEXT PRIMARY KEY, data TEXT NOT NULL)",
    ],
    # Version 2 stores a step's lone first attempt in the step row's detail (key "a1")
    # instead of a row of attempts (ADR 0010): no DDL, but a version 1 reader would miss
    # those attempts, so it must refuse the file.
    2: [],
    # Version 3: the run list pages newest first by (created_at, run_id), filtered by
    # status, process or parent, each an index range scan (lashflow.store.queries).
    3: [
        "DROP INDEX IF EXISTS runs_by_status",
        "CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at, run_id)",
        "CREATE INDEX IF NOT EXISTS runs_by_status_created ON runs (status, created_at, run_id)",
        "CREATE INDEX IF NOT EXISTS runs_by_process_created ON runs (process, created_at, run_id)",
        "CREATE INDEX IF NOT EXISTS runs_by_parent ON runs (parent_run_id, created_at, run_id)",
    ],
    # Version 4: a signal sent by a run's `signal_run` step names that step (``sender``),
    # so a sender resumed after a crash cannot deliver it twice.
    4: [
        _add_column("signals", "sender TEXT"),
        "CREATE UNIQUE INDEX IF NOT EXISTS signals_by_sender ON signals (run_id, name, sender) "
        "WHERE sender IS NOT NULL",
    ],
}


class _NoRunData(logging.Filter):
    """aiosqlite logs every call it runs, arguments included, at DEBUG. Ours carry run
    data (tool inputs and outputs, completion keys in waits, none of which may reach a log): the record keeps
    which operation ran, not the data."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.levelno <= logging.DEBUG:
            record.args = tuple(arg if isinstance(arg, BaseException) else _operation(arg)
                                for arg in record.args)
        return True


def _operation(fn: Any) -> str:
    inner = getattr(fn, "func", fn)
    return str(getattr(inner, "__qualname__", type(inner).__name__))


logging.getLogger("aiosqlite").addFilter(_NoRunData())


_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # another connection holds it


class _Op:
    """``fn(conn, *args)``, to be run in the connection's thread by ``_Connection.execute``;
    ``fetchall()`` is how aiosqlite's ``execute_fetchall`` collects what it returned."""

    __slots__ = ("fn", "args", "value")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.value: Any = None

    def fetchall(self) -> Any:
        return self.value


class _Connection(sqlite3.Connection):
    """The sqlite3 connection aiosqlite opens for a store (see the module doc)."""

    def execute(self, sql: Any, parameters: Any = (), /) -> Any:
        if type(sql) is _Op:
            fn, args = sql.fn, sql.args
            # aiosqlite's thread keeps its last job until the next one: drop the inputs
            # (a fan-out's whole group of commits) so they are not kept alive meanwhile
            sql.fn, sql.args = _itself, ()
            sql.value = fn(self, *args)
            return sql
        return super().execute(sql, parameters)


async def _let_stopped_thread_finish(before: set[threading.Thread]) -> None:
    """A failed open leaves aiosqlite's connection thread stopping, with one last answer
    for this event loop; if the loop closes first (a CLI exits on the error), that thread
    dies printing a traceback after our one-line error. Wait (briefly, off the loop) until
    the threads the open started have ended."""
    started = [t for t in threading.enumerate() if t not in before
               and "_connection_worker_thread" in t.name]
    if started:
        await asyncio.to_thread(lambda: [t.join(2.0) for t in started])


def _wake_run(conn: sqlite3.Connection, run_id: str, at: float) -> None:
    """Make a waiting or running run due at ``at`` (an earlier wake time stays)."""
    conn.execute("UPDATE runs SET wake_at = CASE WHEN wake_at IS NULL OR wake_at > ? THEN ? "
                 "ELSE wake_at END WHERE run_id = ? AND status IN ('waiting', 'running')",
                 (at, at, run_id))


def _itself(conn: sqlite3.Connection) -> sqlite3.Connection:
    return conn


def _has_unchecked_rows(conn: sqlite3.Connection) -> bool:
    return conn.execute(f"SELECT 1 FROM meta WHERE key = '{UNCHECKED_ROWS}'").fetchone() \
        is not None


class SqliteStore(Store):
    """The embedded default store. ``synchronous`` is ``FULL`` (survives power loss) or
    ``NORMAL`` (survives a killed process)."""

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout: float = 5.0) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.synchronous = synchronous.upper()
        self.busy_timeout = busy_timeout
        self._db: aiosqlite.Connection | None = None
        self._conn: sqlite3.Connection | None = None  # for a lone writer's inline commits
        self._reader: sqlite3.Connection | None = None  # for reads on the caller's thread
        self._crc_required = True  # False: the file was migrated from before checksums
        self._identity: tuple[int, int] = (0, 0)  # (device, inode) of the file opened
        self._queue: list[tuple[Commit | _Write, asyncio.Future[Any]]] = []
        self._flushing = False
        self._hops = 0  # aiosqlite calls under way: the connection's thread is busy
        self._secret: bytes | None = None
        # Sources are content-addressed and never deleted: once one is known to be stored
        # (written or read), later put/get of that hash need no round trip.
        self._sources: dict[str, str] = {}

    # -- plumbing ----------------------------------------------------------------------
    def _db_error(self, exc: sqlite3.Error) -> DbError:
        """What a user sees of a failing statement: one line naming the file."""
        return DbError(f"database error on {self.path}: {exc}")

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in the connection's thread: one hop for many statements."""
        db = self._db
        if db is None:
            raise DbError("the store is not open")
        self._hops += 1
        try:
            return await db.execute_fetchall(_Op(fn, args))  # type: ignore[arg-type]
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc) from exc
        finally:
            self._hops -= 1

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the read ``fn(conn, *args)`` on this thread, in one read transaction (one
        snapshot for all its statements); in the connection's thread if SQLite says busy
        (a WAL reader almost never waits: only while another process recovers the WAL)."""
        reader = self._reader
        if reader is not None:
            try:
                reader.execute("BEGIN")
                try:
                    return fn(reader, *args)
                finally:
                    reader.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode not in _BUSY_CODES:
                    raise self._db_error(exc) from exc
            except sqlite3.DatabaseError as exc:
                raise self._db_error(exc) from exc
        return await self._call(fn, *args)

    def _open_reader(self) -> sqlite3.Connection:
        reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            reader.execute("PRAGMA busy_timeout = 0")  # never wait on the loop's thread
            reader.execute("PRAGMA query_only = 1")
        except BaseException:
            reader.close()
            raise
        return reader

    async def open(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        if not self.create and not os.path.isfile(self.path):
            raise NoDatabase(f"no database at {os.path.abspath(self.path)}: nothing has run "
                             "with it yet (--db or LASHFLOW_DB names another)")
        threads = set(threading.enumerate())
        try:
            os.makedirs(directory, exist_ok=True)
            # check_same_thread off: a lone writer commits on the loop's thread, never
            # while the connection's own thread runs anything (see _write_inline)
            self._db = await aiosqlite.connect(self.path, isolation_level=None,
                                               timeout=self.busy_timeout,
                                               check_same_thread=False, factory=_Connection)
        except (OSError, sqlite3.Error) as exc:
            await _let_stopped_thread_finish(threads)
            raise DbError(f"cannot open database {self.path}: {exc}") from exc
        self._db.daemon = True  # never keep a crashed process alive
        try:
            self._conn = await self._call(_itself)
            await self._setup_with_retry()
            opened = os.stat(self.path)
            self._identity = (opened.st_dev, opened.st_ino)
            self._crc_required = not await self._call(_has_unchecked_rows)
            self._reader = self._open_reader()
        except BaseException:  # e.g. a newer schema: do not leak the connection's thread
            self._conn = None
            db, self._db = self._db, None
            await db.close()
            raise

    async def _setup_with_retry(self) -> None:
        """Several processes opening a brand-new file at once: switching it to WAL can be
        refused at once with "database is locked" (SQLite does not wait its busy timeout
        there), so the whole setup is tried again until the busy timeout has passed."""
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.005
        while True:
            try:
                await self._call(self._setup)
                return
            except DbError as exc:
                cause = getattr(exc.__cause__, "sqlite_errorcode", None)
                if cause not in _BUSY_CODES or time.monotonic() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _setup(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        if self._is_current(conn):
            return  # the common case: no write lock taken just to open
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise DbError(
                    f"database {self.path} has schema version {version}, newer than this "
                    f"lashflow supports ({SCHEMA_VERSION}); upgrade lashflow to open it")
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target]:
                    _migrate_statement(conn, statement)
            if 0 < version < CHECKSUMS_REQUIRED_FROM:
                conn.execute(f"INSERT OR IGNORE INTO meta (key, value) VALUES "
                             f"('{UNCHECKED_ROWS}', '1')")
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                         (str(SCHEMA_VERSION),))
            if conn.execute("SELECT 1 FROM meta WHERE key = 'secret'").fetchone() is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('secret', ?)",
                             (secrets.token_bytes(32),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _is_current(conn: sqlite3.Connection) -> bool:
        """The schema is this version's and the key secret exists."""
        try:
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                                     "('schema_version', 'secret')").fetchall())
        except sqlite3.OperationalError:  # a new file: no meta table yet
            return False
        return rows.get("schema_version") == str(SCHEMA_VERSION) and "secret" in rows

    async def close(self) -> None:
        while self._flushing or self._queue:
            await asyncio.sleep(0.001)
        self._conn = None
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    # -- identity ----------------------------------------------------------------------
    async def secret(self) -> bytes:
        if self._secret is None:
            def read(conn: sqlite3.Connection) -> bytes:
                return bytes(conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0])
            self._secret = await self._call(read)
        return self._secret

    async def setting(self, name: str) -> str | None:
        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM meta WHERE key = ?",
                               (SETTING_PREFIX + name,)).fetchone()
            return None if row is None else bytes(row[0]).decode()
        return await self._read(read)

    async def put_setting(self, name: str, value: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                         (SETTING_PREFIX + name, value.encode()))
        await self._write(write)

    async def put_source(self, source_hash: str, text: str) -> None:
        if source_hash in self._sources:
            return

        def write(conn: sqlite3.Connection) -> str:
            conn.execute("INSERT OR IGNORE INTO sources (hash, text) VALUES (?, ?)", (source_hash, text))
            return conn.execute("SELECT text FROM sources WHERE hash = ?",
                                (source_hash,)).fetchone()[0]
        self._sources[source_hash] = await self._write(write)  # what is stored: first wins

    async def get_source(self, source_hash: str) -> str | None:
        cached = self._sources.get(source_hash)
        if cached is not None:
            return cached

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT text FROM sources WHERE hash = ?", (source_hash,)).fetchone()
            return row[0] if row else None
        text = await self._call(read)
        if text is not None:
            self._sources[source_hash] = text
        return text

    # -- runs ------------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        def write(conn: sqlite3.Connection) -> tuple[RunRecord, bool]:
            cursor = conn.execute(
                f"INSERT OR IGNORE INTO runs ({RUN_COLUMNS}) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run.run_id, run.parent_run_id, run.process, run.source_hash, dumps(run.input),
                 run.input_hash, run.status, dumps(run.result), dumps(run.error),
                 dumps(run.waiting), run.created_at, run.updated_at, run.lease_owner,
                 run.lease_expires, run.generation, int(run.cancel_requested), run.wake_at,
                 dumps(run.meta)))
            if cursor.rowcount == 1:
                return run, True  # stored as given: no need to read it back
            row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?",
                               (run.run_id,)).fetchone()
            return run_from_row(row), False
        return await self._write(write)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def read(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
            return run_from_row(row) if row else None
        return await self._read(read)

    async def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]:
        def read(conn: sqlite3.Connection) -> list[RunRecord]:
            sql = f"SELECT {RUN_COLUMNS} FROM runs"
            params: list[Any] = []
            if status is not None:
                sql += " WHERE status = ?"
                params.append(status)
            sql += " ORDER BY created_at, run_id"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(limit)
            return [run_from_row(row) for row in conn.execute(sql, params)]
        return await self._call(read)

    async def stats(self, now: float) -> StoreStats:
        def read(conn: sqlite3.Connection) -> StoreStats:
            return stats_of(conn.execute(RUNS_BY_STATUS.format(table="runs")).fetchall(),
                            conn.execute(PARKED_WAITS.format(table="runs")).fetchall(), now)
        return await self._call(read)

    async def query_runs(self, query: RunQuery) -> RunPage:
        sql, params = page_sql(query, "runs", lambda n: "?")

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(sql, params).fetchall()
        return page_of(await self._call(read), query)

    async def run_detail(self, run_id: str) -> RunDetail | None:
        def read(conn: sqlite3.Connection) -> RunDetail | None:
            row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
            if row is None:
                return None
            detail = RunDetail(run_from_row(row))
            try:
                detail.steps, detail.attempts = self._read_journal(conn, run_id)
            except JournalCorrupt as exc:
                detail.journal_error = exc
            detail.children = [summary_from_row(child) for child in conn.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM runs WHERE parent_run_id = ? "
                "ORDER BY created_at, run_id", (run_id,))]
            detail.signals = [(name, ordinal, loads(payload)) for name, ordinal, payload in
                              conn.execute(SIGNALS_OF_RUN.format(table="signals"), (run_id,))]
            return detail
        return await self._call(read)

    async def stale_runs(self, before: float, statuses: Collection[str], limit: int) -> list[str]:
        wanted = [s for s in statuses if s in SETTLED]

        def read(conn: sqlite3.Connection) -> list[str]:
            if not wanted:
                return []
            return [row[0] for row in conn.execute(
                f"SELECT run_id FROM runs WHERE status IN ({','.join('?' * len(wanted))}) "
                "AND updated_at < ? ORDER BY updated_at, run_id LIMIT ?",
                (*wanted, before, limit))]
        return await self._call(read)

    async def delete_runs(self, run_ids: Collection[str]) -> int:
        ids = list(run_ids)

        def write(conn: sqlite3.Connection) -> int:
            marks = ",".join("?" * len(ids))
            settled = [row[0] for row in conn.execute(
                f"SELECT run_id FROM runs WHERE run_id IN ({marks}) AND status IN "
                "('finished', 'failed', 'cancelled')", ids)]
            if not settled:
                return 0
            marks = ",".join("?" * len(settled))
            for table in ("steps", "attempts", "completions", "signals", "runs"):
                conn.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", settled)
            return len(settled)
        return await self._write(write) if ids else 0

    async def delete_unreferenced_blobs(self, limit: int) -> int:
        def write(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "DELETE FROM blobs WHERE hash IN (SELECT b.hash FROM blobs b WHERE NOT EXISTS "
                "(SELECT 1 FROM steps s WHERE s.blob = b.hash) LIMIT ?)", (limit,)).rowcount
        return await self._write(write)

    async def cancel_requests(self, run_ids: Collection[str]) -> set[str]:
        ids = list(run_ids)

        def read(conn: sqlite3.Connection) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                found.update(row[0] for row in conn.execute(
                    "SELECT run_id FROM runs WHERE cancel_requested = 1 AND run_id IN "
                    f"({','.join('?' * len(chunk))})", chunk))
            return found
        return await self._read(read) if ids else set()

    async def claim_run(self, run_id: str, owner: str, ttl: float, now: float, *,
                        steal_from_dead: bool = True) -> Claimed | None:
        def write(conn: sqlite3.Connection) -> Claimed | None:
            row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?",
                               (run_id,)).fetchone()
            if row is None:
                return None
            run = run_from_row(row)
            if run.status in SETTLED:
                return None  # nothing to drive: left as it is, its updated_at too
            holder = run.lease_owner
            free = (holder is None or holder == owner or run.lease_expires < now
                    or (steal_from_dead and owner_is_dead(holder)))
            if not free:
                return None
            run.lease_owner, run.lease_expires = owner, now + ttl
            run.generation += 1
            conn.execute("UPDATE runs SET lease_owner = ?, lease_expires = ?, generation = ? "
                         "WHERE run_id = ?", (owner, run.lease_expires, run.generation, run_id))
            return Claimed(run, holder)
        return await self._write(write)  # read-check-update inside one IMMEDIATE transaction

    async def renew(self, run_id: str, owner: str, generation: int, ttl: float, now: float) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute("UPDATE runs SET lease_expires = ? WHERE run_id = ? AND "
                                  "lease_owner = ? AND generation = ?",
                                  (now + ttl, run_id, owner, generation))
            return cursor.rowcount == 1
        return await self._write(write)

    async def request_cancel(self, run_id: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runs SET cancel_requested = 1 WHERE run_id = ?", (run_id,))
        await self._write(write)

    async def due_runs(self, now: float, limit: int = 100) -> list[str]:
        def read(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT run_id FROM runs WHERE status = 'waiting' AND wake_at IS NOT "
                                "NULL AND wake_at <= ? ORDER BY wake_at LIMIT ?", (now, limit))
            return [row[0] for row in rows]
        return await self._read(read)

    async def orphaned_runs(self, now: float) -> list[str]:
        def read(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT run_id, lease_owner, lease_expires FROM runs WHERE status "
                                "IN ('running', 'queued') ORDER BY created_at").fetchall()
            return [run_id for run_id, owner, expires in rows
                    if owner is None or expires < now or owner_is_dead(owner)]
        return await self._read(read)

    async def mark_due(self, run_id: str, at: float) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runs SET wake_at = CASE WHEN wake_at IS NULL OR wake_at > ? THEN ? "
                         "ELSE wake_at END WHERE run_id = ? AND status = 'waiting'",
                         (at, at, run_id))
        await self._write(write)

    async def wake(self, run_id: str, at: float) -> None:
        """``mark_due``, and on a running run too: the wake time it leaves survives the
        run's park (see ``_apply_one``), so a delivery that raced the park is not lost."""
        await self._write(lambda conn: _wake_run(conn, run_id, at))

    async def update_meta(self, run_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT meta FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return
            meta = loads(row[0]) or {}
            edit(meta)
            conn.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (dumps(meta), run_id))
        await self._write(write)

    async def reopen_run(self, run_id: str, now: float,
                         edit: Callable[[dict[str, Any]], None]) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT meta FROM runs WHERE run_id = ? AND status IN ('failed', 'cancelled', "
                "'needs_attention') AND (lease_owner IS NULL OR lease_expires < ?)",
                (run_id, now)).fetchone()
            if row is None:
                return False
            meta = loads(row[0]) or {}
            edit(meta)
            conn.execute(
                "UPDATE runs SET status = 'queued', result = 'null', error = 'null', "
                "waiting = '[]', wake_at = NULL, cancel_requested = 0, lease_owner = NULL, "
                "lease_expires = 0, updated_at = ?, meta = ? WHERE run_id = ?",
                (now, dumps(meta), run_id))
            return True
        return bool(await self._write(write))

    # -- journal ---------------------------------------------------------------------
    async def load_journal(self, run_id: str) -> tuple[list[StepRecord], list[AttemptRecord]]:
        """The run's journal; a row that cannot be trusted raises ``JournalCorrupt``
        (never a half-decoded step that replay would take as the truth)."""
        return await self._read(self._read_journal, run_id)

    def _read_journal(self, conn: sqlite3.Connection,
                      run_id: str) -> tuple[list[StepRecord], list[AttemptRecord]]:
        steps = conn.execute(
            f"SELECT {STEP_READ_COLUMNS} FROM steps s LEFT JOIN blobs b ON b.hash = s.blob "
            "WHERE s.run_id = ? ORDER BY s.seq", (run_id,)).fetchall()
        attempts = conn.execute(
            "SELECT step_key, attempt, status, code, message, detail, started_at, "
            "finished_at FROM attempts WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()
        return journal_from_rows(run_id, steps, attempts, require_crc=self._crc_required)

    async def commit(self, change: Commit) -> None:
        await self._write(change)

    def _check_file(self) -> None:
        """The file is still the one this store opened: a database deleted or replaced
        under a live process would otherwise take its writes into an unlinked file, and a
        later run would redo every step. One ``stat`` per write (about a microsecond)."""
        try:
            found = os.stat(self.path)
        except OSError:
            found = None
        if found is None or (found.st_dev, found.st_ino) != self._identity:
            raise DbError(f"database {self.path} was deleted or replaced while lashflow had it "
                          "open; nothing more is written (restore it, or start again)")

    async def _write(self, op: Commit | _Write) -> Any:
        """Queue a write for the next group transaction; return once it is durable.

        ``op`` is a journal ``Commit`` (fenced by its generation) or a function run with the
        connection inside the transaction (its result is returned)."""
        self._check_file()
        if (self.lone_writer and not self._queue and not self._flushing
                and not self._hops and self._db is not None):
            began = time.perf_counter() if self.on_commit is not None else 0.0
            done, value = self._write_inline(op)
            if done:
                if self.on_commit is not None:
                    self.on_commit(time.perf_counter() - began, 1)
                return value
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((op, future))
        if not self._flushing:
            # One writer task drains the queue; it is a task (not this caller) so that a
            # cancelled caller can never strand the other commits of its group.
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                began = time.perf_counter()
                try:
                    results = await self._call(self._apply, [op for op, _ in batch])
                except Exception as exc:  # the whole transaction failed: nobody is durable
                    results = [(False, exc)] * len(batch)
                if self.on_commit is not None:
                    self.on_commit(time.perf_counter() - began, len(batch))
                for (_, future), (ok, value) in zip(batch, results):
                    if future.done():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            self._flushing = False

    def _write_inline(self, op: Commit | _Write) -> tuple[bool, Any]:
        """Commit ``op`` on this thread; ``(False, None)`` if another connection holds the
        write lock: the loop must not wait for it, so the queued path waits instead."""
        conn = self._conn
        assert conn is not None
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode in _BUSY_CODES:
                return False, None
            raise self._db_error(exc) from exc
        try:
            [(ok, value)] = self._apply(conn, [op], begun=True)
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc) from exc
        if not ok:
            raise value
        return True, value

    def _apply(self, conn: sqlite3.Connection, ops: list[Commit | _Write], *,
               begun: bool = False) -> list[tuple[bool, Any]]:
        """One IMMEDIATE transaction for a whole group. Fast path: no savepoints. If an op
        raises, the group is rolled back and written again with one savepoint per op, so
        only the failing op fails (the others are still committed together)."""
        try:
            return self._apply_group(conn, ops, isolate=False, begun=begun)
        except Exception:
            if len(ops) == 1:
                raise
            return self._apply_group(conn, ops, isolate=True)

    def _apply_group(self, conn: sqlite3.Connection, ops: list[Commit | _Write], *,
                     isolate: bool, begun: bool = False) -> list[tuple[bool, Any]]:
        """``begun``: the caller has already opened the IMMEDIATE transaction."""
        results: list[tuple[bool, Any]] = []
        if not begun:
            conn.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                if not isolate:
                    results.append(self._apply_op(conn, op))
                    continue
                conn.execute("SAVEPOINT op")
                try:
                    results.append(self._apply_op(conn, op))
                except Exception as exc:
                    if not conn.in_transaction:
                        # SQLite rolled the whole transaction back itself (disk full, I/O
                        # error): nothing of the group is written; report the real error
                        raise
                    conn.execute("ROLLBACK TO op")
                    if isinstance(exc, sqlite3.DatabaseError):
                        exc = self._db_error(exc)
                    results.append((False, exc))
                conn.execute("RELEASE op")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results

    def _apply_op(self, conn: sqlite3.Connection, op: Commit | _Write) -> tuple[bool, Any]:
        if not isinstance(op, Commit):
            return True, op(conn)
        if op.generation is not None:
            row = conn.execute("SELECT generation FROM runs WHERE run_id = ?",
                               (op.run_id,)).fetchone()
            if row is None or row[0] != op.generation:
                return False, Fenced(f"run {op.run_id} is driven by another worker")
        self._apply_one(conn, op)
        return True, None

    @staticmethod
    def _apply_one(conn: sqlite3.Connection, change: Commit) -> None:
        folded = folded_attempts(change)
        rows = []
        for step in change.steps:
            row = encode_step(step, folded.get(step.step_key))
            if row.blob is not None:
                conn.execute("INSERT OR IGNORE INTO blobs (hash, data) VALUES (?, ?)",
                             (row.blob, row.blob_data))
            rows.append((step.run_id, step.step_key, step.seq, step.kind, step.tool,
                         step.args_hash, step.status, row.outcome, row.blob, row.detail,
                         step.created_at, step.updated_at))
        # one statement for all of them: a fan-out's commit holds hundreds
        conn.executemany(
            "INSERT INTO steps (run_id, step_key, seq, kind, tool, args_hash, status, outcome, "
            "blob, detail, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (run_id, step_key) DO UPDATE SET status = excluded.status, "
            "outcome = excluded.outcome, blob = excluded.blob, detail = excluded.detail, "
            "updated_at = excluded.updated_at", rows)
        conn.executemany(
            "INSERT INTO attempts (run_id, step_key, attempt, status, code, message, detail, "
            "started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (run_id, step_key, "
            "attempt) DO UPDATE SET status = excluded.status, code = excluded.code, message = "
            "excluded.message, detail = excluded.detail, finished_at = excluded.finished_at",
            [(attempt.run_id, attempt.step_key, attempt.attempt, attempt.status, attempt.code,
              attempt.message, dumps(attempt.detail), attempt.started_at, attempt.finished_at)
             for attempt in change.attempts if folded.get(attempt.step_key) is not attempt])
        if change.wake is not None:
            _wake_run(conn, change.wake, change.wake_at)
        if change.run is not None:
            run = change.run
            lease = ", lease_owner = NULL, lease_expires = 0" if run.release_lease else ""
            # a run that parks keeps an earlier wake time ``wake`` left while it ran
            conn.execute(
                f"UPDATE runs SET status = ?, result = ?, error = ?, waiting = ?, wake_at = CASE "
                f"WHEN ? = 'waiting' AND wake_at IS NOT NULL AND (? IS NULL OR wake_at < ?) "
                f"THEN wake_at ELSE ? END, updated_at = COALESCE(?, updated_at){lease} "
                "WHERE run_id = ?",
                (run.status, dumps(run.result), dumps(run.error), dumps(run.waiting),
                 run.status, run.wake_at, run.wake_at, run.wake_at, run.updated_at, change.run_id))

    # -- completions and signals ---------------------------------------------------------
    _COMPLETION_COLUMNS = ("run_id, step_key, waiting, deadline_at, on_timeout, on_cancel, module, "
                           "tool, resolution")

    @staticmethod
    def _completion_row(row: tuple[Any, ...]) -> dict[str, Any]:
        return {"run_id": row[0], "step_key": row[1], "waiting": bool(row[2]),
                "deadline_at": row[3], "on_timeout": row[4], "on_cancel": row[5], "module": row[6],
                "tool": row[7], "resolution": loads(row[8])}

    def _read_completion(self, conn: sqlite3.Connection, run_id: str,
                         step_key: str) -> dict[str, Any] | None:
        row = conn.execute(f"SELECT {self._COMPLETION_COLUMNS} FROM completions WHERE run_id = ? "
                           "AND step_key = ?", (run_id, step_key)).fetchone()
        return self._completion_row(row) if row else None

    async def completion_get(self, run_id: str, step_key: str) -> dict[str, Any] | None:
        return await self._read(self._read_completion, run_id, step_key)

    async def completion_open_wait(self, row: dict[str, Any]) -> dict[str, Any]:
        def write(conn: sqlite3.Connection) -> dict[str, Any]:
            conn.execute("INSERT OR IGNORE INTO completions (run_id, step_key) VALUES (?, ?)",
                         (row["run_id"], row["step_key"]))
            conn.execute("UPDATE completions SET waiting = 1, deadline_at = ?, on_timeout = ?, "
                         "on_cancel = ?, module = ?, tool = ? WHERE run_id = ? AND step_key = ? "
                         "AND waiting = 0",
                         (row.get("deadline_at"), row.get("on_timeout"), row.get("on_cancel"),
                          row.get("module"), row.get("tool"), row["run_id"], row["step_key"]))
            found = self._read_completion(conn, row["run_id"], row["step_key"])
            assert found is not None
            return found
        return await self._write(write)

    async def completion_settle(self, run_id: str, step_key: str, resolution: dict[str, Any], *,
                                now: float, respect_deadline: bool, wake_at: float | None = None
                                ) -> tuple[dict[str, Any], str]:
        def write(conn: sqlite3.Connection) -> tuple[dict[str, Any], str]:
            conn.execute("INSERT OR IGNORE INTO completions (run_id, step_key) VALUES (?, ?)",
                         (run_id, step_key))
            current = self._read_completion(conn, run_id, step_key)
            assert current is not None
            if current["resolution"] is not None:
                return current, "already_resolved"
            deadline = current["deadline_at"]
            if respect_deadline and deadline is not None and now >= deadline:
                return current, "expired"
            conn.execute("UPDATE completions SET resolution = ? WHERE run_id = ? AND step_key = ?",
                         (dumps(resolution), run_id, step_key))
            if wake_at is not None:
                _wake_run(conn, run_id, wake_at)
            current["resolution"] = resolution
            return current, "won"
        return await self._write(write)  # first writer wins: check and set in one transaction

    async def completion_open_waits(self, run_id: str) -> list[dict[str, Any]]:
        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(f"SELECT {self._COMPLETION_COLUMNS} FROM completions WHERE run_id = ? "
                                "AND waiting = 1 AND resolution IS NULL", (run_id,))
            return [self._completion_row(row) for row in rows]
        return await self._read(read)

    async def add_signal(self, run_id: str, name: str, payload: Any, *,
                         sender: str | None = None) -> int:
        def write(conn: sqlite3.Connection) -> int:
            if sender is not None:
                sent = conn.execute("SELECT ordinal FROM signals WHERE run_id = ? AND name = ? "
                                    "AND sender = ?", (run_id, name, sender)).fetchone()
                if sent is not None:
                    return int(sent[0])  # delivered before the sender's crash: once only
            row = conn.execute("SELECT COALESCE(MAX(ordinal), 0) FROM signals WHERE run_id = ? "
                               "AND name = ?", (run_id, name)).fetchone()
            ordinal = row[0] + 1
            conn.execute("INSERT INTO signals (run_id, name, ordinal, payload, sender) "
                         "VALUES (?,?,?,?,?)", (run_id, name, ordinal, dumps(payload), sender))
            return ordinal
        return await self._write(write)

    async def get_signal(self, run_id: str, name: str, ordinal: int) -> tuple[bool, Any]:
        def read(conn: sqlite3.Connection) -> tuple[bool, Any]:
            row = conn.execute("SELECT payload FROM signals WHERE run_id = ? AND name = ? AND "
                               "ordinal = ?", (run_id, name, ordinal)).fetchone()
            return (True, loads(row[0])) if row else (False, None)
        return await self._read(read)
