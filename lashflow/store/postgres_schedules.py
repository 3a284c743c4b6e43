"""PostgreSQL's SQL for the schedule statements (``programs.STATEMENTS``), mixed
into the dialect's statements; the table comes with schema version 6."""

from __future__ import annotations

from typing import Any

import asyncpg

from .base import RunRecord
from .queries import SUMMARY_COLUMNS
from .rows import QUEUE_RUN_COLUMNS, run_queue
from .rows import RUN_COLUMNS, run_values
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

    async def swap_schedule_batch(self, conn: asyncpg.Connection, values: list[tuple[Any, ...]],
                                  expected: list[int]) -> list[str]:
        """Every swap of the batch in one statement, the rows locked first in name order
        (two workers' batches never lock in opposite orders)."""
        names = [row[0] for row in values]
        await conn.execute("SELECT 1 FROM lashflow_schedules WHERE name = ANY($1::text[]) "
                           "ORDER BY name FOR UPDATE", names)
        columns = [list(column) for column in zip(*values)]
        rows = await conn.fetch(
            "UPDATE lashflow_schedules s SET definition = v.definition, state = v.state, "
            "paused = v.paused, note = v.note, due_at = v.due_at, version = v.version, "
            "created_at = v.created_at, updated_at = v.updated_at FROM unnest($1::text[], "
            "$2::text[], $3::text[], $4::bool[], $5::text[], $6::float8[], $7::bigint[], "
            "$8::float8[], $9::float8[], $10::bigint[]) AS v(name, definition, state, paused, "
            "note, due_at, version, created_at, updated_at, expected) "
            "WHERE s.name = v.name AND s.version = v.expected RETURNING s.name",
            *columns, expected)
        return [row[0] for row in rows]

    async def insert_runs(self, conn: asyncpg.Connection, runs: list[RunRecord]) -> None:
        columns = [list(column) for column in zip(*(run_values(run) + run_queue(run)
                                                    for run in runs))]
        inserted = await conn.fetchval(
            f"WITH added AS (INSERT INTO lashflow_runs ({RUN_COLUMNS}, {QUEUE_RUN_COLUMNS}) "
            "SELECT * FROM unnest("
            "$1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], "
            "$7::text[], $8::text[], $9::text[], $10::text[], $11::float8[], $12::float8[], "
            "$13::text[], $14::float8[], $15::bigint[], $16::bool[], $17::float8[], "
            "$18::text[], $19::text[], $20::text[], $21::int[]) ON CONFLICT (run_id) "
            "DO NOTHING RETURNING 1) "
            "SELECT count(*) FROM added", *columns)
        if inserted:  # new queued runs wake the idle workers (sent with the commit)
            # a mixin of the PostgreSQL statements, which own the channel
            await conn.execute("SELECT pg_notify($1, '')", self.channel)  # type: ignore[attr-defined]

    async def next_due_at(self, conn: asyncpg.Connection) -> float | None:
        return await conn.fetchval("SELECT MIN(due_at) FROM lashflow_schedules WHERE NOT paused "
                                   "AND due_at IS NOT NULL")

    async def delete_schedule(self, conn: asyncpg.Connection, name: str) -> bool:
        return await conn.fetchval("DELETE FROM lashflow_schedules WHERE name = $1 RETURNING 1",
                                   name) is not None

    async def drop_ahead(self, conn: asyncpg.Connection, prefix: str, after: float) -> None:
        """Delete the schedule's runs written ahead for ticks after ``after``: queued,
        never claimed, not before a later time (and their first event)."""
        await conn.execute(
            "WITH gone AS (DELETE FROM lashflow_runs WHERE run_id >= $1 AND run_id < $2 AND "
            "status = 'queued' AND generation = 0 AND lease_owner IS NULL AND wake_at > $3 "
            "RETURNING run_id) DELETE FROM lashflow_events WHERE run_id IN (SELECT run_id "
            "FROM gone)", prefix, prefix_end(prefix), after)

    async def runs_with_prefix(self, conn: asyncpg.Connection, prefix: str,
                               limit: int) -> list[Any]:
        return list(await conn.fetch(
            f"SELECT {SUMMARY_COLUMNS} FROM lashflow_runs WHERE run_id >= $1 AND run_id < $2 "
            "ORDER BY created_at DESC, run_id DESC LIMIT $3", prefix, prefix_end(prefix), limit))

    async def run_statuses(self, conn: asyncpg.Connection, run_ids: list[str]) -> list[Any]:
        return [tuple(row) for row in await conn.fetch(
            "SELECT run_id, status FROM lashflow_runs WHERE run_id = ANY($1::text[])", run_ids)]
