"""PostgreSQL's dialect of the store, on asyncpg: a connection pool, SKIP LOCKED claims,
a group commit of one statement. What the store decides is in ``core`` and ``programs``;
this module brings PostgreSQL's SQL for each statement the programs name.

Same semantics and JSON encodings as SQLite, so any number of workers on any machines
can share runs. Tables are prefixed ``lashflow_`` so they can live in a shared
database; the schema is the first one on the connection's ``search_path`` (put
``?search_path=myschema`` in the URL to choose one). ``?pool_size=N`` sets the pool's
maximum size and ``?statement_cache_size=0`` suits pgbouncer; every other URL parameter
goes to asyncpg / the server unchanged.

Round trips are what a step costs here, so hot paths are single statements (claim,
renew, completion rows) and a group commit is ONE statement whatever the number of runs
in the group (see ``_GROUP_STATEMENT``); ADR 0006 says why asyncpg. Only journal
commits are grouped: any other write is its own statement or transaction.

Idle workers sleep in ``wait_for_work`` until a ``NOTIFY`` on the schema's channel (sent
by the statement that made a run claimable, so it arrives only once that is committed)
or their poll interval passes (``pg_wakeups``).
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from ..errors import DbError, NoDatabase
from ..states import ACTIVE, KEPT_PAUSED, RunStatus
from . import events
from .base import UNCHECKED_ROWS, AttemptRecord, Claimed, Commit, RunQuery, RunRecord
from .core import CoreStore, Job
from .group_commit import Outcome
from .leases import SESSION_MARK, holds_session, owner_is_dead
from .pg_wakeups import LOCK_CLASS, WorkListener, channel_for
from .postgres_queues import MIGRATION as QUEUES_MIGRATION
from .postgres_queues import MIGRATION_9 as QUEUE_ORDER_MIGRATION
from .postgres_queues import QueueStatements
from .postgres_ratelimits import MIGRATION as RATE_LIMITS_MIGRATION
from .postgres_ratelimits import RateLimitStatements
from .postgres_schedules import MIGRATION as SCHEDULES_MIGRATION
from .postgres_take import MIGRATION_11 as TAKE_MIGRATION
from .postgres_take import TakeStatements
from .postgres_schedules import ScheduleStatements
from .programs import COMPLETION_COLUMNS, WAKEABLE, fenced
from .rows import QUEUE_RUN_COLUMNS, run_queue
from .queries import PARKED_WAITS, RUNS_BY_STATUS, SIGNALS_OF_RUN, SUMMARY_COLUMNS, count_sql, page_sql
from .rows import RUN_COLUMNS, STEP_READ_COLUMNS, dumps, encode_step

_C = 'COLLATE "C"'  # byte order for keys, as SQLite compares them

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        f"CREATE TABLE IF NOT EXISTS lashflow_sources (hash TEXT {_C} PRIMARY KEY, text BYTEA NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS lashflow_runs (
            run_id TEXT {_C} PRIMARY KEY, parent_run_id TEXT {_C}, process TEXT,
            source_hash TEXT NOT NULL, input TEXT NOT NULL, input_hash TEXT NOT NULL,
            status TEXT NOT NULL, result TEXT, error TEXT, waiting TEXT,
            created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
            lease_owner TEXT {_C}, lease_expires DOUBLE PRECISION NOT NULL DEFAULT 0,
            generation BIGINT NOT NULL DEFAULT 0, cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
            wake_at DOUBLE PRECISION, meta TEXT)""",
        "CREATE INDEX IF NOT EXISTS lashflow_runs_by_status ON lashflow_runs (status, created_at)",
        "CREATE INDEX IF NOT EXISTS lashflow_runs_by_wake ON lashflow_runs (wake_at) "
        "WHERE wake_at IS NOT NULL",
        f"""CREATE TABLE IF NOT EXISTS lashflow_steps (
            run_id TEXT {_C} NOT NULL, step_key TEXT {_C} NOT NULL, seq BIGINT NOT NULL,
            kind TEXT NOT NULL, tool TEXT, args_hash TEXT, status TEXT NOT NULL, outcome TEXT,
            blob TEXT {_C}, detail TEXT, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, step_key))""",
        f"""CREATE TABLE IF NOT EXISTS lashflow_attempts (
            id BIGINT GENERATED ALWAYS AS IDENTITY, run_id TEXT {_C} NOT NULL,
            step_key TEXT {_C} NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL,
            code TEXT, message TEXT, detail TEXT, started_at DOUBLE PRECISION,
            finished_at DOUBLE PRECISION, PRIMARY KEY (run_id, step_key, attempt))""",
        "CREATE INDEX IF NOT EXISTS lashflow_attempts_in_order ON lashflow_attempts (run_id, id)",
        f"""CREATE TABLE IF NOT EXISTS lashflow_completions (
            run_id TEXT {_C} NOT NULL, step_key TEXT {_C} NOT NULL,
            waiting BOOLEAN NOT NULL DEFAULT FALSE, deadline_at DOUBLE PRECISION,
            on_timeout TEXT, on_cancel TEXT, module TEXT, tool TEXT, resolution TEXT,
            PRIMARY KEY (run_id, step_key))""",
        f"""CREATE TABLE IF NOT EXISTS lashflow_signals (
            run_id TEXT {_C} NOT NULL, name TEXT {_C} NOT NULL, ordinal INTEGER NOT NULL,
            payload TEXT, PRIMARY KEY (run_id, name, ordinal))""",
        f"CREATE TABLE IF NOT EXISTS lashflow_blobs (hash TEXT {_C} PRIMARY KEY, data TEXT NOT NULL)",
    ],
    2: [],  # SQLite's attempt folding (ADR 0010); nothing changes here
    # Version 3: the run list pages newest first by (created_at, run_id), filtered by
    # status, process or parent, each an index range scan (lashflow.store.queries).
    3: [
        "DROP INDEX IF EXISTS lashflow_runs_by_status",
        f"CREATE INDEX IF NOT EXISTS lashflow_runs_by_created ON lashflow_runs "
        f"(created_at, run_id {_C})",
        f"CREATE INDEX IF NOT EXISTS lashflow_runs_by_status_created ON lashflow_runs "
        f"(status, created_at, run_id {_C})",
        f"CREATE INDEX IF NOT EXISTS lashflow_runs_by_process_created ON lashflow_runs "
        f"(process, created_at, run_id {_C})",
        f"CREATE INDEX IF NOT EXISTS lashflow_runs_by_parent ON lashflow_runs "
        f"(parent_run_id {_C}, created_at, run_id {_C})",
    ],
    # Version 4: a signal sent by a run's `signal_run` step names that step (``sender``),
    # so a sender resumed after a crash cannot deliver it twice.
    4: [
        f"ALTER TABLE lashflow_signals ADD COLUMN IF NOT EXISTS sender TEXT {_C}",
        "CREATE UNIQUE INDEX IF NOT EXISTS lashflow_signals_by_sender ON lashflow_signals "
        "(run_id, name, sender) WHERE sender IS NOT NULL",
    ],
    # Version 5: deployed versions of each process (``lashflow deploy``, ADR 0026).
    5: [
        f"""CREATE TABLE IF NOT EXISTS lashflow_versions (
            process TEXT {_C} NOT NULL, version INTEGER NOT NULL, source_hash TEXT NOT NULL,
            content_hash TEXT NOT NULL, tools TEXT NOT NULL,
            deployed_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (process, version))""",
    ],
    # Version 6: schedules (lashflow.store.schedules).
    6: SCHEDULES_MIGRATION,
    # Version 7: each run's event log (lashflow.store.events, ADR 0033). ``tx`` (the
    # writing transaction) orders the feed of every run: ids are taken before commit, so
    # they alone are not in commit order.
    7: [
        f"""CREATE TABLE IF NOT EXISTS lashflow_events (
            id BIGSERIAL PRIMARY KEY, tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
            run_id TEXT {_C} NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
            data TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, UNIQUE (run_id, seq))""",
        "CREATE INDEX IF NOT EXISTS lashflow_events_by_tx ON lashflow_events (tx, id)",
    ],
    # Version 8: queues, their keys and token buckets; a run's queue, key and priority.
    8: QUEUES_MIGRATION,
    # Version 9: a queued run's fairness tag and the index of a queue's start order (ADR 0037).
    9: QUEUE_ORDER_MIGRATION,
    10: RATE_LIMITS_MIGRATION,  # tools' rate limits and global concurrency (ADR 0036)
    11: TAKE_MIGRATION,  # a worker's queued turn in one statement (ADR 0043)
}

# The events of a group's changes that passed their fence, each the run's next offset:
# the run rows are locked, so the run's last offset cannot move under the statement (a
# race with a writer that held the lock when the statement began fails on the unique
# offset and the group is written again in a transaction, see ``_apply``).
_EVENTS_INSERT = """
    INSERT INTO lashflow_events (run_id, seq, kind, data, at)
    SELECT e.run_id, COALESCE((SELECT MAX(x.seq) FROM lashflow_events x
                               WHERE x.run_id = e.run_id), 0)
               + row_number() OVER (PARTITION BY e.run_id ORDER BY e.ord),
           e.kind, e.data, e.at
    FROM unnest(${0}::int[], ${1}::text[], ${2}::text[], ${3}::text[], ${4}::float8[])
         WITH ORDINALITY AS e(idx, run_id, kind, data, at, ord)
    WHERE e.idx IN ({ok})"""
_EVENTS_FEED = """
    SELECT e.run_id, e.seq, e.kind, e.data, e.at, e.tx::text || '.' || e.id::text
    FROM lashflow_events e {join}
    WHERE (e.tx, e.id) > ($1::text::xid8, $2::bigint) {where}
    ORDER BY e.tx, e.id LIMIT $3"""

# Errors of the driver, the server or the network: all become one-line DbErrors.
_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)
_RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _redacted(url: str) -> str:
    """The URL as shown in messages: never the password."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:
        return "<unparsable database URL>"


_OUR_OPTIONS = ("pool_size", "statement_cache_size")  # taken out of the URL, not asyncpg's


def _split_url(url: str) -> tuple[str, dict[str, int]]:
    """(DSN for asyncpg, our options). ``pool_size`` (default 10) bounds the pool;
    ``statement_cache_size=0`` is for transaction-pooling proxies such as pgbouncer."""
    try:
        parts = urlsplit(url)
        if "," not in parts.netloc:  # one host (asyncpg also takes a list of them)
            parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise DbError(f"bad database URL {_redacted(url)}: {_one_line(exc)}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise DbError(f"bad database URL {_redacted(url)}: expected postgresql://user@host:port/db")
    options = {"pool_size": 10}
    rest = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in _OUR_OPTIONS:
            rest.append((key, value))
        elif not value.isdigit() or (key == "pool_size" and int(value) < 1):
            raise DbError(f"bad database URL {_redacted(url)}: {key} must be a "
                          f"{'positive' if key == 'pool_size' else 'non-negative'} integer")
        else:
            options[key] = int(value)
    return urlunsplit(parts._replace(query=urlencode(rest))), options


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool reset hook: our connections keep no session state (locks are per transaction),
    so skip asyncpg's default reset query, one round trip per release."""


_STEP_COLUMNS = ("run_id, step_key, seq, kind, tool, args_hash, status, outcome, blob, detail, "
                 "created_at, updated_at")
# A step written again (its outcome arrived) keeps its identity, place and creation time.
_STEP_UPSERT = ("ON CONFLICT (run_id, step_key) DO UPDATE SET status = EXCLUDED.status, "
                "outcome = EXCLUDED.outcome, blob = EXCLUDED.blob, detail = EXCLUDED.detail, "
                "updated_at = EXCLUDED.updated_at")
_ATTEMPT_COLUMNS = ("run_id, step_key, attempt, status, code, message, detail, started_at, "
                    "finished_at")
_ATTEMPT_UPSERT = ("ON CONFLICT (run_id, step_key, attempt) DO UPDATE SET status = "
                   "EXCLUDED.status, code = EXCLUDED.code, message = EXCLUDED.message, "
                   "detail = EXCLUDED.detail, finished_at = EXCLUDED.finished_at")
# A run that parks keeps an earlier wake time left on its row by ``wake`` while it was
# running (a completion or signal that raced the park); LEAST ignores NULLs.
def _json_field(column: str, key: str, as_int: bool) -> str:
    """One key of a JSON text column (read as ``json``: the text is never reordered)."""
    value = f"({column}::json ->> '{key}')"
    return f"{value}::bigint" if as_int else value


# A run paused while its drive was under way stays paused (ADR 0032).
_KEPT = "(" + ", ".join(f"'{status}'" for status in KEPT_PAUSED) + ")"
_WAKE_AT = "CASE WHEN {new}.status = 'waiting' THEN LEAST(r.wake_at, {new}.wake_at) ELSE {new}.wake_at END"


@dataclass(slots=True)
class _GroupRows:
    """A group's rows per table, each tagged with the index of its ``Commit``."""

    blobs: list[tuple[Any, ...]] = field(default_factory=list)
    steps: list[tuple[Any, ...]] = field(default_factory=list)
    attempts: list[tuple[Any, ...]] = field(default_factory=list)
    runs: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)

    @classmethod
    def of(cls, changes: list[Commit]) -> "_GroupRows":
        rows = cls()
        for index, change in enumerate(changes):
            for step in change.steps:
                row = encode_step(step)
                if row.blob is not None:
                    rows.blobs.append((index, row.blob, row.blob_data))
                rows.steps.append((index, step.run_id, step.step_key, step.seq, step.kind, step.tool,
                                   step.args_hash, step.status, row.outcome, row.blob, row.detail,
                                   float(step.created_at), float(step.updated_at)))
            rows.attempts += [(index, *_attempt_row(attempt)) for attempt in change.attempts]
            if change.run is not None:
                run = change.run
                rows.runs.append((index, change.run_id, run.status, dumps(run.result),
                                  dumps(run.error), dumps(run.waiting), _float_or_none(run.wake_at),
                                  run.release_lease, _float_or_none(run.updated_at)))
            for kind, data, at in events.of_commit(change):
                rows.events.append((index, change.run_id, kind, data, float(at)))
        return rows

    def writes_a_row_twice(self) -> bool:
        """One statement cannot write a row twice (and could not order the writes)."""
        return (_has_duplicates(row[1:3] for row in self.steps)
                or _has_duplicates(row[1:4] for row in self.attempts)
                or _has_duplicates(row[1] for row in self.runs)
                or _has_duplicates(row[1] for row in self.blobs))


def _has_duplicates(keys: Any) -> bool:
    seen: set[Any] = set()
    for key in keys:
        if key in seen:
            return True
        seen.add(key)
    return False


def _attempt_row(a: AttemptRecord) -> tuple[Any, ...]:
    """An attempt as the columns ``_ATTEMPT_COLUMNS`` name."""
    return (a.run_id, a.step_key, a.attempt, a.status, a.code, a.message, dumps(a.detail),
            _float_or_none(a.started_at), _float_or_none(a.finished_at))


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows to per-column lists (the arrays ``unnest`` takes), even when there are none."""
    return [list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)]


class _Statements(QueueStatements, RateLimitStatements, ScheduleStatements, TakeStatements):
    """PostgreSQL's answer to each statement the store's programs name
    (``programs.STATEMENTS``). Every method takes the connection first. Hot paths are one
    statement each; ``channel`` is the schema's NOTIFY channel, known once open."""

    def __init__(self) -> None:
        self.channel = ""

    # -- the schema ------------------------------------------------------------------------
    async def create_meta(self, conn: asyncpg.Connection) -> None:
        await conn.execute(f"CREATE TABLE IF NOT EXISTS lashflow_meta "
                           f"(key TEXT {_C} PRIMARY KEY, value BYTEA NOT NULL)")

    async def schema_version(self, conn: asyncpg.Connection) -> Any:
        return await conn.fetchval("SELECT value FROM lashflow_meta WHERE key = 'schema_version'")

    async def migrate(self, conn: asyncpg.Connection, statement: str) -> None:
        await conn.execute(statement)

    async def mark_unchecked(self, conn: asyncpg.Connection) -> None:
        await conn.execute("INSERT INTO lashflow_meta (key, value) VALUES ($1, '1') "
                           "ON CONFLICT (key) DO NOTHING", UNCHECKED_ROWS)

    async def set_schema_version(self, conn: asyncpg.Connection, version: int) -> None:
        await conn.execute("INSERT INTO lashflow_meta (key, value) VALUES ('schema_version', $1) "
                           "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                           str(version).encode())

    async def ensure_secret(self, conn: asyncpg.Connection, secret: bytes) -> None:
        await conn.execute("INSERT INTO lashflow_meta (key, value) VALUES ('secret', $1) "
                           "ON CONFLICT (key) DO NOTHING", secret)

    async def unchecked_mark(self, conn: asyncpg.Connection) -> bool:
        return await conn.fetchval("SELECT 1 FROM lashflow_meta WHERE key = $1",
                                   UNCHECKED_ROWS) is not None

    async def secret(self, conn: asyncpg.Connection) -> Any:
        return await conn.fetchval("SELECT value FROM lashflow_meta WHERE key = 'secret'")

    async def setting(self, conn: asyncpg.Connection, key: str) -> str | None:
        value = await conn.fetchval("SELECT value FROM lashflow_meta WHERE key = $1", key)
        return None if value is None else bytes(value).decode()

    async def put_setting(self, conn: asyncpg.Connection, key: str, value: str) -> None:
        await conn.execute("INSERT INTO lashflow_meta (key, value) VALUES ($1, $2) "
                           "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                           key, value.encode())

    async def put_source(self, conn: asyncpg.Connection, source_hash: str, text: str) -> str:
        # BYTEA, not TEXT: a source file may hold characters (NUL) a TEXT column refuses.
        stored = await conn.fetchval(
            "WITH new AS (INSERT INTO lashflow_sources (hash, text) VALUES ($1, $2) "
            "ON CONFLICT (hash) DO NOTHING RETURNING text) "
            "SELECT text FROM new UNION ALL SELECT text FROM lashflow_sources WHERE hash = $1",
            source_hash, text.encode())
        return text if stored is None else bytes(stored).decode()

    async def get_source(self, conn: asyncpg.Connection, source_hash: str) -> str | None:
        value = await conn.fetchval("SELECT text FROM lashflow_sources WHERE hash = $1", source_hash)
        return None if value is None else bytes(value).decode()

    # -- runs --------------------------------------------------------------------------------
    async def insert_run(self, conn: asyncpg.Connection, run: RunRecord) -> bool:
        # A new queued run wakes the idle workers (the NOTIFY goes out with the commit);
        # its first event goes in with it (one statement: atomic without a transaction).
        kind, data, at = events.created(run)
        created = await conn.fetchrow(
            f"WITH r AS (INSERT INTO lashflow_runs ({RUN_COLUMNS}, {QUEUE_RUN_COLUMNS}) VALUES "
            f"($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$23,$24,$25) "
            f"ON CONFLICT (run_id) DO NOTHING "
            f"RETURNING run_id, status), "
            f"e AS (INSERT INTO lashflow_events (run_id, seq, kind, data, at) "
            f"SELECT run_id, 1, $20, $21, $22 FROM r) "
            f"SELECT 1, CASE WHEN status = 'queued' THEN pg_notify($19, '') END FROM r",
            run.run_id, run.parent_run_id, run.process, run.source_hash, dumps(run.input),
            run.input_hash, run.status, dumps(run.result), dumps(run.error), dumps(run.waiting),
            float(run.created_at), float(run.updated_at), run.lease_owner,
            float(run.lease_expires), run.generation, bool(run.cancel_requested),
            _float_or_none(run.wake_at), dumps(run.meta), self.channel, kind, data, float(at),
            *run_queue(run))
        return created is not None

    async def append_events(self, conn: asyncpg.Connection,
                            rows: list[events.RunEventRow]) -> None:
        """Each row its run's next offset, in one statement; in a transaction that holds
        the runs' row locks."""
        if rows:
            await conn.execute(_EVENTS_INSERT.format(1, 2, 3, 4, 5, ok="0"), [0] * len(rows),
                               *_columns(rows, 4))

    async def run_events(self, conn: asyncpg.Connection, run_id: str, after: int,
                         limit: int) -> list[Any]:
        return await conn.fetch(
            "SELECT run_id, seq, kind, data, at, tx::text || '.' || id::text FROM "
            "lashflow_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            run_id, after, limit)

    async def feed(self, conn: asyncpg.Connection, after: str, process: str | None,
                   limit: int, settled: bool) -> list[Any]:
        """``settled``: only events of transactions older than every one still open: a
        transaction that commits later has a later ``tx`` than anything handed out, so a
        cursor never skips it."""
        tx, ident = events.pg_cursor(after)
        horizon = "AND e.tx < pg_snapshot_xmin(pg_current_snapshot())" if settled else ""
        if process is None:
            return await conn.fetch(_EVENTS_FEED.format(join="", where=horizon), str(tx),
                                    ident, limit)
        return await conn.fetch(
            _EVENTS_FEED.format(join="JOIN lashflow_runs r ON r.run_id = e.run_id",
                                where=f"{horizon} AND r.process = $4"),
            str(tx), ident, limit, process)

    async def last_event(self, conn: asyncpg.Connection, run_id: str) -> int:
        return int(await conn.fetchval("SELECT COALESCE(MAX(seq), 0) FROM lashflow_events "
                                       "WHERE run_id = $1", run_id))

    async def feed_head(self, conn: asyncpg.Connection) -> str:
        return f"{await conn.fetchval('SELECT pg_snapshot_xmin(pg_current_snapshot())')}.0"

    async def run_row(self, conn: asyncpg.Connection, run_id: str) -> Any:
        return await conn.fetchrow(f"SELECT {RUN_COLUMNS} FROM lashflow_runs WHERE run_id = $1",
                                   run_id)

    async def run_rows(self, conn: asyncpg.Connection, status: str | None,
                       limit: int | None) -> list[Any]:
        sql = f"SELECT {RUN_COLUMNS} FROM lashflow_runs"
        params: list[Any] = []
        if status is not None:
            params.append(status)
            sql += f" WHERE status = ${len(params)}"
        sql += " ORDER BY created_at, run_id"
        if limit is not None:
            params.append(limit)
            sql += f" LIMIT ${len(params)}"
        return await conn.fetch(sql, *params)

    async def runs_by_status(self, conn: asyncpg.Connection) -> list[Any]:
        return await conn.fetch(RUNS_BY_STATUS.format(table="lashflow_runs"))

    async def parked_waits(self, conn: asyncpg.Connection) -> list[Any]:
        return await conn.fetch(PARKED_WAITS.format(table="lashflow_runs"))

    async def run_page(self, conn: asyncpg.Connection, query: RunQuery,
                       columns: str = SUMMARY_COLUMNS) -> list[Any]:
        sql, params = page_sql(query, "lashflow_runs", lambda n: f"${n}", _json_field, columns)
        return await conn.fetch(sql, *params)

    async def run_count(self, conn: asyncpg.Connection, query: RunQuery) -> int:
        sql, params = count_sql(query, "lashflow_runs", lambda n: f"${n}", _json_field)
        return int(await conn.fetchval(sql, *params))

    async def journal_steps(self, conn: asyncpg.Connection, run_id: str) -> list[Any]:
        return await conn.fetch(
            f"SELECT {STEP_READ_COLUMNS} FROM lashflow_steps s LEFT JOIN lashflow_blobs b "
            "ON b.hash = s.blob WHERE s.run_id = $1 ORDER BY s.seq", run_id)

    async def journal_attempts(self, conn: asyncpg.Connection, run_id: str) -> list[Any]:
        return await conn.fetch(
            "SELECT step_key, attempt, status, code, message, detail, started_at, finished_at "
            "FROM lashflow_attempts WHERE run_id = $1 ORDER BY id", run_id)

    async def run_page_records(self, conn: asyncpg.Connection, query: RunQuery) -> list[Any]:
        sql, params = page_sql(query, "lashflow_runs", lambda n: f"${n}", _json_field,
                               RUN_COLUMNS)
        return await conn.fetch(sql, *params)

    async def journal_steps_of(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return await conn.fetch(
            f"SELECT {STEP_READ_COLUMNS}, s.run_id FROM lashflow_steps s LEFT JOIN "
            "lashflow_blobs b ON b.hash = s.blob WHERE s.run_id = ANY($1::text[]) "
            "ORDER BY s.run_id, s.seq", run_ids)

    async def journal_attempts_of(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return await conn.fetch(
            "SELECT step_key, attempt, status, code, message, detail, started_at, finished_at, "
            "run_id FROM lashflow_attempts WHERE run_id = ANY($1::text[]) ORDER BY run_id, id",
            run_ids)

    async def children(self, conn: asyncpg.Connection, run_id: str) -> list[Any]:
        return await conn.fetch(f"SELECT {SUMMARY_COLUMNS} FROM lashflow_runs WHERE "
                                "parent_run_id = $1 ORDER BY created_at, run_id", run_id)

    async def signals_of(self, conn: asyncpg.Connection, run_id: str) -> list[Any]:
        return await conn.fetch(
            SIGNALS_OF_RUN.format(table="lashflow_signals").replace("?", "$1"), run_id)

    async def stale_runs(self, conn: asyncpg.Connection, wanted: list[str], before: float,
                         limit: int) -> list[str]:
        rows = await conn.fetch(
            "SELECT run_id FROM lashflow_runs WHERE status = ANY($1::text[]) AND updated_at < $2 "
            "ORDER BY updated_at, run_id LIMIT $3", wanted, float(before), limit)
        return [row[0] for row in rows]

    async def settled_among(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[str]:
        return [row[0] for row in await conn.fetch(
            "SELECT run_id FROM lashflow_runs WHERE run_id = ANY($1::text[]) AND status IN "
            "('finished', 'failed', 'cancelled') FOR UPDATE", run_ids)]

    async def delete_runs(self, conn: asyncpg.Connection, run_ids: list[str]) -> None:
        for table in ("steps", "attempts", "completions", "signals", "events", "runs"):
            await conn.execute(f"DELETE FROM lashflow_{table} WHERE run_id = ANY($1::text[])",
                               run_ids)

    async def delete_unreferenced_blobs(self, conn: asyncpg.Connection, limit: int) -> int:
        return int(await conn.fetchval(
            "WITH gone AS (DELETE FROM lashflow_blobs WHERE hash IN (SELECT b.hash FROM "
            "lashflow_blobs b WHERE NOT EXISTS (SELECT 1 FROM lashflow_steps s WHERE "
            "s.blob = b.hash) LIMIT $1) RETURNING 1) SELECT count(*) FROM gone", limit) or 0)

    async def cancel_requested(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[str]:
        rows = await conn.fetch("SELECT run_id FROM lashflow_runs WHERE cancel_requested "
                                "AND run_id = ANY($1::text[])", run_ids)
        return [row[0] for row in rows]

    async def stop_requested(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return list(await conn.fetch(
            "SELECT run_id, cancel_requested, status FROM lashflow_runs WHERE "
            "(cancel_requested OR status = 'paused') AND run_id = ANY($1::text[])", run_ids))

    async def runs_for_update(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return list(await conn.fetch(
            "SELECT run_id, status, meta FROM lashflow_runs WHERE run_id = ANY($1::text[]) "
            "ORDER BY run_id FOR UPDATE", run_ids))

    async def request_cancels(self, conn: asyncpg.Connection,
                              changes: list[tuple[str, str, str]], now: float) -> None:
        await conn.execute(
            "UPDATE lashflow_runs r SET status = u.status, meta = u.meta, cancel_requested = "
            "TRUE, updated_at = $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS "
            "u(run_id, status, meta) WHERE r.run_id = u.run_id", [c[0] for c in changes],
            [c[1] for c in changes], [c[2] for c in changes], now)
        await conn.execute("SELECT pg_notify($1, '')", self.channel)  # claimable now

    async def set_status_meta(self, conn: asyncpg.Connection,
                              changes: list[tuple[str, str, str]], now: float) -> None:
        await conn.execute(
            "UPDATE lashflow_runs r SET status = u.status, meta = u.meta, updated_at = $4 "
            "FROM unnest($1::text[], $2::text[], $3::text[]) AS u(run_id, status, meta) "
            "WHERE r.run_id = u.run_id", [c[0] for c in changes], [c[1] for c in changes],
            [c[2] for c in changes], now)
        if any(status == RunStatus.QUEUED for _, status, _ in changes):
            await conn.execute("SELECT pg_notify($1, '')", self.channel)  # claimable now

    async def unsettled_leases(self, conn: asyncpg.Connection, now: float) -> list[Any]:
        # Only owners on this host (by pid) or with a session lock can be proven dead: the
        # others need not leave the server at all. An owner whose session is gone is shown
        # as no owner (free), judged here while its rows are read.
        return await conn.fetch(
            "SELECT run_id, CASE WHEN lease_owner LIKE $3 AND " + _SESSION_FREE.format(
                owner="lease_owner") + " THEN NULL ELSE lease_owner END, lease_expires "
            "FROM lashflow_runs WHERE status IN ('running', 'queued') AND queue IS NULL AND "
            "(status = 'running' OR generation > 0 OR wake_at IS NULL OR wake_at <= $1) AND "
            "(lease_owner IS NULL "
            "OR lease_expires < $1 OR lease_owner LIKE $2 OR lease_owner LIKE $3) "
            "ORDER BY created_at, run_id", now, _local_owners(), _SESSION_OWNERS)

    # The common case in one statement: a row locked by another transaction is skipped,
    # never waited for, so many workers can claim at once without queueing on each other.
    # Its WHERE is ``may_claim`` without the dead-owner case (which needs this host).
    _CLAIM_FREE = """
        WITH target AS (
            SELECT run_id, lease_owner AS taken_from FROM lashflow_runs
            WHERE run_id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires < $3)
              AND status NOT IN ('finished', 'failed', 'cancelled', 'paused') AND queue IS NULL
            FOR UPDATE SKIP LOCKED)
        UPDATE lashflow_runs r SET lease_owner = $2, lease_expires = $4,
            generation = r.generation + 1
        FROM target WHERE r.run_id = target.run_id RETURNING """ + ", ".join(
        "r." + column.strip() for column in RUN_COLUMNS.split(",")) + ", target.taken_from"
    # Take it only if nobody moved it since it was judged (compare and swap); the lease
    # is judged again, as it stands now, unless a dead holder's live lease let us in.
    _CLAIM_SWAP = """
        UPDATE lashflow_runs SET lease_owner = $2, lease_expires = $4, generation = generation + 1
        WHERE run_id = $1 AND generation = $5 AND lease_owner IS NOT DISTINCT FROM $6
          AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires < $3 OR $7::boolean)
          AND status NOT IN ('finished', 'failed', 'cancelled', 'paused')
        RETURNING """ + RUN_COLUMNS

    async def claim_free(self, conn: asyncpg.Connection, run_id: str, owner: str, now: float,
                         expires: float) -> tuple[Any, str | None] | None:
        row = await conn.fetchrow(self._CLAIM_FREE, run_id, owner, now, expires)
        return None if row is None else (row, row["taken_from"])

    async def lease_of(self, conn: asyncpg.Connection, run_id: str) -> Any:
        """Read without a lock: a row locked at that instant (its holder committing,
        another worker claiming) is judged as it was, and the swap says if it moved."""
        return await conn.fetchrow("SELECT lease_owner, lease_expires, generation, status, "
                                   "queue IS NOT NULL FROM lashflow_runs WHERE run_id = $1",
                                   run_id)

    async def session_gone(self, conn: asyncpg.Connection, holder: str) -> bool:
        """Has the server ended ``holder``'s session (its lock is free)? Asked outside a
        transaction, so the shared lock taken to find out is let go at once."""
        return bool(await conn.fetchval("SELECT " + _SESSION_FREE.format(owner="$1::text"),
                                        holder))

    async def claim_swap(self, conn: asyncpg.Connection, run_id: str, owner: str, now: float,
                         expires: float, generation: int, holder: str | None, dead: bool) -> Any:
        return await conn.fetchrow(self._CLAIM_SWAP, run_id, owner, now, expires, generation,
                                   holder, dead)

    async def renew(self, conn: asyncpg.Connection, run_id: str, owner: str, generation: int,
                    expires: float) -> bool:
        return await conn.fetchval(
            "UPDATE lashflow_runs SET lease_expires = $1 WHERE run_id = $2 AND lease_owner = $3 "
            "AND generation = $4 RETURNING 1", expires, run_id, owner, generation) is not None

    async def request_cancel(self, conn: asyncpg.Connection, run_id: str) -> None:
        await conn.execute("UPDATE lashflow_runs SET cancel_requested = TRUE WHERE run_id = $1",
                           run_id)

    async def due_runs(self, conn: asyncpg.Connection, now: float, limit: int) -> list[str]:
        rows = await conn.fetch(
            "SELECT run_id FROM lashflow_runs WHERE status = 'waiting' AND wake_at IS NOT NULL "
            "AND wake_at <= $1 AND queue IS NULL ORDER BY wake_at, run_id LIMIT $2", now, limit)
        return [row[0] for row in rows]

    # Also on a ``running`` run: it may be parking on what was just delivered, in a commit
    # the deliverer cannot see yet; the wake time left on the row survives that commit
    # (``_WAKE_AT``). A waiting run made due wakes the idle workers.
    MARK = ("UPDATE lashflow_runs SET wake_at = CASE WHEN wake_at IS NULL OR wake_at > $1 "
            "THEN $1 ELSE wake_at END WHERE run_id = $2 AND status = ANY($3::text[]) "
            "RETURNING CASE WHEN status = 'waiting' THEN pg_notify($4, '') END")

    async def wake(self, conn: asyncpg.Connection, run_id: str, at: float,
                   statuses: Sequence[str]) -> None:
        await conn.fetchval(self.MARK, float(at), run_id, list(statuses), self.channel)

    async def meta_for_update(self, conn: asyncpg.Connection, run_id: str) -> Any:
        # the JSON text, not jsonb: a jsonb round trip would reorder the keys SQLite keeps
        return await conn.fetchrow("SELECT meta FROM lashflow_runs WHERE run_id = $1 FOR UPDATE",
                                   run_id)

    async def set_meta(self, conn: asyncpg.Connection, run_id: str, meta: str) -> None:
        await conn.execute("UPDATE lashflow_runs SET meta = $1 WHERE run_id = $2", meta, run_id)

    async def versions_of(self, conn: asyncpg.Connection, process: str | None) -> list[Any]:
        sql = ("SELECT process, version, source_hash, content_hash, tools, deployed_at "
               "FROM lashflow_versions")
        if process is None:
            return list(await conn.fetch(sql + " ORDER BY process, version"))
        return list(await conn.fetch(sql + " WHERE process = $1 ORDER BY version", process))

    async def insert_version(self, conn: asyncpg.Connection, process: str, version: int,
                             source_hash: str, content_hash: str, tools: str, at: float) -> None:
        await conn.execute("INSERT INTO lashflow_versions (process, version, source_hash, "
                           "content_hash, tools, deployed_at) VALUES ($1, $2, $3, $4, $5, $6)",
                           process, version, source_hash, content_hash, tools, at)

    async def move_candidate(self, conn: asyncpg.Connection, run_id: str) -> Any:
        return await conn.fetchrow("SELECT source_hash, meta, status, lease_owner, lease_expires "
                                   "FROM lashflow_runs WHERE run_id = $1 FOR UPDATE", run_id)

    async def set_source(self, conn: asyncpg.Connection, run_id: str, source_hash: str,
                         meta: str, now: float) -> None:
        await conn.execute("UPDATE lashflow_runs SET source_hash = $2, meta = $3, updated_at = $4 "
                           "WHERE run_id = $1", run_id, source_hash, meta, now)

    async def reopen_candidates(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return list(await conn.fetch(
            "SELECT run_id, meta, status, lease_owner, lease_expires FROM lashflow_runs WHERE "
            "run_id = ANY($1::text[]) ORDER BY run_id FOR UPDATE", run_ids))

    async def requeue_runs(self, conn: asyncpg.Connection, changes: list[tuple[str, str]],
                           now: float) -> None:
        await conn.execute(
            "UPDATE lashflow_runs r SET status = 'queued', result = 'null', error = 'null', "
            "waiting = '[]', wake_at = NULL, cancel_requested = FALSE, lease_owner = NULL, "
            "lease_expires = 0, updated_at = $3, meta = u.meta FROM unnest($1::text[], "
            "$2::text[]) AS u(run_id, meta) WHERE r.run_id = u.run_id",
            *_columns(changes, 2), now)
        await conn.execute("SELECT pg_notify($1, '')", self.channel)  # they are queued

    async def forget_completions(self, conn: asyncpg.Connection,
                                 steps: list[tuple[str, str]]) -> None:
        await conn.execute("DELETE FROM lashflow_completions c USING unnest($1::text[], "
                           "$2::text[]) AS f(run_id, step_key) WHERE c.run_id = f.run_id AND "
                           "c.step_key = f.step_key", *_columns(steps, 2))

    async def put_attempts(self, conn: asyncpg.Connection,
                           attempts: Sequence[AttemptRecord]) -> None:
        """Attempt rows of their own, an existing one updated in place (in order)."""
        await conn.execute(
            f"INSERT INTO lashflow_attempts ({_ATTEMPT_COLUMNS}) SELECT a.run_id, a.step_key, "
            "a.attempt, a.status, a.code, a.message, a.detail, a.started_at, a.finished_at "
            "FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], "
            "$6::text[], $7::text[], $8::float8[], $9::float8[]) WITH ORDINALITY AS a(run_id, "
            "step_key, attempt, status, code, message, detail, started_at, finished_at, ord) "
            f"ORDER BY a.ord {_ATTEMPT_UPSERT}",
            *_columns([_attempt_row(a) for a in attempts], 9))

    # -- completions and signals -------------------------------------------------------------
    async def completion(self, conn: asyncpg.Connection, run_id: str, step_key: str) -> Any:
        return await conn.fetchrow(f"SELECT {COMPLETION_COLUMNS} FROM lashflow_completions "
                                   "WHERE run_id = $1 AND step_key = $2", run_id, step_key)

    async def open_wait(self, conn: asyncpg.Connection, row: dict[str, Any]) -> Any:
        # One statement: insert waiting, or fill the wait fields of a row not waiting yet.
        keep = "CASE WHEN c.waiting THEN c.{0} ELSE EXCLUDED.{0} END"
        fields = ("deadline_at", "on_timeout", "on_cancel", "module", "tool")
        return await conn.fetchrow(
            "INSERT INTO lashflow_completions AS c (run_id, step_key, waiting, deadline_at, "
            "on_timeout, on_cancel, module, tool) VALUES ($1, $2, TRUE, $3, $4, $5, $6, $7) "
            "ON CONFLICT (run_id, step_key) DO UPDATE SET waiting = TRUE, "
            + ", ".join(f"{name} = {keep.format(name)}" for name in fields)
            + f" RETURNING {COMPLETION_COLUMNS}",
            row["run_id"], row["step_key"], _float_or_none(row.get("deadline_at")),
            row.get("on_timeout"), row.get("on_cancel"), row.get("module"), row.get("tool"))

    async def open_waits(self, conn: asyncpg.Connection, run_id: str) -> list[Any]:
        return await conn.fetch(f"SELECT {COMPLETION_COLUMNS} FROM lashflow_completions "
                                "WHERE run_id = $1 AND waiting AND resolution IS NULL "
                                "ORDER BY step_key", run_id)

    async def touch_completion(self, conn: asyncpg.Connection, run_id: str, step_key: str) -> Any:
        # Insert-or-touch: the row exists, is locked by us and is its latest version, so
        # concurrent settlers line up and exactly one sees no resolution.
        return await conn.fetchrow(
            "INSERT INTO lashflow_completions AS c (run_id, step_key) VALUES ($1, $2) "
            "ON CONFLICT (run_id, step_key) DO UPDATE SET waiting = c.waiting "
            f"RETURNING {COMPLETION_COLUMNS}", run_id, step_key)

    async def resolve_completion(self, conn: asyncpg.Connection, run_id: str, step_key: str,
                                 resolution: str) -> None:
        await conn.execute("UPDATE lashflow_completions SET resolution = $1 WHERE run_id = $2 "
                           "AND step_key = $3", resolution, run_id, step_key)

    async def signal_by_sender(self, conn: asyncpg.Connection, run_id: str, name: str,
                               sender: str) -> int | None:
        return await conn.fetchval("SELECT ordinal FROM lashflow_signals WHERE run_id = $1 AND "
                                   "name = $2 AND sender = $3", run_id, name, sender)

    async def append_signal(self, conn: asyncpg.Connection, run_id: str, name: str, payload: str,
                            sender: str | None) -> int | None:
        # Next ordinal in one statement; a concurrent sender that took the same ordinal
        # makes ours a no-op (ON CONFLICT): None, and the program tries the one after.
        return await conn.fetchval(
            "INSERT INTO lashflow_signals (run_id, name, ordinal, payload, sender) "
            "SELECT $1::text, $2::text, COALESCE(MAX(ordinal), 0) + 1, $3::text, $4::text "
            "FROM lashflow_signals WHERE run_id = $1 AND name = $2 "
            "ON CONFLICT DO NOTHING RETURNING ordinal", run_id, name, payload, sender)

    async def signal(self, conn: asyncpg.Connection, run_id: str, name: str, ordinal: int) -> Any:
        return await conn.fetchrow("SELECT payload FROM lashflow_signals WHERE run_id = $1 AND "
                                   "name = $2 AND ordinal = $3", run_id, name, ordinal)


# True when no session holds ``owner``'s lock (ADR 0035). A shared lock: workers testing
# the same owner at once do not wait for each other; held to the end of the statement's
# transaction only.
_SESSION_FREE = ("pg_try_advisory_xact_lock_shared(" + str(LOCK_CLASS) +
                 ", hashtext({owner}))")
_SESSION_OWNERS = "%" + SESSION_MARK  # LIKE pattern of owners that hold a session lock


def _local_owners() -> str:
    """A LIKE pattern for lease owners on this host (the only ones provably dead)."""
    return _like_escape(socket.gethostname()) + ":%"


class PostgresBackend:
    """PostgreSQL's side of the store (``core.Backend``): a pool, the statements above,
    and a group commit that is one statement whatever the number of runs in the group."""

    groups_writes = False  # a write of its own costs a round trip, not an fsync to share
    pipelines = False  # one group at a time, on a pooled connection
    inline = None
    migrations = _MIGRATIONS

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self.label = _redacted(url)
        self.sql = _Statements()
        self._pool: asyncpg.Pool | None = None
        self.listener: WorkListener | None = None
        self.writers: Callable[[], int] = lambda: 0  # the core's count (unused here)

    @property
    def channel(self) -> str:
        return self.sql.channel

    # -- plumbing ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except _DB_ERRORS as exc:
            raise DbError(f"database error on {self.label}: {_one_line(exc)}") from None

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise DbError("the store is not open")
        return self._pool

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        with self._errors():
            return await self._require_pool().fetch(sql, *args)

    async def _run(self, conn: asyncpg.Connection, job: Job) -> Any:
        """Run a program to its end on ``conn``, answering each statement it asks for."""
        program = job()
        sql = self.sql
        answer = None
        while True:
            try:
                name, args = program.send(answer)
            except StopIteration as end:
                return end.value
            answer = await getattr(sql, name)(conn, *args)

    async def read(self, job: Job, *, scan: bool = False, snapshot: bool = False) -> Any:
        pool = self._require_pool()
        with self._errors():
            async with pool.acquire() as conn:
                if not snapshot:
                    return await self._run(conn, job)
                async with conn.transaction(readonly=True):
                    return await self._run(conn, job)

    async def write(self, job: Job, *, atomic: bool = True) -> Any:
        pool = self._require_pool()
        with self._errors():
            async with pool.acquire() as conn:
                if not atomic:
                    return await self._run(conn, job)
                async with conn.transaction():
                    return await self._run(conn, job)

    # -- lifetime ----------------------------------------------------------------------------
    async def open(self, create: bool, schema: Job | None) -> None:
        dsn, options = _split_url(self.url)
        size = options.pop("pool_size")
        extra: dict[str, Any] = {}
        if schema is None:  # read-only: every transaction of every session
            extra["server_settings"] = {"default_transaction_read_only": "on"}
        try:
            pool = await asyncpg.create_pool(
                dsn, min_size=1, max_size=size, timeout=self.connect_timeout,
                reset=_keep_session, **options, **extra)
        except (*_DB_ERRORS, ValueError) as exc:
            raise DbError(f"cannot open database {self.label}: {_one_line(exc)}") from None
        try:
            with self._errors():
                async with pool.acquire() as conn:
                    if not create and await conn.fetchval(
                            "SELECT to_regclass('lashflow_meta')") is None:
                        raise NoDatabase(f"no lashflow tables at {self.label} (in its "
                                         "search_path): nothing has run with it yet")
                    if schema is not None:
                        # the advisory lock keeps workers that open at the same moment
                        # from racing on CREATE TABLE
                        async with conn.transaction():
                            await conn.execute("SELECT pg_advisory_xact_lock(hashtext("
                                               "'lashflow_migrate:' || COALESCE(current_schema(), '')))")
                            await self._run(conn, schema)
                    self.sql.channel = channel_for(await conn.fetchval("SELECT current_schema()"))
        except BaseException:
            pool.terminate()
            raise
        self._pool = pool
        self.listener = WorkListener(dsn, options, self.channel, self.connect_timeout, self.label)

    async def close(self) -> None:
        if self.listener is not None:
            listener, self.listener = self.listener, None
            await listener.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), timeout=10)
            except (asyncio.TimeoutError, *_DB_ERRORS):
                pool.terminate()

    # -- group commit ------------------------------------------------------------------------
    def send_group(self, ops: list[Commit | Job]) -> None:
        """Never sent elsewhere: ``apply_group`` writes every group."""
        return None

    async def apply_group(self, ops: list[Commit | Job]) -> list[Outcome]:
        """One group transaction, retried when the server picked it as a deadlock or
        serialization victim (then nothing of it was written)."""
        changes = [op for op in ops if isinstance(op, Commit)]
        assert len(changes) == len(ops), "only journal commits are grouped here"
        pool = self._require_pool()
        for attempt in range(3):
            try:
                async with pool.acquire() as conn:
                    ok = await self._apply(conn, changes)
                return [(True, None) if index in ok else (False, fenced(change.run_id))
                        for index, change in enumerate(changes)]
            except _RETRYABLE as exc:
                if attempt == 2:
                    raise DbError(f"database error on {self.label}: {_one_line(exc)}") from None
            except _DB_ERRORS as exc:
                raise DbError(f"database error on {self.label}: {_one_line(exc)}") from None
        raise AssertionError("unreachable")

    async def _apply(self, conn: asyncpg.Connection, changes: list[Commit]) -> set[int]:
        """Write one group; the indexes of the changes that passed their fence. The usual
        group (each row written once) is ONE statement, so one round trip plus the
        server's commit; a group that writes a row twice (which must apply in order), or
        wakes another run, takes the statement-per-table transaction."""
        rows = _GroupRows.of(changes)
        if rows.writes_a_row_twice() or any(change.wake is not None for change in changes):
            return await self._apply_in_transaction(conn, changes, rows)
        try:
            return await self._apply_in_one_statement(conn, changes, rows)
        except asyncpg.UniqueViolationError:
            # another writer of one of these runs committed events while this statement
            # waited for its lock: nothing was written; the transaction reads afresh
            return await self._apply_in_transaction(conn, changes, rows)

    # Lock every run row of the group in one fixed order (no deadlocks between workers); a
    # lease taken over meanwhile shows as a newer generation. Then each table's rows of the
    # changes that passed the fence go in with one INSERT ... SELECT FROM unnest(...).
    _GROUP_STATEMENT = f"""
        WITH locked AS MATERIALIZED (
            SELECT run_id, generation FROM lashflow_runs WHERE run_id = ANY($1::text[])
            ORDER BY run_id FOR UPDATE),
        ok AS MATERIALIZED (
            SELECT c.idx FROM unnest($2::int[], $3::text[], $4::bigint[]) AS c(idx, run_id, gen)
            LEFT JOIN locked l ON l.run_id = c.run_id
            WHERE c.gen IS NULL OR l.generation = c.gen),
        new_events AS ({_EVENTS_INSERT.format(41, 42, 43, 44, 45, ok="SELECT idx FROM ok")}),
        new_blobs AS (
            INSERT INTO lashflow_blobs (hash, data)
            SELECT b.hash, b.data FROM unnest($5::int[], $6::text[], $7::text[]) AS b(idx, hash, data)
            WHERE b.idx IN (SELECT idx FROM ok)
            ON CONFLICT (hash) DO NOTHING),
        new_steps AS (
            INSERT INTO lashflow_steps ({_STEP_COLUMNS})
            SELECT s.run_id, s.step_key, s.seq, s.kind, s.tool, s.args_hash, s.status, s.outcome,
                   s.blob, s.detail, s.created_at, s.updated_at
            FROM unnest($8::int[], $9::text[], $10::text[], $11::bigint[], $12::text[],
                        $13::text[], $14::text[], $15::text[], $16::text[], $17::text[],
                        $18::text[], $19::float8[], $20::float8[])
                 AS s(idx, run_id, step_key, seq, kind, tool, args_hash, status, outcome, blob,
                      detail, created_at, updated_at)
            WHERE s.idx IN (SELECT idx FROM ok)
            {_STEP_UPSERT}),
        new_attempts AS (
            INSERT INTO lashflow_attempts ({_ATTEMPT_COLUMNS})
            SELECT a.run_id, a.step_key, a.attempt, a.status, a.code, a.message, a.detail,
                   a.started_at, a.finished_at
            FROM unnest($21::int[], $22::text[], $23::text[], $24::int[], $25::text[],
                        $26::text[], $27::text[], $28::text[], $29::float8[], $30::float8[])
                 WITH ORDINALITY
                 AS a(idx, run_id, step_key, attempt, status, code, message, detail, started_at,
                      finished_at, ord)
            WHERE a.idx IN (SELECT idx FROM ok)
            ORDER BY a.ord
            {_ATTEMPT_UPSERT}),
        run_updates AS (
            UPDATE lashflow_runs r SET status = CASE WHEN r.status = 'paused'
                    AND u.status IN {_KEPT} THEN r.status ELSE u.status END,
                result = u.result, error = u.error,
                waiting = u.waiting, wake_at = {_WAKE_AT.format(new="u")},
                updated_at = COALESCE(u.updated_at, r.updated_at),
                lease_owner = CASE WHEN u.release THEN NULL ELSE r.lease_owner END,
                lease_expires = CASE WHEN u.release THEN 0 ELSE r.lease_expires END
            FROM unnest($31::int[], $32::text[], $33::text[], $34::text[], $35::text[],
                        $36::text[], $37::float8[], $38::boolean[], $39::float8[])
                 AS u(idx, run_id, status, result, error, waiting, wake_at, release, updated_at)
            WHERE r.run_id = u.run_id AND u.idx IN (SELECT idx FROM ok)
            -- claimable now (handed back, or parked but already due by the change's own
            -- clock; without one, perhaps due): wake idle workers
            RETURNING CASE WHEN (u.release AND r.status IN ('queued', 'running'))
                OR (r.status = 'waiting' AND r.wake_at <= COALESCE(u.updated_at, r.wake_at))
                THEN pg_notify($40::text, '') END)
        SELECT idx FROM ok"""

    async def _apply_in_one_statement(self, conn: asyncpg.Connection, changes: list[Commit],
                                      rows: "_GroupRows") -> set[int]:
        found = await conn.fetch(
            self._GROUP_STATEMENT, sorted({change.run_id for change in changes}),
            list(range(len(changes))), [change.run_id for change in changes],
            [change.generation for change in changes],
            *_columns(rows.blobs, 3), *_columns(rows.steps, 13), *_columns(rows.attempts, 10),
            *_columns(rows.runs, 9), self.channel, *_columns(rows.events, 5))
        return {row[0] for row in found}

    async def _apply_in_transaction(self, conn: asyncpg.Connection, changes: list[Commit],
                                    rows: "_GroupRows") -> set[int]:
        async with conn.transaction():
            # the runs to wake are locked too, in the same order (no deadlocks)
            locked = await conn.fetch(
                "SELECT run_id, generation FROM lashflow_runs WHERE run_id = ANY($1::text[]) "
                "ORDER BY run_id FOR UPDATE",
                sorted({change.run_id for change in changes}
                       | {change.wake for change in changes if change.wake is not None}))
            generations = {row[0]: row[1] for row in locked}
            ok = {index for index, change in enumerate(changes)
                  if change.generation is None or generations.get(change.run_id) == change.generation}

            def passed(table: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
                return [row[1:] for row in table if row[0] in ok]  # in commit order
            if blobs := passed(rows.blobs):
                await conn.executemany("INSERT INTO lashflow_blobs (hash, data) VALUES ($1, $2) "
                                       "ON CONFLICT (hash) DO NOTHING", blobs)
            if steps := passed(rows.steps):
                await conn.executemany(
                    f"INSERT INTO lashflow_steps ({_STEP_COLUMNS}) VALUES "
                    f"($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) {_STEP_UPSERT}", steps)
            if attempts := passed(rows.attempts):
                await conn.executemany(
                    f"INSERT INTO lashflow_attempts ({_ATTEMPT_COLUMNS}) VALUES "
                    f"($1,$2,$3,$4,$5,$6,$7,$8,$9) {_ATTEMPT_UPSERT}", attempts)
            if runs := passed(rows.runs):
                await conn.executemany(
                    "UPDATE lashflow_runs r SET status = CASE WHEN r.status = 'paused' AND "
                    f"$2::text IN {_KEPT} THEN r.status ELSE $2 END, result = $3, error = $4, "
                    "waiting = $5, "
                    f"wake_at = {_WAKE_AT.format(new='u')}, "
                    "updated_at = COALESCE($8::float8, updated_at), "
                    "lease_owner = CASE WHEN $7 THEN NULL ELSE lease_owner END, "
                    "lease_expires = CASE WHEN $7 THEN 0 ELSE lease_expires END "
                    "FROM (SELECT $2::text AS status, $6::float8 AS wake_at) u "
                    "WHERE run_id = $1", runs)
                # claimable now, or perhaps due (a spurious wake-up costs one look)
                if any((release and status in ACTIVE) or status == RunStatus.WAITING
                       for _, status, _, _, _, _, release, _ in runs):
                    await conn.execute("SELECT pg_notify($1, '')", self.channel)
            for index, change in enumerate(changes):
                if change.wake is not None and index in ok:
                    await self.sql.wake(conn, change.wake, change.wake_at, WAKEABLE)
            if rows.events:
                await conn.execute(_EVENTS_INSERT.format(1, 2, 3, 4, 5, ok="SELECT unnest($6::int[])"),
                                   *_columns(rows.events, 5), sorted(ok))
        return ok


class PostgresStore(CoreStore):
    """The shared store for many workers. All methods are safe to call concurrently."""

    backend: PostgresBackend

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        super().__init__(PostgresBackend(url, connect_timeout=connect_timeout))
        self.url = url
        # Its owners hold a session lock (leases.new_owner_id), except through a proxy
        # in transaction mode (``statement_cache_size=0``): there a session lock would
        # stay with a server connection other clients share, so the lease decides alone.
        self.holds_sessions = _session_locks(url)
        self._dead_owners: set[str] = set()  # owner ids are never reused: dead stays dead
        # session owners whose lock was free at the last look: not cached for good, as an
        # owner whose connection dropped takes its lock again when it reconnects
        self._gone: set[str] = set()

    # Ready runs, oldest first by when they became ready (created, or due), plus the
    # owners holding live leases that could be dead: one per worker process on this host
    # (judged by pid), and those with a session lock, judged here by trying it.
    # A due run whose lease is held is being resumed right now: not claimable.
    _CLAIMABLE = """
        (SELECT run_id, NULL AS owner, FALSE AS gone FROM (
            SELECT run_id, created_at AS ready_at FROM lashflow_runs
            WHERE status IN ('running', 'queued') AND (lease_owner IS NULL OR lease_expires < $1)
              AND queue IS NULL AND (status = 'running' OR generation > 0 OR wake_at IS NULL
                   OR wake_at <= $1)
            UNION ALL
            SELECT run_id, wake_at FROM lashflow_runs
            WHERE status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= $1
              AND (lease_owner IS NULL OR lease_expires < $1) AND queue IS NULL) ready
         ORDER BY ready_at, run_id LIMIT $2)
        UNION ALL
        (SELECT NULL, owner, CASE WHEN owner LIKE $4 THEN """ + _SESSION_FREE.format(
        owner="owner") + """ ELSE FALSE END FROM (
            SELECT DISTINCT lease_owner AS owner FROM lashflow_runs
            WHERE status IN ('running', 'queued', 'waiting') AND lease_expires >= $1
              AND (lease_owner LIKE $3 OR lease_owner LIKE $4)) owners)"""

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """At most ``limit`` runs, in one round trip (a second only when an owner died):
        workers polling at once must not each read the whole queue.

        Runs held by a dead owner come first, then the others by the time they became
        ready (created or due), oldest first.
        """
        rows = await self.backend.fetch(self._CLAIMABLE, float(now), limit, _local_owners(),
                                        _SESSION_OWNERS)
        ready = [row[0] for row in rows if row[0] is not None]
        self._gone = {row[1] for row in rows if row[2]}
        dead = [row[1] for row in rows if row[1] is not None
                and (row[2] or self._owner_dead(row[1]))]
        if not dead:
            return ready
        orphans = await self.backend.fetch(
            "SELECT run_id FROM lashflow_runs WHERE lease_owner = ANY($1::text[]) AND (status = "
            "'running' OR (status = 'queued' AND (generation > 0 OR COALESCE(wake_at, 0) <= $3)) "
            "OR (status = 'waiting' AND wake_at <= $3)) AND queue IS NULL "
            "ORDER BY created_at, run_id LIMIT $2", dead, limit, float(now))
        found = [row[0] for row in orphans]
        return (found + [run_id for run_id in ready if run_id not in found])[:limit]

    def owner_gone(self, owner: str) -> bool:
        return owner in self._gone or self._owner_dead(owner)

    async def claim_run(self, run_id: str, owner: str, ttl: float, now: float, *,
                        steal_from_dead: bool = True) -> Claimed | None:
        await self._hold_session(owner)
        return await super().claim_run(run_id, owner, ttl, now, steal_from_dead=steal_from_dead)

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        if run.lease_owner is not None:
            await self._hold_session(run.lease_owner)
        return await super().create_run(run)

    async def _hold_session(self, owner: str) -> None:
        """No lease of a session owner is written before its lock is held: until then,
        other workers would judge it dead. Once held, this is a set lookup."""
        listener = self.backend.listener
        if not holds_session(owner) or listener is None or listener.holds(owner):
            return
        try:
            await listener.hold(owner, 2 * self.backend.connect_timeout)
        except asyncio.TimeoutError:
            raise DbError(f"database error on {self.backend.label}: worker {owner} could not "
                          "take its session lock (is the server out of connections?)") from None

    def _owner_dead(self, owner: str) -> bool:
        if owner in self._dead_owners:
            return True
        if owner_is_dead(owner):
            self._dead_owners.add(owner)
            return True
        return False

    async def wait_for_work(self, timeout: float) -> None:
        """Sleep until a NOTIFY says a run became claimable, or ``timeout`` (polling)."""
        listener = self.backend.listener
        if listener is None:
            raise DbError("the store is not open")
        await listener.wait(timeout)


def _session_locks(url: str) -> bool:
    try:
        return ("statement_cache_size", "0") not in parse_qsl(urlsplit(url).query)
    except ValueError:
        return True  # a bad URL: ``open`` says so


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
