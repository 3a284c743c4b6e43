"""SQLite's SQL for the rate-limit statements (``programs.STATEMENTS``), mixed into the
dialect's statements; the tables come with schema version 10. Every write runs on the one
writer, in an IMMEDIATE transaction: a take, and a slot's count and insert, see one
moment."""

from __future__ import annotations

import sqlite3
from typing import Any

from .ratelimits import LIVE_SLOT, RATE_COLUMNS

MIGRATION = [
    """CREATE TABLE IF NOT EXISTS rate_limits (
        name TEXT PRIMARY KEY, rate_n REAL NOT NULL, rate_period REAL NOT NULL,
        tat REAL NOT NULL DEFAULT 0, calls INTEGER NOT NULL DEFAULT 0,
        delayed INTEGER NOT NULL DEFAULT 0, own INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tool_slots (
        name TEXT NOT NULL, run_id TEXT NOT NULL, step_key TEXT NOT NULL,
        owner TEXT NOT NULL, generation INTEGER NOT NULL, taken_at REAL NOT NULL,
        PRIMARY KEY (name, run_id, step_key))""",
]

_LIVE = LIVE_SLOT.format(runs="runs", now="?")
# ``tat`` on the right of SET is the row's old value, in RETURNING its new one: the first
# slot is ``max(old tat, now)``. A take of ``k`` from a bucket not behind ``now`` gives
# the first slot at once and waits ``k - 1``; from one behind, all ``k`` wait.
_TAKE_SET = ("tat = MAX(tat, :now) + :k * rate_period / rate_n, calls = calls + :k, "
             "delayed = delayed + CASE WHEN tat > :now THEN :k ELSE :k - 1 END, "
             "updated_at = :now")
_TAKE_RETURNING = "RETURNING tat - :k * rate_period / rate_n, rate_n, rate_period"


class RateLimitStatements:
    def take_named_rate(self, conn: sqlite3.Connection, name: str, count: int,
                        now: float) -> Any:
        return conn.execute(f"UPDATE rate_limits SET {_TAKE_SET} WHERE name = :name AND own = 0 "
                            f"{_TAKE_RETURNING}", {"name": name, "k": count, "now": now}
                            ).fetchone()

    def take_own_rate(self, conn: sqlite3.Connection, name: str, n: float, period: float,
                      count: int, now: float) -> Any:
        return conn.execute(
            f"INSERT INTO rate_limits ({RATE_COLUMNS}) VALUES (:name, :n, :period, "
            ":now + :k * :period / :n, :k, :k - 1, 1, :now, :now) ON CONFLICT (name) DO UPDATE "
            f"SET rate_n = :n, rate_period = :period, {_TAKE_SET.replace('rate_', ':')} "
            f"{_TAKE_RETURNING}",
            {"name": name, "n": n, "period": period, "k": count, "now": now}).fetchone()

    def take_slot(self, conn: sqlite3.Connection, name: str, limit: int, run_id: str,
                  step_key: str, owner: str, generation: int, now: float) -> bool:
        conn.execute(f"DELETE FROM tool_slots AS s WHERE name = ? AND NOT {_LIVE}", (name, now))
        return conn.execute(
            "INSERT OR REPLACE INTO tool_slots (name, run_id, step_key, owner, generation, "
            "taken_at) SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT COUNT(*) FROM tool_slots WHERE "
            "name = ? AND NOT (run_id = ? AND step_key = ?)) < ?",
            (name, run_id, step_key, owner, generation, now, name, run_id, step_key, limit)
        ).rowcount == 1

    def release_slot(self, conn: sqlite3.Connection, name: str, run_id: str, step_key: str,
                     owner: str) -> None:
        conn.execute("DELETE FROM tool_slots WHERE name = ? AND run_id = ? AND step_key = ? "
                     "AND owner = ?", (name, run_id, step_key, owner))

    def rate_limit_rows(self, conn: sqlite3.Connection, name: str | None) -> list[Any]:
        if name is None:
            return conn.execute(f"SELECT {RATE_COLUMNS} FROM rate_limits ORDER BY name"
                                ).fetchall()
        return conn.execute(f"SELECT {RATE_COLUMNS} FROM rate_limits WHERE name = ?",
                            (name,)).fetchall()

    def put_rate_limit(self, conn: sqlite3.Connection, name: str, n: float, period: float,
                       now: float) -> bool:
        new = conn.execute("SELECT 1 FROM rate_limits WHERE name = ?", (name,)).fetchone() is None
        conn.execute(f"INSERT INTO rate_limits ({RATE_COLUMNS}) VALUES (?, ?, ?, 0, 0, 0, 0, ?, ?) "
                     "ON CONFLICT (name) DO UPDATE SET rate_n = excluded.rate_n, "
                     "rate_period = excluded.rate_period, updated_at = excluded.updated_at",
                     (name, n, period, now, now))
        return new

    def delete_rate_limit(self, conn: sqlite3.Connection, name: str) -> bool:
        return conn.execute("DELETE FROM rate_limits WHERE name = ?", (name,)).rowcount == 1

    def slots_held(self, conn: sqlite3.Connection, now: float) -> list[Any]:
        return conn.execute(f"SELECT name, COUNT(*) FROM tool_slots AS s WHERE {_LIVE} "
                            "GROUP BY name ORDER BY name", (now,)).fetchall()
