"""PostgreSQL's SQL for the rate-limit statements (``programs.STATEMENTS``), mixed into
the dialect's statements; the tables come with schema version 10.

A take is one ``UPDATE`` (or upsert): it waits for the bucket row's lock and then sets
``tat`` from the row's newest version, so takes from every machine line up on the row.
A global concurrency slot is taken by ``lashflow_take_slot``: an advisory lock per tool,
then a count of live holders and the insert, each statement with a fresh snapshot
(READ COMMITTED, a volatile function), so it sees every slot committed before the lock
was granted.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from .pg_wakeups import LOCK_CLASS
from .ratelimits import LIVE_SLOT, RATE_COLUMNS

_C = 'COLLATE "C"'
# The advisory lock space of a tool's global slots: not the owners' session locks' (a
# hash shared with a live worker's owner would wait as long as that worker lives).
SLOT_LOCK_CLASS = LOCK_CLASS + 1

MIGRATION = [
    f"""CREATE TABLE IF NOT EXISTS lashflow_rate_limits (
        name TEXT {_C} PRIMARY KEY, rate_n DOUBLE PRECISION NOT NULL,
        rate_period DOUBLE PRECISION NOT NULL, tat DOUBLE PRECISION NOT NULL DEFAULT 0,
        calls BIGINT NOT NULL DEFAULT 0, delayed BIGINT NOT NULL DEFAULT 0,
        own INTEGER NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    f"""CREATE TABLE IF NOT EXISTS lashflow_tool_slots (
        name TEXT {_C} NOT NULL, run_id TEXT {_C} NOT NULL, step_key TEXT {_C} NOT NULL,
        owner TEXT {_C} NOT NULL, generation BIGINT NOT NULL,
        taken_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (name, run_id, step_key))""",
    f"""CREATE OR REPLACE FUNCTION lashflow_take_slot(
        p_name TEXT, p_limit INTEGER, p_run TEXT, p_step TEXT, p_owner TEXT,
        p_generation BIGINT, p_now DOUBLE PRECISION) RETURNS BOOLEAN
    LANGUAGE plpgsql VOLATILE AS $slot$
    DECLARE held BIGINT;
    BEGIN
        PERFORM pg_advisory_xact_lock({SLOT_LOCK_CLASS}, hashtext(p_name));
        DELETE FROM lashflow_tool_slots s WHERE s.name = p_name AND (
            (s.run_id = p_run AND s.step_key = p_step)
            OR NOT {LIVE_SLOT.format(runs="lashflow_runs", now="p_now")});
        SELECT COUNT(*) INTO held FROM lashflow_tool_slots WHERE name = p_name;
        IF held >= p_limit THEN RETURN FALSE; END IF;
        INSERT INTO lashflow_tool_slots (name, run_id, step_key, owner, generation, taken_at)
            VALUES (p_name, p_run, p_step, p_owner, p_generation, p_now);
        RETURN TRUE;
    END
    $slot$""",
]

# The old ``tat`` on the right of SET; the new one in RETURNING (see sqlite_ratelimits).
_NOW = "$5::float8"
_TAKE_SET = (f"tat = GREATEST({{t}}.tat, {_NOW}) + $2 * {{rate}}, calls = {{t}}.calls + $2, "
             f"delayed = {{t}}.delayed + CASE WHEN {{t}}.tat > {_NOW} THEN $2 ELSE $2 - 1 END, "
             f"updated_at = {_NOW}")
_RETURNING = " RETURNING tat - $2 * rate_period / rate_n, rate_n, rate_period"
_TAKE_NAMED = (
    "UPDATE lashflow_rate_limits AS b SET "
    + _TAKE_SET.format(t="b", rate="b.rate_period / b.rate_n").replace("$5", "$3")
    + " WHERE name = $1 AND own = 0" + _RETURNING)
_TAKE_OWN = (
    f"INSERT INTO lashflow_rate_limits AS b ({RATE_COLUMNS}) VALUES ($1, $3::float8, "
    f"$4::float8, {_NOW} + $2::bigint * $4::float8 / $3::float8, $2, $2 - 1, 1, {_NOW}, "
    f"{_NOW}) ON CONFLICT (name) DO UPDATE SET rate_n = $3::float8, rate_period = $4::float8, "
    + _TAKE_SET.format(t="b", rate="$4::float8 / $3::float8") + _RETURNING)
_LIVE = LIVE_SLOT.format(runs="lashflow_runs", now="$1")


class RateLimitStatements:
    async def take_named_rate(self, conn: asyncpg.Connection, name: str, count: int,
                              now: float) -> Any:
        return await conn.fetchrow(_TAKE_NAMED, name, count, now)

    async def take_own_rate(self, conn: asyncpg.Connection, name: str, n: float,
                            period: float, count: int, now: float) -> Any:
        return await conn.fetchrow(_TAKE_OWN, name, count, n, period, now)

    async def take_slot(self, conn: asyncpg.Connection, name: str, limit: int, run_id: str,
                        step_key: str, owner: str, generation: int, now: float) -> bool:
        return bool(await conn.fetchval("SELECT lashflow_take_slot($1, $2, $3, $4, $5, $6, $7)",
                                        name, limit, run_id, step_key, owner, generation, now))

    async def release_slot(self, conn: asyncpg.Connection, name: str, run_id: str,
                           step_key: str, owner: str) -> None:
        await conn.execute("DELETE FROM lashflow_tool_slots WHERE name = $1 AND run_id = $2 "
                           "AND step_key = $3 AND owner = $4", name, run_id, step_key, owner)

    async def rate_limit_rows(self, conn: asyncpg.Connection, name: str | None) -> list[Any]:
        if name is None:
            return list(await conn.fetch(f"SELECT {RATE_COLUMNS} FROM lashflow_rate_limits "
                                         "ORDER BY name"))
        return list(await conn.fetch(f"SELECT {RATE_COLUMNS} FROM lashflow_rate_limits "
                                     "WHERE name = $1", name))

    async def put_rate_limit(self, conn: asyncpg.Connection, name: str, n: float,
                             period: float, now: float) -> bool:
        return bool(await conn.fetchval(
            f"INSERT INTO lashflow_rate_limits ({RATE_COLUMNS}) VALUES "
            "($1, $2, $3, 0, 0, 0, 0, $4, $4) ON CONFLICT (name) DO UPDATE SET "
            "rate_n = EXCLUDED.rate_n, rate_period = EXCLUDED.rate_period, "
            "updated_at = EXCLUDED.updated_at RETURNING (xmax = 0)", name, n, period, now))

    async def delete_rate_limit(self, conn: asyncpg.Connection, name: str) -> bool:
        return await conn.fetchval("DELETE FROM lashflow_rate_limits WHERE name = $1 "
                                   "RETURNING 1", name) is not None

    async def slots_held(self, conn: asyncpg.Connection, now: float) -> list[Any]:
        return list(await conn.fetch(f"SELECT name, COUNT(*) FROM lashflow_tool_slots AS s "
                                     f"WHERE {_LIVE} GROUP BY name ORDER BY name", now))
