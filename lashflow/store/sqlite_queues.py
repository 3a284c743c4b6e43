"""SQLite's SQL for the queue statements (``programs.STATEMENTS``), mixed into the
dialect's statements; the tables and columns come with schema versions 8 and 9. The gate needs
no lock of its own here: every write runs on the one writer, in an IMMEDIATE
transaction, so a gate's count and the claim it allows see one moment."""

from __future__ import annotations

import sqlite3
from typing import Any

from .base import QueueTake
from .queues import (DEPTHS, FIRST, FRONT, FRONT_AFTER, OPEN_QUEUES, QUEUE_COLUMNS, gate,
                     queue_sql, take)
from .programs import run_on
from .rows import RUN_COLUMNS


def _add_column(table: str, column: str) -> str:
    return f"-- add column {table} {column}"  # sqlite._migrate_statement skips a present one


MIGRATION = [
    _add_column("runs", "queue TEXT"),
    _add_column("runs", "queue_key TEXT"),
    _add_column("runs", "priority INTEGER"),
    # a queue's runs holding a slot (a lease): few rows, read by every gate and listing
    "CREATE INDEX IF NOT EXISTS runs_queue_held ON runs (queue, queue_key) "
    "WHERE queue IS NOT NULL AND lease_owner IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS runs_queue_ready ON runs (queue, status) "
    "WHERE queue IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS queues (
        name TEXT PRIMARY KEY, concurrency INTEGER, per_key INTEGER, rate_n REAL,
        rate_period REAL, key_rate_n REAL, key_rate_period REAL,
        priority_levels INTEGER NOT NULL, fair INTEGER NOT NULL DEFAULT 0,
        paused INTEGER NOT NULL DEFAULT 0, vtime REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS queue_keys (
        queue TEXT NOT NULL, key TEXT NOT NULL, weight REAL NOT NULL DEFAULT 1,
        finish REAL NOT NULL DEFAULT 0, PRIMARY KEY (queue, key))""",
    # token buckets as theoretical arrival times: per queue (key '') and per queue key
    """CREATE TABLE IF NOT EXISTS buckets (
        queue TEXT NOT NULL, key TEXT NOT NULL, tat REAL NOT NULL,
        PRIMARY KEY (queue, key))""",
]

# Version 9 (ADR 0037): a run's fairness tag, given when it enters a queue, and the
# index whose order is the order runs of a queue start in.
MIGRATION_9 = [
    _add_column("runs", "fair_tag REAL NOT NULL DEFAULT 0"),
    "CREATE INDEX IF NOT EXISTS runs_queue_next ON runs "
    "(queue, priority, fair_tag, created_at, run_id) "
    "WHERE queue IS NOT NULL AND status = 'queued' AND lease_owner IS NULL",
]


_HELD = "INDEXED BY runs_queue_held"


def _sqlite(template: str, after: str = "") -> str:
    """A shared template with SQLite's numbered parameters (``?1``, not ``$1``)."""
    return queue_sql(template, "", after, _HELD).replace("$", "?")


_DEPTHS = _sqlite(DEPTHS)
_FIRST = _sqlite(FIRST)
_OPEN_QUEUES = _sqlite(OPEN_QUEUES)
_FRONT_AFTER = _sqlite(FRONT, FRONT_AFTER)


class QueueStatements:
    def queue_lease_of(self, conn: sqlite3.Connection, run_id: str) -> Any:
        return conn.execute("SELECT lease_owner, lease_expires, generation, status, queue, "
                            "queue_key, priority FROM runs WHERE run_id = ?",
                            (run_id,)).fetchone()

    def gate_claim(self, conn: sqlite3.Connection, run_id: str, owner: str, now: float,
                   expires: float, generation: int, holder: str | None, dead: bool) -> Any:
        """``queues.gate``, its statements answered here, in the writer's transaction."""
        return run_on(gate(run_id, owner, now, expires, generation, holder, dead), self, conn)

    def gate_claims(self, conn: sqlite3.Connection, run_ids: list[str], generations: list[int],
                    owner: str, now: float, expires: float) -> list[Any]:
        """``gate_claim`` for each new run (no lease to judge), in list order."""
        rows = (self.gate_claim(conn, run_id, owner, now, expires, generation, None, False)
                for run_id, generation in zip(run_ids, generations))
        return [row for row in rows if row is not None]

    def lock_queue(self, conn: sqlite3.Connection, name: str) -> Any:
        return self.queue_row(conn, name)

    def debounce_target(self, conn: sqlite3.Connection, queue: str, key: str) -> Any:
        return conn.execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE queue = ? AND queue_key = ? AND status = "
            "'queued' AND generation = 0 AND wake_at IS NOT NULL ORDER BY created_at LIMIT 1",
            (queue, key)).fetchone()

    def debounce_update(self, conn: sqlite3.Connection, run_id: str, input: str,
                        input_hash: str, source_hash: str, meta: str, wake_at: float) -> bool:
        return conn.execute(
            "UPDATE runs SET input = ?, input_hash = ?, source_hash = ?, meta = ?, wake_at = ? "
            "WHERE run_id = ? AND generation = 0 AND status = 'queued'",
            (input, input_hash, source_hash, meta, wake_at, run_id)).rowcount == 1

    def key_unsettled(self, conn: sqlite3.Connection, queue: str, key: str) -> list[str]:
        return [row[0] for row in conn.execute(
            "SELECT run_id FROM runs WHERE queue = ? AND queue_key = ? AND status NOT IN "
            "('finished', 'failed', 'cancelled') ORDER BY created_at", (queue, key))]

    def queue_held(self, conn: sqlite3.Connection, queue: str, key: str, now: float,
                   run_id: str) -> tuple[int, int]:
        row = conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM(queue_key = ?), 0) FROM runs {_HELD} WHERE queue = ? "
            "AND lease_owner IS NOT NULL AND lease_expires >= ? AND run_id <> ? "
            "AND status NOT IN ('finished', 'failed', 'cancelled')",
            (key, queue, now, run_id)).fetchone()
        return int(row[0]), int(row[1])

    def bucket(self, conn: sqlite3.Connection, queue: str, key: str) -> float | None:
        row = conn.execute("SELECT tat FROM buckets WHERE queue = ? AND key = ?",
                           (queue, key)).fetchone()
        return None if row is None else float(row[0])

    def put_bucket(self, conn: sqlite3.Connection, queue: str, key: str, tat: float) -> None:
        conn.execute("INSERT INTO buckets (queue, key, tat) VALUES (?, ?, ?) ON CONFLICT "
                     "(queue, key) DO UPDATE SET tat = excluded.tat", (queue, key, tat))

    def fair_enqueue(self, conn: sqlite3.Connection, run_id: str, queue: str,
                     key: str) -> None:
        row = conn.execute("SELECT vtime FROM queues WHERE name = ? AND fair <> 0",
                           (queue,)).fetchone()
        if row is None:
            return
        conn.execute("INSERT OR IGNORE INTO queue_keys (queue, key) VALUES (?, ?)", (queue, key))
        tag, weight = conn.execute("SELECT MAX(?, finish), weight FROM queue_keys WHERE "
                                   "queue = ? AND key = ?", (row[0], queue, key)).fetchone()
        conn.execute("UPDATE queue_keys SET finish = ? WHERE queue = ? AND key = ?",
                     (tag + 1.0 / weight, queue, key))
        conn.execute("UPDATE runs SET fair_tag = ? WHERE run_id = ?", (tag, run_id))

    def fair_started(self, conn: sqlite3.Connection, queue: str, run_id: str) -> None:
        conn.execute("UPDATE queues SET vtime = MAX(vtime, (SELECT fair_tag FROM runs WHERE "
                     "run_id = ?)) WHERE name = ?", (run_id, queue))

    def queue_row(self, conn: sqlite3.Connection, name: str) -> Any:
        return conn.execute(f"SELECT {QUEUE_COLUMNS} FROM queues WHERE name = ?",
                            (name,)).fetchone()

    def queue_weights(self, conn: sqlite3.Connection, name: str) -> list[Any]:
        return conn.execute("SELECT key, weight FROM queue_keys WHERE queue = ? AND weight <> 1 "
                            "ORDER BY key", (name,)).fetchall()

    def queue_rows(self, conn: sqlite3.Connection) -> list[Any]:
        return conn.execute(f"SELECT {QUEUE_COLUMNS} FROM queues ORDER BY name").fetchall()

    def insert_queue(self, conn: sqlite3.Connection, values: tuple[Any, ...]) -> bool:
        return conn.execute(f"INSERT OR IGNORE INTO queues ({QUEUE_COLUMNS}) VALUES "
                            f"({','.join('?' * len(values))})", values).rowcount == 1

    def update_queue(self, conn: sqlite3.Connection, values: tuple[Any, ...]) -> bool:
        name, *limits = values[:10]
        return conn.execute(
            "UPDATE queues SET concurrency = ?, per_key = ?, rate_n = ?, rate_period = ?, "
            "key_rate_n = ?, key_rate_period = ?, priority_levels = ?, fair = ?, paused = ?, "
            "updated_at = ? WHERE name = ?", (*limits, values[12], name)).rowcount == 1

    def put_weight(self, conn: sqlite3.Connection, queue: str, key: str, weight: float) -> None:
        conn.execute("INSERT INTO queue_keys (queue, key, weight) VALUES (?, ?, ?) ON CONFLICT "
                     "(queue, key) DO UPDATE SET weight = excluded.weight", (queue, key, weight))

    def delete_queue(self, conn: sqlite3.Connection, name: str) -> bool:
        for table in ("queue_keys", "buckets"):
            conn.execute(f"DELETE FROM {table} WHERE queue = ?", (name,))
        return conn.execute("DELETE FROM queues WHERE name = ?", (name,)).rowcount == 1

    def queue_depths(self, conn: sqlite3.Connection, name: str, now: float) -> list[Any]:
        return conn.execute(_DEPTHS, (name, now)).fetchall()

    def buckets_of(self, conn: sqlite3.Connection, name: str) -> list[Any]:
        return conn.execute("SELECT key, tat FROM buckets WHERE queue = ?", (name,)).fetchall()

    def take_turn(self, conn: sqlite3.Connection, now: float, limit: int, owner: str,
                  ttl: float, skip: list[str]) -> QueueTake:
        """A worker's queued turn (``queues.take``), its statements answered here, on the
        writer: the listing's reads cost no round trip."""
        return run_on(take(now, limit, owner, ttl, frozenset(skip)), self, conn)

    def open_queues(self, conn: sqlite3.Connection, now: float) -> list[Any]:
        return conn.execute(_OPEN_QUEUES, (now,)).fetchall()

    def queue_front(self, conn: sqlite3.Connection, queue: str, now: float,
                    after: tuple[Any, ...] | None, size: int) -> list[Any]:
        if after is None:
            return conn.execute(_FIRST, (queue, now, size)).fetchall()
        return conn.execute(_FRONT_AFTER, (queue, now, size, *after)).fetchall()

    def key_buckets(self, conn: sqlite3.Connection, queue: str, keys: list[str]) -> list[Any]:
        return conn.execute(f"SELECT key, tat FROM buckets WHERE queue = ? AND key IN "
                            f"({','.join('?' * len(keys))})", (queue, *keys)).fetchall()
