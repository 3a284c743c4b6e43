"""SQLite's SQL for the schedule statements (``programs.STATEMENTS``), mixed into
the dialect's statements; the table comes with schema version 6."""

from __future__ import annotations

import sqlite3
from typing import Any

from .base import RunRecord
from .queries import SUMMARY_COLUMNS
from .rows import QUEUE_RUN_COLUMNS, run_queue
from .rows import RUN_COLUMNS, run_values
from .schedules import SCHEDULE_COLUMNS

MIGRATION = [
    """CREATE TABLE IF NOT EXISTS schedules (
        name TEXT PRIMARY KEY, definition TEXT NOT NULL, state TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0, note TEXT, due_at REAL,
        version INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS schedules_due ON schedules (due_at) "
    "WHERE paused = 0 AND due_at IS NOT NULL",
]


def prefix_end(prefix: str) -> str:
    """The first key after every key that starts with ``prefix`` (which ends in '@')."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class ScheduleStatements:
    def schedule_row(self, conn: sqlite3.Connection, name: str) -> Any:
        return conn.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?",
                            (name,)).fetchone()

    def schedule_rows(self, conn: sqlite3.Connection) -> list[Any]:
        return conn.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name").fetchall()

    def due_schedules(self, conn: sqlite3.Connection, now: float, limit: int) -> list[Any]:
        return conn.execute(
            f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE paused = 0 AND due_at IS NOT NULL "
            "AND due_at <= ? ORDER BY due_at LIMIT ?", (now, limit)).fetchall()

    def insert_schedule(self, conn: sqlite3.Connection, values: tuple[Any, ...]) -> bool:
        return conn.execute(f"INSERT OR IGNORE INTO schedules ({SCHEDULE_COLUMNS}) VALUES "
                            "(?,?,?,?,?,?,?,?,?)", values).rowcount == 1

    def swap_schedule(self, conn: sqlite3.Connection, values: tuple[Any, ...],
                      expected: int) -> bool:
        name, *rest = values
        return conn.execute(
            "UPDATE schedules SET definition = ?, state = ?, paused = ?, note = ?, due_at = ?, "
            "version = ?, created_at = ?, updated_at = ? WHERE name = ? AND version = ?",
            (*rest, name, expected)).rowcount == 1

    def swap_schedule_batch(self, conn: sqlite3.Connection, values: list[tuple[Any, ...]],
                            expected: list[int]) -> list[str]:
        return [row[0] for row, version in zip(values, expected)
                if self.swap_schedule(conn, row, version)]

    def insert_runs(self, conn: sqlite3.Connection, runs: list[RunRecord]) -> None:
        conn.executemany(f"INSERT OR IGNORE INTO runs ({RUN_COLUMNS}, {QUEUE_RUN_COLUMNS}) "
                         f"VALUES ({','.join('?' * 21)})",
                         [run_values(run) + run_queue(run) for run in runs])

    def next_due_at(self, conn: sqlite3.Connection) -> float | None:
        row = conn.execute("SELECT MIN(due_at) FROM schedules WHERE paused = 0 "
                           "AND due_at IS NOT NULL").fetchone()
        return None if row is None else row[0]

    def delete_schedule(self, conn: sqlite3.Connection, name: str) -> bool:
        return conn.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount == 1

    def drop_ahead(self, conn: sqlite3.Connection, prefix: str, after: float) -> None:
        """Delete the schedule's runs written ahead for ticks after ``after``: queued,
        never claimed, not before a later time (and their first event)."""
        found = [row[0] for row in conn.execute(
            "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? AND status = 'queued' "
            "AND generation = 0 AND lease_owner IS NULL AND wake_at > ?",
            (prefix, prefix_end(prefix), after))]
        for run_id in found:
            conn.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    def runs_with_prefix(self, conn: sqlite3.Connection, prefix: str, limit: int) -> list[Any]:
        return conn.execute(
            f"SELECT {SUMMARY_COLUMNS} FROM runs WHERE run_id >= ? AND run_id < ? "
            "ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (prefix, prefix_end(prefix), limit)).fetchall()

    def run_statuses(self, conn: sqlite3.Connection, run_ids: list[str]) -> list[Any]:
        found: list[Any] = []
        for start in range(0, len(run_ids), 500):  # SQLite bounds a statement's parameters
            chunk = run_ids[start:start + 500]
            found += conn.execute(f"SELECT run_id, status FROM runs WHERE run_id IN "
                                  f"({','.join('?' * len(chunk))})", chunk).fetchall()
        return found
