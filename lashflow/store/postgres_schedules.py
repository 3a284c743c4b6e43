"""PostgreSQL's SQL for the schedule statements (``programs.STATEMENTS``), mixed
into the dialect's statements; the table comes with schema version 5."""

from __future__ import annotations

from typing import Any

import asyncpg

from .queries import SUMMARY_COLUMNS
from .schedules import SCHEDULE_COLUMNS
from .sqlite_schedules import prefix_end

_C = 'COLLATE "C"'

MIGRATION = [
    f"""CREATE TABLE IF NOT EXISTS lashflow_schedules (
        name TEXT {_C} PRIMARY KEY, definition TEXT NOT NULL, state TEXT NOT NULL,
        paused BOOLEAN NOT NULL DEFAULT FALSE, note TEXT, due_at DOUBLE PRECISION,
        version BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS lashflow_schedules_due ON lashflow_schedules (due_at) "
    "WHERE NOT paused AND due_at IS NOT NULL",
]


class ScheduleStatements:
    async def schedule_row(self, conn: asyncpg.Connection, name: str) -> Any:
        return await conn.fetchrow(
            f"SELECT {SCHEDULE_COLUMNS} FROM lashflow_schedules WHERE name = $1", name)

    async def schedule_rows(self, conn: asyncpg.Connection) -> list[Any]:
        return list(await conn.fetch(
            f"SELECT {SCHEDULE_COLUMNS} FROM lashflow_schedules ORDER BY name"))

    async def due_schedules(self, conn: asyncpg.Connection, now: float, limit: int) -> list[Any]:
        return list(await conn.fetch(
            f"SELECT {SCHEDULE_COLUMNS} FROM lashflow_schedules WHERE NOT paused AND due_at IS "
            "NOT NULL AND due_at <= $1 ORDER BY due_at LIMIT $2", now, limit))

    async def insert_schedule(self, conn: asyncpg.Connection, values: tuple[Any, ...]) -> bool:
        return await conn.fetchval(
            f"INSERT INTO lashflow_schedules ({SCHEDULE_COLUMNS}) VALUES "
            "($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (name) DO NOTHING RETURNING 1",
            *values) is not None

    async def swap_schedule(self, conn: asyncpg.Connection, values: tuple[Any, ...],
                            expected: int) -> bool:
        return await conn.fetchval(
            "UPDATE lashflow_schedules SET definition = $2, state = $3, paused = $4, note = $5, "
            "due_at = $6, version = $7, created_at = $8, updated_at = $9 "
            "WHERE name = $1 AND version = $10 RETURNING 1", *values, expected) is not None

    async def delete_schedule(self, conn: asyncpg.Connection, name: str) -> bool:
        return await conn.fetchval("DELETE FROM lashflow_schedules WHERE name = $1 RETURNING 1",
                                   name) is not None

    async def runs_with_prefix(self, conn: asyncpg.Connection, prefix: str,
                               limit: int) -> list[Any]:
        return list(await conn.fetch(
            f"SELECT {SUMMARY_COLUMNS} FROM lashflow_runs WHERE run_id >= $1 AND run_id < $2 "
            "ORDER BY created_at DESC, run_id DESC LIMIT $3", prefix, prefix_end(prefix), limit))

    async def run_statuses(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return [tuple(row) for row in await conn.fetch(
            "SELECT run_id, status FROM lashflow_runs WHERE run_id = ANY($1::text[])", run_ids)]
