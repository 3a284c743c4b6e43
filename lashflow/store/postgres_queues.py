"""PostgreSQL's SQL for the queue statements (``programs.STATEMENTS``), mixed into the
dialect's statements; the tables and columns come with schema versions 8 and 9.

A gated claim is one call of ``lashflow_gate_claim``, a PL/pgSQL function holding
``queues.gate``'s rule: it locks the queue's row (claims of one queue line up there),
then each of its statements reads with a fresh snapshot (READ COMMITTED, a volatile
function), so the count of held slots includes every claim committed before the lock
was granted; the lock goes with the statement's transaction, microseconds later.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from .queues import DEPTHS, QUEUE_COLUMNS, queue_sql
from .rows import RUN_COLUMNS

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

# ``queues.gate`` in the server (see the module doc); the same rule, statement by
# statement. Answers the claimed run's row, or no row. ``{fair}``: what a first start
# does to the fairness tags (version 8: tags given at the start; 9: on arrival).
GATE_FUNCTION = """
CREATE OR REPLACE FUNCTION lashflow_gate_claim(
    p_run TEXT, p_owner TEXT, p_now DOUBLE PRECISION, p_expires DOUBLE PRECISION,
    p_generation BIGINT, p_holder TEXT, p_dead BOOLEAN) RETURNS SETOF lashflow_runs
LANGUAGE plpgsql VOLATILE AS $gate$
DECLARE
    run_queue TEXT; run_key TEXT; run_status TEXT; starting BOOLEAN;
    q lashflow_queues%ROWTYPE; found_queue BOOLEAN;
    total BIGINT; of_key BIGINT; queue_tat DOUBLE PRECISION; key_tat DOUBLE PRECISION;
    claimed lashflow_runs%ROWTYPE; start_tag DOUBLE PRECISION;
BEGIN
    SELECT queue, queue_key, status INTO run_queue, run_key, run_status
        FROM lashflow_runs WHERE run_id = p_run;
    IF NOT FOUND THEN RETURN; END IF;
    SELECT * INTO q FROM lashflow_queues WHERE name = run_queue FOR UPDATE;
    found_queue := FOUND;
    starting := run_status = 'queued' AND p_generation = 0;
    IF found_queue THEN
        IF q.paused <> 0 THEN RETURN; END IF;
        IF q.concurrency IS NOT NULL OR q.per_key IS NOT NULL THEN
            SELECT COUNT(*), COUNT(*) FILTER (WHERE queue_key = run_key) INTO total, of_key
                FROM lashflow_runs WHERE queue = run_queue AND lease_owner IS NOT NULL
                AND lease_expires >= p_now AND run_id <> p_run
                AND status NOT IN ('finished', 'failed', 'cancelled');
            IF q.concurrency IS NOT NULL AND total >= q.concurrency THEN RETURN; END IF;
            IF q.per_key IS NOT NULL AND of_key >= q.per_key THEN RETURN; END IF;
        END IF;
        IF starting AND q.rate_n IS NOT NULL THEN
            SELECT tat INTO queue_tat FROM lashflow_buckets WHERE queue = run_queue AND key = '';
            IF queue_tat IS NOT NULL AND p_now < queue_tat THEN RETURN; END IF;
            queue_tat := GREATEST(COALESCE(queue_tat, p_now), p_now) + q.rate_period / q.rate_n;
        END IF;
        IF starting AND q.key_rate_n IS NOT NULL THEN
            SELECT tat INTO key_tat FROM lashflow_buckets WHERE queue = run_queue
                AND key = run_key;
            IF key_tat IS NOT NULL AND p_now < key_tat THEN RETURN; END IF;
            key_tat := GREATEST(COALESCE(key_tat, p_now), p_now)
                + q.key_rate_period / q.key_rate_n;
        END IF;
    END IF;
    UPDATE lashflow_runs SET lease_owner = p_owner, lease_expires = p_expires,
        generation = generation + 1
    WHERE run_id = p_run AND generation = p_generation
      AND lease_owner IS NOT DISTINCT FROM p_holder
      AND (lease_owner IS NULL OR lease_owner = p_owner OR lease_expires < p_now OR p_dead)
      AND status NOT IN ('finished', 'failed', 'cancelled')
    RETURNING * INTO claimed;
    IF NOT FOUND THEN RETURN; END IF;
    IF found_queue AND starting THEN
        IF queue_tat IS NOT NULL THEN
            INSERT INTO lashflow_buckets (queue, key, tat) VALUES (run_queue, '', queue_tat)
            ON CONFLICT (queue, key) DO UPDATE SET tat = EXCLUDED.tat;
        END IF;
        IF key_tat IS NOT NULL THEN
            INSERT INTO lashflow_buckets (queue, key, tat) VALUES (run_queue, run_key, key_tat)
            ON CONFLICT (queue, key) DO UPDATE SET tat = EXCLUDED.tat;
        END IF;
{fair}
    END IF;
    RETURN NEXT claimed;
END
$gate$"""
_FAIR_8 = '''        IF q.fair <> 0 THEN
            INSERT INTO lashflow_queue_keys AS k (queue, key, finish)
            VALUES (run_queue, run_key, q.vtime + 1.0)
            ON CONFLICT (queue, key) DO UPDATE SET finish = GREATEST(q.vtime, k.finish)
                + 1.0 / k.weight
            RETURNING k.finish - 1.0 / k.weight INTO start_tag;
            UPDATE lashflow_queues SET vtime = start_tag WHERE name = run_queue;
        END IF;'''
MIGRATION.append(GATE_FUNCTION.replace("{fair}", _FAIR_8))

# Version 9 (ADR 0037): fairness tags given on arrival; a start moves the queue's
# virtual time to its run's tag (the gate function is made again with that rule).
MIGRATION_9 = [
    "ALTER TABLE lashflow_runs ADD COLUMN IF NOT EXISTS fair_tag DOUBLE PRECISION NOT NULL "
    "DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS lashflow_runs_queue_next ON lashflow_runs "
    "(queue, priority, fair_tag, created_at, run_id) "
    "WHERE queue IS NOT NULL AND status = 'queued' AND lease_owner IS NULL",
    "DROP FUNCTION IF EXISTS lashflow_gate_claim(TEXT, TEXT, DOUBLE PRECISION, "
    "DOUBLE PRECISION, BIGINT, TEXT, BOOLEAN)",
    GATE_FUNCTION.replace("{fair}", """        IF q.fair <> 0 THEN
            UPDATE lashflow_queues SET vtime = GREATEST(vtime, claimed.fair_tag)
            WHERE name = run_queue;
        END IF;""").replace(" start_tag DOUBLE PRECISION;", ""),
]

# ``fair_enqueue``: the key's finish tag moves under its row's lock (an upsert), so
# runs of one key submitted at once get tags one turn apart; nothing for a queue that
# is not fair (the upsert selects no row).
FAIR_ENQUEUE = """
WITH k AS (
    INSERT INTO lashflow_queue_keys AS k (queue, key, finish)
    SELECT $2, $3, q.vtime + 1.0 FROM lashflow_queues q WHERE q.name = $2 AND q.fair <> 0
    ON CONFLICT (queue, key) DO UPDATE SET finish = GREATEST(EXCLUDED.finish - 1.0, k.finish)
        + 1.0 / k.weight
    RETURNING k.finish - 1.0 / k.weight AS tag)
UPDATE lashflow_runs SET fair_tag = k.tag FROM k WHERE run_id = $1"""

_DEPTHS = queue_sql(DEPTHS, "lashflow_")


class QueueStatements:
    async def gate_claim(self, conn: asyncpg.Connection, run_id: str, owner: str, now: float,
                         expires: float, generation: int, holder: str | None,
                         dead: bool) -> Any:
        return await conn.fetchrow(f"SELECT {RUN_COLUMNS} FROM lashflow_gate_claim("
                                   "$1, $2, $3, $4, $5, $6, $7)", run_id, owner, now, expires,
                                   generation, holder, dead)

    async def lock_queue(self, conn: asyncpg.Connection, name: str) -> None:
        await conn.execute("SELECT 1 FROM lashflow_queues WHERE name = $1 FOR UPDATE", name)

    async def debounce_target(self, conn: asyncpg.Connection, queue: str, key: str) -> Any:
        return await conn.fetchrow(
            f"SELECT {RUN_COLUMNS} FROM lashflow_runs WHERE queue = $1 AND queue_key = $2 "
            "AND status = 'queued' AND generation = 0 AND wake_at IS NOT NULL "
            "ORDER BY created_at LIMIT 1 FOR UPDATE", queue, key)

    async def debounce_update(self, conn: asyncpg.Connection, run_id: str, input: str,
                              input_hash: str, source_hash: str, meta: str,
                              wake_at: float) -> bool:
        return await conn.fetchval(
            "UPDATE lashflow_runs SET input = $2, input_hash = $3, source_hash = $4, meta = $5, "
            "wake_at = $6 WHERE run_id = $1 AND generation = 0 AND status = 'queued' "
            "RETURNING 1", run_id, input, input_hash, source_hash, meta, wake_at) is not None

    async def key_unsettled(self, conn: asyncpg.Connection, queue: str, key: str) -> list[str]:
        return [row[0] for row in await conn.fetch(
            "SELECT run_id FROM lashflow_runs WHERE queue = $1 AND queue_key = $2 AND status "
            "NOT IN ('finished', 'failed', 'cancelled') ORDER BY created_at", queue, key)]

    async def queue_lease_of(self, conn: asyncpg.Connection, run_id: str) -> Any:
        return await conn.fetchrow(
            "SELECT lease_owner, lease_expires, generation, status, queue, queue_key, priority "
            "FROM lashflow_runs WHERE run_id = $1", run_id)

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

    async def bucket(self, conn: asyncpg.Connection, queue: str, key: str) -> float | None:
        return await conn.fetchval("SELECT tat FROM lashflow_buckets WHERE queue = $1 AND "
                                   "key = $2", queue, key)

    async def fair_enqueue(self, conn: asyncpg.Connection, run_id: str, queue: str,
                           key: str) -> None:
        await conn.execute(FAIR_ENQUEUE, run_id, queue, key)

    async def fair_started(self, conn: asyncpg.Connection, queue: str, run_id: str) -> None:
        """The queue's virtual time moves to a started run's tag (``lashflow_gate_claim``
        does the same inside its claim)."""
        await conn.execute("UPDATE lashflow_queues SET vtime = GREATEST(vtime, (SELECT "
                           "fair_tag FROM lashflow_runs WHERE run_id = $1)) WHERE name = $2",
                           run_id, queue)
