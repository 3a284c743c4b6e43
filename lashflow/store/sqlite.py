"""SQLite's dialect of the store, on aiosqlite: WAL, one writer connection, IMMEDIATE
transactions. What the store decides is in ``core`` and ``programs``; this module brings
SQLite's SQL for each statement the programs name and the way they run here.

Each aiosqlite call hops to the connection's thread (~0.1 ms), so every operation here is
ONE hop: a whole program (or a whole group of writes) runs in that thread at once.
aiosqlite has no public call for "run this function in your thread", so the function
travels through its public ``execute_fetchall``, which runs
``conn.execute(sql, params).fetchall()`` in that thread: the connection aiosqlite opens is
our ``sqlite3.Connection`` subclass (``factory=``, passed through to ``sqlite3.connect``),
whose ``execute`` runs an ``_Op`` instead of parsing it as SQL (ADR 0016).
Every write joins the core's group commit (``groups_writes``): creating and claiming
runs, completions, signals and lease renewals share their fsyncs with the journal
commits of every run in flight.

A lone writer (the engine says no other caller can be waiting to write: one run, as in a
CLI ``run`` or a sequential loop of ``Engine.run``) has nobody to share an fsync with, so
its writes skip the hop and commit on the caller's thread (``inline``, ADR 0008): the
event loop waits the commit out, the run would have waited for it anyway.

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
import pickle
import sqlite3
import threading
import time
import urllib.parse
from typing import Any, Callable, Sequence, TypeVar

import aiosqlite

from ..errors import DbError, NoDatabase
from ..states import KEPT_PAUSED
from . import events
from .base import (SCHEMA_VERSION, UNCHECKED_ROWS, AttemptRecord, Commit, RunChange, RunQuery,
                   RunRecord)
from .core import CoreStore, Job
from .group_commit import Outcome
from .programs import COMPLETION_COLUMNS, WAKEABLE, fenced, run_on
from .queries import PARKED_WAITS, RUNS_BY_STATUS, SIGNALS_OF_RUN, SUMMARY_COLUMNS, count_sql, page_sql
from .rows import QUEUE_RUN_COLUMNS, run_queue
from .rows import RUN_COLUMNS, STEP_READ_COLUMNS, dumps, encode_step, folded_attempts, run_values
from .sqlite_schedules import MIGRATION as SCHEDULES_MIGRATION
from .sqlite_queues import MIGRATION as QUEUES_MIGRATION
from .sqlite_queues import MIGRATION_9 as QUEUE_ORDER_MIGRATION
from .sqlite_queues import QueueStatements
from .sqlite_ratelimits import MIGRATION as RATE_LIMITS_MIGRATION
from .sqlite_ratelimits import RateLimitStatements
from .sqlite_schedules import ScheduleStatements
from .sqlite_writer import WriterProcess

T = TypeVar("T")

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
    # Version 5: deployed versions of each process (``lashflow deploy``, ADR 0026).
    5: [
        """CREATE TABLE IF NOT EXISTS versions (
            process TEXT NOT NULL, version INTEGER NOT NULL, source_hash TEXT NOT NULL,
            content_hash TEXT NOT NULL, tools TEXT NOT NULL, deployed_at REAL NOT NULL,
            PRIMARY KEY (process, version))""",
    ],
    # Version 6: schedules (lashflow.store.schedules).
    6: SCHEDULES_MIGRATION,
    # Version 7: each run's event log (lashflow.store.events, ADR 0033). ``id`` orders the
    # feed of every run (AUTOINCREMENT: never reused after gc deletes the newest rows).
    7: [
        """CREATE TABLE IF NOT EXISTS events (
            id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, seq INTEGER NOT NULL,
            kind TEXT NOT NULL, data TEXT NOT NULL, at REAL NOT NULL)""",
        "CREATE UNIQUE INDEX IF NOT EXISTS events_by_run ON events (run_id, seq)",
    ],
    # Version 8: queues, their keys and token buckets; a run's queue, key and priority.
    8: QUEUES_MIGRATION,
    # Version 9: a queued run's fairness tag and the index of a queue's start order (ADR 0037).
    9: QUEUE_ORDER_MIGRATION,
    # Version 10: tools' rate limits (token buckets) and global concurrency slots (ADR 0036).
    10: RATE_LIMITS_MIGRATION,
    11: [],  # PostgreSQL's one-statement queued turn (ADR 0043); nothing changes here
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


logger = logging.getLogger(__name__)
# LASHFLOW_SQLITE_WRITER: "thread" never starts a writer process (ADR 0050); "process"
# starts one with every store that writes, at open (what the tests of it use)
_WRITER_MODE = os.environ.get("LASHFLOW_SQLITE_WRITER", "")
_PROCESS_WRITER = _WRITER_MODE != "thread"
# Writers at once for this many groups: a lasting load (runs at once), worth a process;
# one fan-out's few shared groups are not (its commits go on sharing the thread's)
_SHARED_GROUPS_BEFORE_PROCESS = 32

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
        def join_all() -> None:
            for thread in started:
                thread.join(2.0)

        await asyncio.to_thread(join_all)


def _itself(conn: sqlite3.Connection) -> sqlite3.Connection:
    return conn


_DISK_CODES = frozenset({sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL})


class _Statements(QueueStatements, RateLimitStatements, ScheduleStatements):
    """SQLite's answer to each statement the store's programs name (``programs.STATEMENTS``).
    Every method takes the connection first; the backend runs them in one transaction."""

    # -- the schema ------------------------------------------------------------------------
    def create_meta(self, conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def schema_version(self, conn: sqlite3.Connection) -> Any:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return row[0] if row else None

    def migrate(self, conn: sqlite3.Connection, statement: str) -> None:
        _migrate_statement(conn, statement)

    def mark_unchecked(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, '1')", (UNCHECKED_ROWS,))

    def set_schema_version(self, conn: sqlite3.Connection, version: int) -> None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                     (str(version),))

    def ensure_secret(self, conn: sqlite3.Connection, secret: bytes) -> None:
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('secret', ?)", (secret,))

    def unchecked_mark(self, conn: sqlite3.Connection) -> bool:
        return conn.execute("SELECT 1 FROM meta WHERE key = ?", (UNCHECKED_ROWS,)).fetchone() \
            is not None

    def secret(self, conn: sqlite3.Connection) -> Any:
        row = conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
        return row[0] if row else None

    def setting(self, conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0]).decode()

    def put_setting(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value.encode()))

    def put_source(self, conn: sqlite3.Connection, source_hash: str, text: str) -> str:
        conn.execute("INSERT OR IGNORE INTO sources (hash, text) VALUES (?, ?)", (source_hash, text))
        return str(self.get_source(conn, source_hash))

    def get_source(self, conn: sqlite3.Connection, source_hash: str) -> str | None:
        row = conn.execute("SELECT text FROM sources WHERE hash = ?", (source_hash,)).fetchone()
        return row[0] if row else None

    # -- runs --------------------------------------------------------------------------------
    def insert_run(self, conn: sqlite3.Connection, run: RunRecord) -> bool:
        cursor = conn.execute(
            f"INSERT OR IGNORE INTO runs ({RUN_COLUMNS}, {QUEUE_RUN_COLUMNS}) VALUES "
            "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", run_values(run) + run_queue(run))
        if cursor.rowcount != 1:
            return False
        self.append_events(conn, [(run.run_id, *events.created(run))])
        return True

    def append_events(self, conn: sqlite3.Connection, rows: list[events.RunEventRow],
                      offsets: dict[str, int] | None = None) -> None:
        """Each row its run's next offset (rows of one run in their order): the one
        writer connection makes ``MAX`` exact. ``offsets``: the last offsets of runs read
        already in this transaction (the fence's read); one read for the others."""
        if not rows:
            return
        last = dict(offsets) if offsets else {}
        if len(rows) == 1 and rows[0][0] not in last:
            # a lone event: one statement reads the offset and writes
            conn.execute("INSERT INTO events (run_id, seq, kind, data, at) SELECT ?, "
                         "COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM events WHERE run_id = ?",
                         (*rows[0], rows[0][0]))
            return
        ids = sorted({row[0] for row in rows if row[0] not in last})
        if len(ids) == 1:
            last[ids[0]] = conn.execute("SELECT MAX(seq) FROM events WHERE run_id = ?",
                                        ids).fetchone()[0] or 0
        elif ids:
            last.update(_chunked(conn, "SELECT run_id, MAX(seq) FROM events WHERE run_id IN "
                                 "({}) GROUP BY run_id", ids))
        numbered = []
        for run_id, kind, data, at in rows:
            seq = last[run_id] = (last.get(run_id) or 0) + 1
            numbered.append((run_id, seq, kind, data, at))
        conn.executemany("INSERT INTO events (run_id, seq, kind, data, at) VALUES (?,?,?,?,?)",
                         numbered)

    def run_events(self, conn: sqlite3.Connection, run_id: str, after: int,
                   limit: int) -> list[Any]:
        return conn.execute("SELECT run_id, seq, kind, data, at, id FROM events WHERE run_id = ? "
                            "AND seq > ? ORDER BY seq LIMIT ?", (run_id, after, limit)).fetchall()

    def feed(self, conn: sqlite3.Connection, after: str, process: str | None,
             limit: int, settled: bool) -> list[Any]:
        """Events of every run (of ``process``) after the cursor, in commit order: the one
        writer gives ids in that order (so every read is ``settled``)."""
        start = events.sqlite_cursor(after)
        if process is None:
            return conn.execute("SELECT run_id, seq, kind, data, at, id FROM events WHERE id > ? "
                                "ORDER BY id LIMIT ?", (start, limit)).fetchall()
        return conn.execute(
            "SELECT e.run_id, e.seq, e.kind, e.data, e.at, e.id FROM events e JOIN runs r ON "
            "r.run_id = e.run_id WHERE e.id > ? AND r.process = ? ORDER BY e.id LIMIT ?",
            (start, process, limit)).fetchall()

    def last_event(self, conn: sqlite3.Connection, run_id: str) -> int:
        return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?",
                                (run_id,)).fetchone()[0])

    def feed_head(self, conn: sqlite3.Connection) -> str:
        return str(conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0])

    def run_row(self, conn: sqlite3.Connection, run_id: str) -> Any:
        return conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()

    def run_rows(self, conn: sqlite3.Connection, status: str | None, limit: int | None) -> list[Any]:
        sql = f"SELECT {RUN_COLUMNS} FROM runs"
        params: list[Any] = []
        if status is not None:
            sql += " WHERE status = ?"
            params.append(status)
        sql += " ORDER BY created_at, run_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return conn.execute(sql, params).fetchall()

    def runs_by_status(self, conn: sqlite3.Connection) -> list[Any]:
        return conn.execute(RUNS_BY_STATUS.format(table="runs")).fetchall()

    def parked_waits(self, conn: sqlite3.Connection) -> list[Any]:
        return conn.execute(PARKED_WAITS.format(table="runs")).fetchall()

    def run_page(self, conn: sqlite3.Connection, query: RunQuery,
                 columns: str = SUMMARY_COLUMNS) -> list[Any]:
        sql, params = page_sql(query, "runs", lambda n: "?", _json_field, columns)
        return conn.execute(sql, params).fetchall()

    def run_count(self, conn: sqlite3.Connection, query: RunQuery) -> int:
        sql, params = count_sql(query, "runs", lambda n: "?", _json_field)
        return int(conn.execute(sql, params).fetchone()[0])

    def journal_steps(self, conn: sqlite3.Connection, run_id: str) -> list[Any]:
        return conn.execute(
            f"SELECT {STEP_READ_COLUMNS} FROM steps s LEFT JOIN blobs b ON b.hash = s.blob "
            "WHERE s.run_id = ? ORDER BY s.seq", (run_id,)).fetchall()

    def journal_attempts(self, conn: sqlite3.Connection, run_id: str) -> list[Any]:
        return conn.execute(
            "SELECT step_key, attempt, status, code, message, detail, started_at, "
            "finished_at FROM attempts WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()

    def run_page_records(self, conn: sqlite3.Connection, query: RunQuery) -> list[Any]:
        sql, params = page_sql(query, "runs", lambda n: "?", _json_field, RUN_COLUMNS)
        return conn.execute(sql, params).fetchall()

    def journal_steps_of(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[Any]:
        rows: list[Any] = []
        for start in range(0, len(run_ids), 500):  # SQLite bounds the parameters of a statement
            chunk = run_ids[start:start + 500]
            rows += conn.execute(
                f"SELECT {STEP_READ_COLUMNS}, s.run_id FROM steps s LEFT JOIN blobs b "
                f"ON b.hash = s.blob WHERE s.run_id IN ({_marks(chunk)}) ORDER BY s.run_id, "
                "s.seq", chunk).fetchall()
        return rows

    def journal_attempts_of(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[Any]:
        rows: list[Any] = []
        for start in range(0, len(run_ids), 500):
            chunk = run_ids[start:start + 500]
            rows += conn.execute(
                "SELECT step_key, attempt, status, code, message, detail, started_at, "
                f"finished_at, run_id FROM attempts WHERE run_id IN ({_marks(chunk)}) "
                "ORDER BY run_id, rowid", chunk).fetchall()
        return rows

    def children(self, conn: sqlite3.Connection, run_id: str) -> list[Any]:
        return conn.execute(f"SELECT {SUMMARY_COLUMNS} FROM runs WHERE parent_run_id = ? "
                            "ORDER BY created_at, run_id", (run_id,)).fetchall()

    def signals_of(self, conn: sqlite3.Connection, run_id: str) -> list[Any]:
        return conn.execute(SIGNALS_OF_RUN.format(table="signals"), (run_id,)).fetchall()

    def stale_runs(self, conn: sqlite3.Connection, wanted: list[str], before: float,
                   limit: int) -> list[str]:
        return [row[0] for row in conn.execute(
            f"SELECT run_id FROM runs WHERE status IN ({_marks(wanted)}) AND updated_at < ? "
            "ORDER BY updated_at, run_id LIMIT ?", (*wanted, before, limit))]

    def settled_among(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[str]:
        return [row[0] for row in conn.execute(
            f"SELECT run_id FROM runs WHERE run_id IN ({_marks(run_ids)}) AND status IN "
            "('finished', 'failed', 'cancelled')", run_ids)]

    def delete_runs(self, conn: sqlite3.Connection, run_ids: list[str]) -> None:
        for table in ("steps", "attempts", "completions", "signals", "events", "runs"):
            conn.execute(f"DELETE FROM {table} WHERE run_id IN ({_marks(run_ids)})", run_ids)

    def delete_unreferenced_blobs(self, conn: sqlite3.Connection, limit: int) -> int:
        return conn.execute(
            "DELETE FROM blobs WHERE hash IN (SELECT b.hash FROM blobs b WHERE NOT EXISTS "
            "(SELECT 1 FROM steps s WHERE s.blob = b.hash) LIMIT ?)", (limit,)).rowcount

    def cancel_requested(self, conn: sqlite3.Connection, run_ids: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(run_ids), 500):  # SQLite bounds the parameters of a statement
            chunk = run_ids[start:start + 500]
            found.update(row[0] for row in conn.execute(
                f"SELECT run_id FROM runs WHERE cancel_requested = 1 AND run_id IN ({_marks(chunk)})",
                chunk))
        return found

    def stop_requested(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[Any]:
        return _chunked(conn, "SELECT run_id, cancel_requested, status FROM runs WHERE "
                        "(cancel_requested = 1 OR status = 'paused') AND run_id IN ({})", run_ids)

    def runs_for_update(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[Any]:
        return _chunked(conn, "SELECT run_id, status, meta FROM runs WHERE run_id IN ({})",
                        run_ids)

    def request_cancels(self, conn: sqlite3.Connection, changes: list[tuple[str, str, str]],
                        now: float) -> None:
        conn.executemany("UPDATE runs SET status = ?, meta = ?, cancel_requested = 1, "
                         "updated_at = ? WHERE run_id = ?",
                         [(status, meta, now, run_id) for run_id, status, meta in changes])

    def set_status_meta(self, conn: sqlite3.Connection, changes: list[tuple[str, str, str]],
                        now: float) -> None:
        conn.executemany("UPDATE runs SET status = ?, meta = ?, updated_at = ? WHERE run_id = ?",
                         [(status, meta, now, run_id) for run_id, status, meta in changes])

    def unsettled_leases(self, conn: sqlite3.Connection, now: float) -> list[Any]:
        # a run written ahead (queued, ``wake_at`` in the future: a schedule's tick not
        # yet come) is not claimable before its time
        return conn.execute("SELECT run_id, lease_owner, lease_expires FROM runs WHERE status "
                            "IN ('running', 'queued') AND queue IS NULL AND (status = "
                            "'running' OR generation > 0 OR wake_at IS NULL OR wake_at <= ?) "
                            "ORDER BY created_at", (now,)).fetchall()

    def claim_free(self, conn: sqlite3.Connection, run_id: str, owner: str, now: float,
                   expires: float) -> None:
        """No shortcut: the one writer reads, judges and swaps in one transaction."""
        return None

    def lease_of(self, conn: sqlite3.Connection, run_id: str) -> Any:
        return conn.execute("SELECT lease_owner, lease_expires, generation, status, "
                            "queue IS NOT NULL FROM runs WHERE run_id = ?", (run_id,)).fetchone()

    def session_gone(self, conn: sqlite3.Connection, holder: str) -> bool:
        """No owner here holds a session: one machine, judged by its pids (ADR 0035)."""
        return False

    def claim_swap(self, conn: sqlite3.Connection, run_id: str, owner: str, now: float,
                   expires: float, generation: int, holder: str | None, dead: bool) -> Any:
        cursor = conn.execute("UPDATE runs SET lease_owner = ?, lease_expires = ?, generation = "
                              "generation + 1 WHERE run_id = ? AND generation = ?",
                              (owner, expires, run_id, generation))
        return self.run_row(conn, run_id) if cursor.rowcount == 1 else None

    def renew(self, conn: sqlite3.Connection, run_id: str, owner: str, generation: int,
              expires: float) -> bool:
        return conn.execute("UPDATE runs SET lease_expires = ? WHERE run_id = ? AND "
                            "lease_owner = ? AND generation = ?",
                            (expires, run_id, owner, generation)).rowcount == 1

    def request_cancel(self, conn: sqlite3.Connection, run_id: str) -> None:
        conn.execute("UPDATE runs SET cancel_requested = 1 WHERE run_id = ?", (run_id,))

    def due_runs(self, conn: sqlite3.Connection, now: float, limit: int) -> list[str]:
        return [row[0] for row in conn.execute(
            "SELECT run_id FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL AND "
            "wake_at <= ? AND queue IS NULL ORDER BY wake_at LIMIT ?", (now, limit))]

    def wake(self, conn: sqlite3.Connection, run_id: str, at: float,
             statuses: Sequence[str]) -> None:
        """Make the run due at ``at`` if its status is one of ``statuses`` (an earlier
        wake time stays)."""
        conn.execute("UPDATE runs SET wake_at = CASE WHEN wake_at IS NULL OR wake_at > ? THEN ? "
                     f"ELSE wake_at END WHERE run_id = ? AND status IN ({_marks(statuses)})",
                     (at, at, run_id, *statuses))

    def meta_for_update(self, conn: sqlite3.Connection, run_id: str) -> Any:
        return conn.execute("SELECT meta FROM runs WHERE run_id = ?", (run_id,)).fetchone()

    def set_meta(self, conn: sqlite3.Connection, run_id: str, meta: str) -> None:
        conn.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (meta, run_id))

    def reopen_candidates(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[Any]:
        return _chunked(conn, "SELECT run_id, meta, status, lease_owner, lease_expires FROM "
                        "runs WHERE run_id IN ({})", run_ids)

    def requeue_runs(self, conn: sqlite3.Connection, changes: list[tuple[str, str]],
                     now: float) -> None:
        conn.executemany("UPDATE runs SET status = 'queued', result = 'null', error = 'null', "
                         "waiting = '[]', wake_at = NULL, cancel_requested = 0, lease_owner = "
                         "NULL, lease_expires = 0, updated_at = ?, meta = ? WHERE run_id = ?",
                         [(now, meta, run_id) for run_id, meta in changes])

    def forget_completions(self, conn: sqlite3.Connection,
                           steps: list[tuple[str, str]]) -> None:
        conn.executemany("DELETE FROM completions WHERE run_id = ? AND step_key = ?", steps)

    def put_attempts(self, conn: sqlite3.Connection, attempts: Sequence[AttemptRecord]) -> None:
        """Attempt rows of their own, an existing one updated in place (no statement
        for none: a step's lone first attempt is folded into its row, ADR 0010)."""
        if not attempts:
            return
        conn.executemany(
            "INSERT INTO attempts (run_id, step_key, attempt, status, code, message, detail, "
            "started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (run_id, step_key, "
            "attempt) DO UPDATE SET status = excluded.status, code = excluded.code, message = "
            "excluded.message, detail = excluded.detail, finished_at = excluded.finished_at",
            [(attempt.run_id, attempt.step_key, attempt.attempt, attempt.status, attempt.code,
              attempt.message, dumps(attempt.detail), attempt.started_at, attempt.finished_at)
             for attempt in attempts])

    # -- versions ----------------------------------------------------------------------------
    def versions_of(self, conn: sqlite3.Connection, process: str | None) -> list[Any]:
        sql = ("SELECT process, version, source_hash, content_hash, tools, deployed_at "
               "FROM versions")
        if process is None:
            return conn.execute(sql + " ORDER BY process, version").fetchall()
        return conn.execute(sql + " WHERE process = ? ORDER BY version", (process,)).fetchall()

    def insert_version(self, conn: sqlite3.Connection, process: str, version: int,
                       source_hash: str, content_hash: str, tools: str, at: float) -> None:
        conn.execute("INSERT INTO versions (process, version, source_hash, content_hash, tools, "
                     "deployed_at) VALUES (?, ?, ?, ?, ?, ?)",
                     (process, version, source_hash, content_hash, tools, at))

    def move_candidate(self, conn: sqlite3.Connection, run_id: str) -> Any:
        return conn.execute("SELECT source_hash, meta, status, lease_owner, lease_expires FROM "
                            "runs WHERE run_id = ?", (run_id,)).fetchone()

    def set_source(self, conn: sqlite3.Connection, run_id: str, source_hash: str, meta: str,
                   now: float) -> None:
        conn.execute("UPDATE runs SET source_hash = ?, meta = ?, updated_at = ? WHERE run_id = ?",
                     (source_hash, meta, now, run_id))

    # -- completions and signals -------------------------------------------------------------
    def completion(self, conn: sqlite3.Connection, run_id: str, step_key: str) -> Any:
        return conn.execute(f"SELECT {COMPLETION_COLUMNS} FROM completions WHERE run_id = ? "
                            "AND step_key = ?", (run_id, step_key)).fetchone()

    def open_wait(self, conn: sqlite3.Connection, row: dict[str, Any]) -> Any:
        conn.execute("INSERT OR IGNORE INTO completions (run_id, step_key) VALUES (?, ?)",
                     (row["run_id"], row["step_key"]))
        conn.execute("UPDATE completions SET waiting = 1, deadline_at = ?, on_timeout = ?, "
                     "on_cancel = ?, module = ?, tool = ? WHERE run_id = ? AND step_key = ? "
                     "AND waiting = 0",
                     (row.get("deadline_at"), row.get("on_timeout"), row.get("on_cancel"),
                      row.get("module"), row.get("tool"), row["run_id"], row["step_key"]))
        return self.completion(conn, row["run_id"], row["step_key"])

    def open_waits(self, conn: sqlite3.Connection, run_id: str) -> list[Any]:
        return conn.execute(f"SELECT {COMPLETION_COLUMNS} FROM completions WHERE run_id = ? "
                            "AND waiting = 1 AND resolution IS NULL ORDER BY step_key",
                            (run_id,)).fetchall()

    def touch_completion(self, conn: sqlite3.Connection, run_id: str, step_key: str) -> Any:
        conn.execute("INSERT OR IGNORE INTO completions (run_id, step_key) VALUES (?, ?)",
                     (run_id, step_key))
        return self.completion(conn, run_id, step_key)

    def resolve_completion(self, conn: sqlite3.Connection, run_id: str, step_key: str,
                           resolution: str) -> None:
        conn.execute("UPDATE completions SET resolution = ? WHERE run_id = ? AND step_key = ?",
                     (resolution, run_id, step_key))

    def signal_by_sender(self, conn: sqlite3.Connection, run_id: str, name: str,
                         sender: str) -> int | None:
        row = conn.execute("SELECT ordinal FROM signals WHERE run_id = ? AND name = ? AND "
                           "sender = ?", (run_id, name, sender)).fetchone()
        return row[0] if row else None

    def append_signal(self, conn: sqlite3.Connection, run_id: str, name: str, payload: str,
                      sender: str | None) -> int:
        row = conn.execute("SELECT COALESCE(MAX(ordinal), 0) FROM signals WHERE run_id = ? "
                           "AND name = ?", (run_id, name)).fetchone()
        conn.execute("INSERT INTO signals (run_id, name, ordinal, payload, sender) "
                     "VALUES (?,?,?,?,?)", (run_id, name, row[0] + 1, payload, sender))
        return int(row[0]) + 1

    def signal(self, conn: sqlite3.Connection, run_id: str, name: str, ordinal: int) -> Any:
        return conn.execute("SELECT payload FROM signals WHERE run_id = ? AND name = ? AND "
                            "ordinal = ?", (run_id, name, ordinal)).fetchone()

    # -- the journal (not a program's statement: ``apply_group`` writes commits) --------------
    def commit(self, conn: sqlite3.Connection, changes: Sequence[Commit],
               offsets: dict[str, int] | None = None) -> None:
        """Write ``changes`` (commits that passed their fence) as if one after another, with
        one statement per kind of row for all of them: a group of 25 step commits is 4
        statements, not 75 (each statement hands the GIL back and waits to take it again
        while the event loop runs). Rows of different tables do not depend on each other;
        the ``runs`` rows (wakes, run changes) are written in the commits' order."""
        rows = []
        attempts: list[AttemptRecord] = []
        happened: list[events.RunEventRow] = []
        for change in changes:
            folded = folded_attempts(change)
            for step in change.steps:
                row = encode_step(step, folded.get(step.step_key))
                if row.blob is not None:
                    conn.execute("INSERT OR IGNORE INTO blobs (hash, data) VALUES (?, ?)",
                                 (row.blob, row.blob_data))
                rows.append((step.run_id, step.step_key, step.seq, step.kind, step.tool,
                             step.args_hash, step.status, row.outcome, row.blob, row.detail,
                             step.created_at, step.updated_at))
            attempts += [attempt for attempt in change.attempts
                         if folded.get(attempt.step_key) is not attempt]
            happened += [(change.run_id, *row) for row in events.of_commit(change)]
        # one statement for all of them (a fan-out's commit holds hundreds), none for none
        if rows:
            conn.executemany(
                "INSERT INTO steps (run_id, step_key, seq, kind, tool, args_hash, status, "
                "outcome, blob, detail, created_at, updated_at) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (run_id, step_key) DO UPDATE SET "
                "status = excluded.status, outcome = excluded.outcome, blob = excluded.blob, "
                "detail = excluded.detail, updated_at = excluded.updated_at", rows)
        self.put_attempts(conn, attempts)
        self.append_events(conn, happened, offsets)
        for change in changes:
            if change.wake is not None:
                self.wake(conn, change.wake, change.wake_at, WAKEABLE)
            if change.run is not None:
                self._change_run(conn, change.run_id, change.run)

    @staticmethod
    def _change_run(conn: sqlite3.Connection, run_id: str, run: RunChange) -> None:
        lease = ", lease_owner = NULL, lease_expires = 0" if run.release_lease else ""
        # a run that parks keeps an earlier wake time ``wake`` left while it ran
        # a run paused while this drive was under way stays paused (ADR 0032)
        kept = run.status in KEPT_PAUSED
        conn.execute(
            f"UPDATE runs SET status = CASE WHEN ? AND status = 'paused' THEN status ELSE ? "
            f"END, result = ?, error = ?, waiting = ?, wake_at = CASE "
            f"WHEN ? = 'waiting' AND wake_at IS NOT NULL AND (? IS NULL OR wake_at < ?) "
            f"THEN wake_at ELSE ? END, updated_at = COALESCE(?, updated_at){lease} "
            "WHERE run_id = ?",
            (kept, run.status, dumps(run.result), dumps(run.error), dumps(run.waiting),
             run.status, run.wake_at, run.wake_at, run.wake_at, run.updated_at, run_id))

    def generations(self, conn: sqlite3.Connection,
                    run_ids: list[str]) -> dict[str, tuple[int, int]]:
        """The runs' lease generations (the fence of their commits) and their events' last
        offsets (where the commits' events go on), in one read."""
        if len(run_ids) == 1:
            row = conn.execute(f"SELECT generation, {_LAST_EVENT} FROM runs WHERE run_id = ?",
                               run_ids).fetchone()
            return {} if row is None else {run_ids[0]: (row[0], row[1])}
        return {run_id: (generation, last) for run_id, generation, last in _chunked(
            conn, f"SELECT run_id, generation, {_LAST_EVENT} FROM runs WHERE run_id IN ({{}})",
            sorted(set(run_ids)))}


_LAST_EVENT = "(SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.run_id = runs.run_id)"


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _json_field(column: str, key: str, as_int: bool) -> str:
    """One key of a JSON text column (NULL where the text is no JSON: never an error)."""
    return f"(CASE WHEN json_valid({column}) THEN json_extract({column}, '$.{key}') END)"


def _chunked(conn: sqlite3.Connection, sql: str, values: Sequence[Any]) -> list[Any]:
    """``sql`` (its ``{}`` a list of marks) over ``values`` 500 at a time: SQLite bounds
    the parameters of one statement."""
    rows: list[Any] = []
    for start in range(0, len(values), 500):
        chunk = list(values[start:start + 500])
        rows += conn.execute(sql.format(_marks(chunk)), chunk).fetchall()
    return rows


class SqliteBackend:
    """SQLite's side of the store (``core.Backend``): one writer connection on aiosqlite's
    thread, a read-only connection on the caller's, and the statements above."""

    groups_writes = True
    migrations = _MIGRATIONS

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout: float = 5.0) -> None:
        self.path = self.label = path
        self.synchronous = synchronous.upper()
        self.busy_timeout = busy_timeout
        self.sql = _Statements()
        self._db: aiosqlite.Connection | None = None
        self._conn: sqlite3.Connection | None = None  # for a lone writer's inline commits
        self._reader: sqlite3.Connection | None = None  # for reads on the caller's thread
        self._identity: tuple[int, int] = (0, 0)  # (device, inode) of the file opened
        self._hops = 0  # aiosqlite calls under way: the connection's thread is busy
        # The writer connection's busy timeout is 0 while inline commits use it (they must
        # never wait on the loop's thread) and the configured one while its own thread
        # does: switched only when the other side takes it, not twice per inline commit.
        self._fails_fast = False
        self.inline = self._write_inline
        self.readonly = False
        # The group writer in a process of its own (ADR 0050): started by a lasting load of
        # writers at once; until it is ready, and if it ever fails, the thread writes.
        self.process_writer = _PROCESS_WRITER
        self._process: WriterProcess | None = None
        self._starting: asyncio.Task[WriterProcess | None] | None = None
        self._on_thread: asyncio.Future[None] | None = None  # the group the thread writes
        self.pipelines = False  # groups go to the writer process (it holds two at once)
        self._shared_groups = 0  # groups of several writes so far, on the thread
        # the store's registered writers (the core tells; 0: unknown, assumed many)
        self.writers: Callable[[], int] = lambda: 0

    # -- plumbing ----------------------------------------------------------------------------
    def _db_error(self, exc: sqlite3.Error) -> DbError:
        """What a user sees of a failing statement: one line naming the file (and, when
        the disk refused a write, what to do: nothing committed is lost)."""
        hint = ""
        if (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in _DISK_CODES:
            hint = ("; the disk may be full (or failing): nothing committed is lost, free "
                    "space and run the command again")
        return DbError(f"database error on {self.path}: {exc}{hint}")

    def _run(self, conn: sqlite3.Connection, job: Job) -> Any:
        """Run a program to its end on ``conn``, answering each statement it asks for."""
        return run_on(job(), self.sql, conn)

    def _run_at_one_moment(self, conn: sqlite3.Connection, job: Job) -> Any:
        conn.execute("BEGIN")
        try:
            return self._run(conn, job)
        finally:
            conn.execute("COMMIT")

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in the connection's thread: one hop for many statements."""
        db = self._db
        if db is None:
            raise DbError("the store is not open")
        self._hops += 1
        op = _Op(fn, args)
        if self._fails_fast:  # an inline commit was the last to use it: wait again
            self._fails_fast = False
            op = _Op(self._waiting, (fn, args))
        try:
            # _Op is run by our connection factory, not as SQL text; what it returns is fn's
            return await db.execute_fetchall(op)  # type: ignore[return-value]
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc) from exc
        finally:
            self._hops -= 1

    def _waiting(self, conn: sqlite3.Connection, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``fn(conn, *args)`` with the configured busy timeout put back first."""
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return fn(conn, *args)

    async def read(self, job: Job, *, scan: bool = False, snapshot: bool = False) -> Any:
        """A scan hops to the connection's thread. A point read runs on this thread, in
        one read transaction (one snapshot for all its statements); in the connection's
        thread if SQLite says busy (a WAL reader almost never waits: only while another
        process recovers the WAL)."""
        reader = self._reader
        if scan or reader is None:
            return await self._call(self._run_at_one_moment if snapshot else self._run, job)
        try:
            return self._run_at_one_moment(reader, job)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode not in _BUSY_CODES:
                raise self._db_error(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc) from exc
        return await self._call(self._run, job)

    async def write(self, job: Job, *, atomic: bool = True) -> Any:
        """A write of its own: a group of one."""
        [(ok, value)] = await self.apply_group([job])
        if not ok:
            raise value
        return value

    def _target(self, readonly: bool) -> tuple[str, bool]:
        """(what to connect to, as a URI?): read-only is the file opened ``mode=ro``."""
        if not readonly:
            return self.path, False
        return "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro", True

    def _open_reader(self) -> sqlite3.Connection:
        target, uri = self._target(self.readonly)
        reader = sqlite3.connect(target, isolation_level=None, check_same_thread=False, uri=uri)
        try:
            reader.execute("PRAGMA busy_timeout = 0")  # never wait on the loop's thread
            reader.execute("PRAGMA query_only = 1")
        except BaseException:
            reader.close()
            raise
        return reader

    # -- lifetime ----------------------------------------------------------------------------
    async def open(self, create: bool, schema: Job | None) -> None:
        self.readonly = schema is None
        directory = os.path.dirname(os.path.abspath(self.path))
        if not create and not os.path.isfile(self.path):
            raise NoDatabase(f"no database at {os.path.abspath(self.path)}: nothing has run "
                             "with it yet (--db or LASHFLOW_DB names another)")
        threads = set(threading.enumerate())
        try:
            if create:
                os.makedirs(directory, exist_ok=True)
            # check_same_thread off: a lone writer commits on the loop's thread, never
            # while the connection's own thread runs anything (see _write_inline)
            target, uri = self._target(self.readonly)
            self._db = await aiosqlite.connect(target, isolation_level=None,
                                               timeout=self.busy_timeout, uri=uri,
                                               check_same_thread=False, factory=_Connection)
        except (OSError, sqlite3.Error) as exc:
            await _let_stopped_thread_finish(threads)
            raise DbError(f"cannot open database {self.path}: {exc}") from exc
        # never keep a crashed process alive; only an aiosqlite whose Connection is a Thread
        # has the attribute (0.22's is not: there this sets nothing)
        self._db.daemon = True  # type: ignore[attr-defined]
        try:
            self._conn = await self._call(_itself)
            await self._setup_with_retry(schema)
            opened = os.stat(self.path)
            self._identity = (opened.st_dev, opened.st_ino)
            self._reader = self._open_reader()
            if _WRITER_MODE == "process" and self.process_writer and not self.readonly:
                self._start_process()
        except BaseException:  # e.g. a newer schema: do not leak the connection's thread
            await self.close()
            raise

    async def _setup_with_retry(self, schema: Job | None) -> None:
        """Several processes opening a brand-new file at once: switching it to WAL can be
        refused at once with "database is locked" (SQLite does not wait its busy timeout
        there), so the whole setup is tried again until the busy timeout has passed."""
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.005
        while True:
            try:
                await self._call(self._setup, schema)
                return
            except DbError as exc:
                cause = getattr(exc.__cause__, "sqlite_errorcode", None)
                if cause not in _BUSY_CODES or time.monotonic() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _setup(self, conn: sqlite3.Connection, schema: Job | None) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        if schema is None:  # read-only: nothing to set up, nothing may be migrated
            return
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        if self._is_current(conn):
            return  # the common case: no write lock taken just to open
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._run(conn, schema)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back itself (a full disk)
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
        self._conn = None
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        if self._process is not None:
            writer, self._process = self._process, None
            await writer.close()
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    # -- writes ------------------------------------------------------------------------------
    def _check_file(self) -> None:
        """The file is still the one this store opened: a database deleted or replaced
        under a live process would otherwise take its writes into an unlinked file, and a
        later run would redo every step. One ``stat`` per group (about a microsecond)."""
        try:
            found = os.stat(self.path)
        except OSError:
            found = None
        if found is None or (found.st_dev, found.st_ino) != self._identity:
            raise DbError(f"database {self.path} was deleted or replaced while lashflow had it "
                          "open; nothing more is written (restore it, or start again)")

    async def apply_group(self, ops: list[Commit | Job]) -> list[Outcome]:
        """A group on the connection's thread, or in the writer process once it writes
        (a group ``send_group`` could not send comes here: it waits its turn)."""
        self._check_file()
        writer = self._process
        if writer is not None and self.pipelines:
            sent = self.send_group(ops)
            if sent is not None:
                return await sent
            await writer.idle()  # a group that cannot travel: the thread, in order
        elif (len(ops) > 1 and self._starting is None and self.process_writer
              and self.writers() != 1):  # writers at once, not one run and its renewal
            self._shared_groups += 1
            if self._shared_groups >= _SHARED_GROUPS_BEFORE_PROCESS:
                self._start_process()
        done = asyncio.get_running_loop().create_future()
        self._on_thread = done
        try:
            return await self._call(self._apply, ops)
        finally:
            done.set_result(None)
            if self._on_thread is done:
                self._on_thread = None

    def send_group(self, ops: list[Commit | Job]) -> asyncio.Future[list[Outcome]] | None:
        """The group sent to the writer process: its outcomes once durable. None when it
        must be written on the thread instead (no process; a group on the thread not
        finished yet, which must commit first; an operation pickle cannot send)."""
        writer = self._process
        if writer is None or not self.pipelines or self._on_thread is not None:
            return None
        try:
            payload = pickle.dumps(ops, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        try:
            self._check_file()
        except DbError as exc:
            refused: asyncio.Future[list[Outcome]] = asyncio.get_running_loop().create_future()
            refused.set_exception(exc)
            return refused
        return writer.send(payload)

    @property
    def writer_pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def _start_process(self) -> asyncio.Task[WriterProcess | None]:
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self._open_process())
        return self._starting

    async def start_process_writer(self) -> bool:
        """Start the writer process now rather than when runs first write at once (a
        long-lived engine that expects them); True once it writes."""
        if self.readonly or not self.process_writer or self._db is None:
            return False
        return await self._start_process() is not None

    async def _open_process(self) -> WriterProcess | None:
        try:
            writer = await WriterProcess.start(self.path, synchronous=self.synchronous,
                                               busy_timeout=self.busy_timeout,
                                               identity=self._identity,
                                               on_failure=self._process_failed)
        except (DbError, OSError, NotImplementedError) as exc:  # (an event loop without
            logger.debug("no SQLite writer process: %s", exc)  # subprocesses: the last)
            return None
        if self._db is None:  # closed meanwhile
            await writer.close()
            return None
        self._process = writer
        self.pipelines = True
        return writer

    def _process_failed(self) -> None:
        """The writer process can write no more: the thread writes from now on."""
        self.pipelines = False

    def connect_writer(self, identity: tuple[int, int]) -> sqlite3.Connection:
        """The writer process's connection to the file its parent opened."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._identity = identity
            self._check_file()
        except BaseException:
            conn.close()
            raise
        return conn

    def write_group(self, conn: sqlite3.Connection, ops: list[Commit | Job]) -> list[Outcome]:
        """A group written on ``conn`` (the writer process's), errors as the thread's."""
        try:
            return self._apply(conn, ops)
        except sqlite3.DatabaseError as exc:
            raise self._db_error(exc) from exc

    def _write_inline(self, op: Commit | Job) -> Outcome:
        """Commit ``op`` on this thread; ``(False, None)`` if the connection's thread is
        busy or another connection holds the write lock: the loop must not wait for it,
        so the queued path waits instead."""
        conn = self._conn
        if conn is None or self._hops:
            return False, None
        self._check_file()
        try:
            if not self._fails_fast:  # (the connection's own thread set its timeout last)
                conn.execute("PRAGMA busy_timeout = 0")
                self._fails_fast = True
            conn.execute("BEGIN IMMEDIATE")
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

    def _apply(self, conn: sqlite3.Connection, ops: list[Commit | Job], *,
               begun: bool = False) -> list[Outcome]:
        """One IMMEDIATE transaction for a whole group. Fast path: no savepoints. If an op
        raises, the group is rolled back and written again with one savepoint per op, so
        only the failing op fails (the others are still committed together)."""
        try:
            return self._apply_group(conn, ops, isolate=False, begun=begun)
        except Exception:
            if len(ops) == 1:
                raise
            return self._apply_group(conn, ops, isolate=True)

    def _apply_group(self, conn: sqlite3.Connection, ops: list[Commit | Job], *,
                     isolate: bool, begun: bool = False) -> list[Outcome]:
        """``begun``: the caller has already opened the IMMEDIATE transaction."""
        results: list[Outcome] = []
        if not begun:
            conn.execute("BEGIN IMMEDIATE")
        try:
            if not isolate:
                results = self._apply_ops(conn, ops)
            else:
                results = [self._isolated(conn, op) for op in ops]
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results

    def _isolated(self, conn: sqlite3.Connection, op: Commit | Job) -> Outcome:
        """One operation in a savepoint of its own: its failure is its outcome alone."""
        conn.execute("SAVEPOINT op")
        try:
            [outcome] = self._apply_ops(conn, [op])
        except Exception as exc:
            if not conn.in_transaction:
                # SQLite rolled the whole transaction back itself (disk full, I/O error):
                # nothing of the group is written; report the real error
                raise
            conn.execute("ROLLBACK TO op")
            if isinstance(exc, sqlite3.DatabaseError):
                exc = self._db_error(exc)
            outcome = (False, exc)
        conn.execute("RELEASE op")
        return outcome

    def _apply_ops(self, conn: sqlite3.Connection, ops: list[Commit | Job]) -> list[Outcome]:
        """The operations in order; each stretch of journal commits between two programs is
        fenced with one read and written together (``_Statements.commit``)."""
        results: list[Outcome] = []
        stretch: list[Commit] = []
        for op in ops:
            if isinstance(op, Commit):
                stretch.append(op)
                continue
            if stretch:
                results += self._commit_fenced(conn, stretch)
                stretch = []
            results.append((True, self._run(conn, op)))
        if stretch:
            results += self._commit_fenced(conn, stretch)
        return results

    def _commit_fenced(self, conn: sqlite3.Connection, commits: list[Commit]) -> list[Outcome]:
        """Commits whose drive still holds its lease generation are written; the others
        are answered ``fenced`` and write nothing."""
        fenced_ids = [c.run_id for c in commits if c.generation is not None]
        held = self.sql.generations(conn, fenced_ids) if fenced_ids else {}
        results: list[Outcome] = []
        passed: list[Commit] = []
        for change in commits:
            found = held.get(change.run_id)
            if change.generation is not None and (found is None or found[0] != change.generation):
                results.append((False, fenced(change.run_id)))
            else:
                results.append((True, None))
                passed.append(change)
        if passed:
            self.sql.commit(conn, passed, {run_id: last for run_id, (_, last) in held.items()})
        return results


class SqliteStore(CoreStore):
    """The embedded default store. ``synchronous`` is ``FULL`` (survives power loss) or
    ``NORMAL`` (survives a killed process)."""

    backend: SqliteBackend

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout: float = 5.0) -> None:
        super().__init__(SqliteBackend(path, synchronous=synchronous, busy_timeout=busy_timeout))
        self.path = path
        self.url = f"sqlite:///{path}"

    async def start_process_writer(self) -> bool:
        """Start the writer process now (ADR 0050): a long-lived engine that expects runs
        to write at once pays its start before them. Otherwise it starts once writers at
        once have shared 32 groups. False where there is none (read-only, switched off
        with ``LASHFLOW_SQLITE_WRITER=thread``, or it could not start)."""
        return await self.backend.start_process_writer()

    @property
    def writer_pid(self) -> int | None:
        """The writer process's id while there is one (its CPU is not the caller's)."""
        return self.backend.writer_pid
