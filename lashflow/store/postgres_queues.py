"""PostgreSQL's SQL for the queue statements (``programs.STATEMENTS``), mixed into the
dialect's statements; the tables and columns come with schema version 7.

A gated claim (``queues.claim_queued``) runs in one transaction whose first statement
locks the queue's row (``lock_queue``): claims of one queue line up there, and each
later statement of the transaction reads with a fresh snapshot (READ COMMITTED), so
the count of held slots includes every claim committed before the lock was granted.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from .queues import CANDIDATES, DEPTHS, QUEUE_COLUMNS, queue_sql

_C = 'COLLATE "C"'

MIGRATION = [
    f"ALTER TABLE lashflow_runs ADD COLUMN IF NOT EXISTS queue TEXT {_C}",
    f"ALTER TABLE lashflow_runs ADD COLUMN IF NOT EXISTS queue_key TEXT {_C}",
    "ALTER TABLE lashflow_runs ADD COLUMN IF NOT EXISTS priority INTEGER",
    "CREATE INDEX IF NOT EXISTS lashflow_runs_queue_held ON lashflow_runs (queue, queue_key) "
    "WHERE queue IS NOT NULL AND lease_owner IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS lashflow_runs_queue_ready ON lashflow_runs (queue, status) "
    "WHERE queue IS NOT NULL",
    f"""CREATE TABLE IF NOT EXISTS lashflow_queues (
        name TEXT {_C} PRIMARY KEY, concurrency INTEGER, per_key INTEGER,
        rate_n DOUBLE PRECISION, rate_period DOUBLE PRECISION, key_rate_n DOUBLE PRECISION,
        key_rate_period DOUBLE PRECISION, priority_levels INTEGER NOT NULL,
        fair INTEGER NOT NULL DEFAULT 0, paused INTEGER NOT NULL DEFAULT 0,
        vtime DOUBLE PRECISION NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    f"""CREATE TABLE IF NOT EXISTS lashflow_queue_keys (
        queue TEXT {_C} NOT NULL, key TEXT {_C} NOT NULL,
        weight DOUBLE PRECISION NOT NULL DEFAULT 1, finish DOUBLE PRECISION NOT NULL DEFAULT 0,
        PRIMARY KEY (queue, key))""",
    f"""CREATE TABLE IF NOT EXISTS lashflow_buckets (
        queue TEXT {_C} NOT NULL, key TEXT {_C} NOT NULL, tat DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (queue, key))""",
]

_CANDIDATES = queue_sql(CANDIDATES, "lashflow_", greatest="GREATEST")
_DEPTHS = queue_sql(DEPTHS, "lashflow_")


class QueueStatements:
    async def queue_lease_of(self, conn: asyncpg.Connection, run_id: str) -> Any:
        return await conn.fetchrow(
            "SELECT lease_owner, lease_expires, generation, status, queue, queue_key, priority "
            "FROM lashflow_runs WHERE run_id = $1", run_id)

    async def lock_queue(self, conn: asyncpg.Connection, name: str) -> Any:
        return await conn.fetchrow(
            f"SELECT {QUEUE_COLUMNS} FROM lashflow_queues WHERE name = $1 FOR UPDATE", name)

    async def queue_held(self, conn: asyncpg.Connection, queue: str, key: str, now: float,
                         run_id: str) -> tuple[int, int]:
        row = await conn.fetchrow(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE queue_key = $2) FROM lashflow_runs "
            "WHERE queue = $1 AND lease_owner IS NOT NULL AND lease_expires >= $3 "
            "AND run_id <> $4 AND status NOT IN ('finished', 'failed', 'cancelled')",
            queue, key, now, run_id)
        return int(row[0]), int(row[1])

    async def bucket(self, conn: asyncpg.Connection, queue: str, key: str) -> float | None:
        return await conn.fetchval("SELECT tat FROM lashflow_buckets WHERE queue = $1 AND "
                                   "key = $2", queue, key)

    async def put_bucket(self, conn: asyncpg.Connection, queue: str, key: str,
                         tat: float) -> None:
        await conn.execute("INSERT INTO lashflow_buckets (queue, key, tat) VALUES ($1, $2, $3) "
                           "ON CONFLICT (queue, key) DO UPDATE SET tat = EXCLUDED.tat",
                           queue, key, tat)

    async def fair_start(self, conn: asyncpg.Connection, queue: str, key: str,
                         vtime: float) -> None:
        await conn.execute(
            "WITH k AS (INSERT INTO lashflow_queue_keys AS k (queue, key, finish) "
            "VALUES ($1, $2, $3 + 1.0) ON CONFLICT (queue, key) DO UPDATE SET "
            "finish = GREATEST($3, k.finish) + 1.0 / k.weight "
            "RETURNING finish - 1.0 / weight AS start) "
            "UPDATE lashflow_queues SET vtime = (SELECT start FROM k) WHERE name = $1",
            queue, key, vtime)

    async def queue_row(self, conn: asyncpg.Connection, name: str) -> Any:
        return await conn.fetchrow(f"SELECT {QUEUE_COLUMNS} FROM lashflow_queues WHERE name = $1",
                                   name)

    async def queue_weights(self, conn: asyncpg.Connection, name: str) -> list[Any]:
        return list(await conn.fetch("SELECT key, weight FROM lashflow_queue_keys WHERE "
                                     "queue = $1 AND weight <> 1 ORDER BY key", name))

    async def queue_rows(self, conn: asyncpg.Connection) -> list[Any]:
        return list(await conn.fetch(f"SELECT {QUEUE_COLUMNS} FROM lashflow_queues ORDER BY name"))

    async def insert_queue(self, conn: asyncpg.Connection, values: tuple[Any, ...]) -> bool:
        marks = ",".join(f"${n}" for n in range(1, len(values) + 1))
        return await conn.fetchval(
            f"INSERT INTO lashflow_queues ({QUEUE_COLUMNS}) VALUES ({marks}) "
            "ON CONFLICT (name) DO NOTHING RETURNING 1", *values) is not None

    async def update_queue(self, conn: asyncpg.Connection, values: tuple[Any, ...]) -> bool:
        return await conn.fetchval(
            "UPDATE lashflow_queues SET concurrency = $2, per_key = $3, rate_n = $4, "
            "rate_period = $5, key_rate_n = $6, key_rate_period = $7, priority_levels = $8, "
            "fair = $9, paused = $10, updated_at = $11 WHERE name = $1 RETURNING 1",
            *values[:10], values[12]) is not None

    async def put_weight(self, conn: asyncpg.Connection, queue: str, key: str,
                         weight: float) -> None:
        await conn.execute("INSERT INTO lashflow_queue_keys (queue, key, weight) VALUES "
                           "($1, $2, $3) ON CONFLICT (queue, key) DO UPDATE SET "
                           "weight = EXCLUDED.weight", queue, key, weight)

    async def delete_queue(self, conn: asyncpg.Connection, name: str) -> bool:
        return await conn.fetchval(
            "WITH k AS (DELETE FROM lashflow_queue_keys WHERE queue = $1), "
            "b AS (DELETE FROM lashflow_buckets WHERE queue = $1) "
            "DELETE FROM lashflow_queues WHERE name = $1 RETURNING 1", name) is not None

    async def queue_depths(self, conn: asyncpg.Connection, name: str, now: float) -> list[Any]:
        return list(await conn.fetch(_DEPTHS, name, now))

    async def buckets_of(self, conn: asyncpg.Connection, name: str) -> list[Any]:
        return list(await conn.fetch("SELECT key, tat FROM lashflow_buckets WHERE queue = $1",
                                     name))

    async def queue_candidates(self, conn: asyncpg.Connection, now: float,
                               limit: int) -> list[Any]:
        return list(await conn.fetch(_CANDIDATES, now, limit))
