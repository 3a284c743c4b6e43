"""The run list's SQL, shared by both backends: filters, keyset pagination, summaries.

Pages are keyed by ``(created_at, run_id)``, newest first: a page is one indexed range
scan however deep it is (no OFFSET), and the cursor is that key, opaque to callers.
Several statuses become one ``UNION ALL`` of per-status scans, each served by the
``(status, created_at, run_id)`` index, so no page ever sorts the whole table.
"""

from __future__ import annotations

import base64
from typing import Any, Callable

from ..errors import JournalCorrupt, UsageError
from ..json_text import ascii_compact
from .base import RunPage, RunQuery, RunSummary, StoreStats
from .rows import loads, run_status

# A run's delivered signals, per name in delivery order (a run detail shows those its
# process has not taken yet).
SIGNALS_OF_RUN = "SELECT name, ordinal, payload FROM {table} WHERE run_id = ? ORDER BY name, ordinal"

SUMMARY_COLUMNS = ("run_id, process, status, parent_run_id, created_at, updated_at, waiting, "
                   "error, wake_at, cancel_requested, lease_owner, lease_expires, meta")
STATE_COLUMNS = "run_id, status, created_at"  # a bulk action's page: nothing to decode


def encode_cursor(created_at: float, run_id: str) -> str:
    raw = ascii_compact([created_at, run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, run_id = loads(raw.decode())
        if isinstance(created_at, (int, float)) and isinstance(run_id, str):
            return float(created_at), run_id
    except (ValueError, TypeError):
        pass
    raise UsageError(f"bad cursor {cursor[:40]!r}: pass the next_cursor a page returned")


JsonField = Callable[[str, str, bool], str]
"""How a dialect reads one key of a JSON text column: (column, key, as_int) -> SQL."""


def page_sql(query: RunQuery, table: str, placeholder: Callable[[int], str],
             json_field: JsonField, columns: str = SUMMARY_COLUMNS) -> tuple[str, list[Any]]:
    """One SELECT for one page (``limit + 1`` rows: the extra one says a next page
    exists). ``placeholder(n)`` spells the n-th parameter (``?`` or ``$n``); ``columns``
    must include ``created_at`` and ``run_id`` (the page's order)."""
    params: list[Any] = []

    def param(value: Any) -> str:
        params.append(value)
        return placeholder(len(params))

    def scan(status: str | None) -> str:
        where = [] if status is None else [f"status = {param(status)}"]
        where += filters(query, param, json_field)  # after: ``?`` marks are positional
        if query.cursor is not None:
            created_at, run_id = decode_cursor(query.cursor)
            where.append(f"(created_at, run_id) < ({param(created_at)}, {param(run_id)})")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return (f"SELECT {columns} FROM {table}{clause} "
                f"ORDER BY created_at DESC, run_id DESC LIMIT {int(query.limit) + 1}")

    statuses = sorted(set(query.statuses))
    if len(statuses) <= 1:
        return scan(statuses[0] if statuses else None), params
    parts = " UNION ALL ".join(f"SELECT * FROM ({scan(status)}) AS s{i}"
                               for i, status in enumerate(statuses))
    return (f"SELECT * FROM ({parts}) AS page ORDER BY created_at DESC, run_id DESC "
            f"LIMIT {int(query.limit) + 1}"), params


def filters(query: RunQuery, param: Callable[[Any], str], json_field: JsonField) -> list[str]:
    """The conditions of ``query`` other than status and cursor, ANDed by the caller."""
    where = []

    def any_of(column: str, values: tuple[Any, ...]) -> None:
        where.append(f"{column} IN ({', '.join(param(v) for v in values)})")

    if query.process is not None:
        where.append(f"process = {param(query.process)}")
    if query.processes:
        any_of("process", query.processes)
    if query.parent is not None:
        where.append(f"parent_run_id = {param(query.parent)}")
    if query.queue is not None:
        where.append(f"queue = {param(query.queue)}")
    if query.key is not None:
        where.append(f"queue_key = {param(query.key)}")
    for column, low, high in (("created_at", query.since, query.until),
                              ("updated_at", query.updated_since, query.updated_until)):
        if low is not None:
            where.append(f"{column} >= {param(float(low))}")
        if high is not None:
            where.append(f"{column} < {param(float(high))}")
    if query.versions:
        any_of(json_field("meta", "version", True), tuple(int(v) for v in query.versions))
    if query.error_codes:
        any_of(json_field("error", "code", False), query.error_codes)
    return where


def count_sql(query: RunQuery, table: str, placeholder: Callable[[int], str],
              json_field: JsonField) -> tuple[str, list[Any]]:
    """How many runs ``query`` selects (its limit and cursor aside): one COUNT."""
    params: list[Any] = []

    def param(value: Any) -> str:
        params.append(value)
        return placeholder(len(params))

    where = ([f"status IN ({', '.join(param(s) for s in sorted(set(query.statuses)))})"]
             if query.statuses else [])
    where += filters(query, param, json_field)  # after: ``?`` marks are positional
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT COUNT(*) FROM {table}{clause}", params


def summary_from_row(row: Any) -> RunSummary:
    try:
        meta = loads(row[12]) or {}
        waiting, error = loads(row[6]) or [], loads(row[7])
    except ValueError as exc:
        raise JournalCorrupt(f"run {row[0]}: its row in the runs table is corrupt ({exc}); "
                             "restore the database from a backup", run_id=row[0]) from None
    return RunSummary(
        run_id=row[0], process=row[1], status=run_status(row[0], row[2]), parent_run_id=row[3],
        created_at=row[4], updated_at=row[5], waiting=waiting, error=error, wake_at=row[8], cancel_requested=bool(row[9]),
        lease_owner=row[10], lease_expires=row[11], note=meta.get("note"),
        version=meta.get("version"), paused=meta.get("paused"))


def page_of(rows: list[Any], query: RunQuery) -> RunPage:
    """The page's summaries and the cursor of the next page (None on the last)."""
    return RunPage([summary_from_row(row) for row in rows[: query.limit]],
                   next_cursor(rows, query, SUMMARY_COLUMNS.split(", ").index("created_at")))


def states_of(rows: list[Any], query: RunQuery) -> tuple[list[tuple[str, str]], str | None]:
    """A page of ``STATE_COLUMNS`` rows as (run id, status), and the next page's cursor."""
    return [(row[0], row[1]) for row in rows[: query.limit]], next_cursor(rows, query, 2)


def next_cursor(rows: list[Any], query: RunQuery, created_at: int) -> str | None:
    """The cursor after a page read ``limit + 1`` at a time (None on the last page);
    ``created_at``: that column's index in a row (``run_id`` is the first)."""
    if len(rows) <= query.limit or not query.limit:
        return None
    last = rows[query.limit - 1]
    return encode_cursor(last[created_at], last[0])


__all__ = ["SIGNALS_OF_RUN", "STATE_COLUMNS", "SUMMARY_COLUMNS", "count_sql", "decode_cursor", "encode_cursor",
           "filters", "next_cursor", "page_of", "page_sql", "states_of", "summary_from_row"]


# What ``/metrics`` reads for every process sharing the database.
RUNS_BY_STATUS = "SELECT status, COUNT(*) FROM {table} GROUP BY status"
PARKED_WAITS = "SELECT waiting, updated_at FROM {table} WHERE status = 'waiting'"


def stats_of(by_status: list[Any], parked: list[Any], now: float) -> StoreStats:
    """Fold the rows of ``RUNS_BY_STATUS`` and ``PARKED_WAITS``: a parked run's waits
    count by kind, and it has waited since its row last changed (when it parked)."""
    waits: dict[str, int] = {}
    oldest: dict[str, float] = {}
    for text, parked_at in parked:
        try:
            listed = loads(text) if text else []
        except JournalCorrupt:
            listed = []
        for wait in listed if isinstance(listed, list) else []:
            kind = str(wait.get("kind", "unknown")) if isinstance(wait, dict) else "unknown"
            waits[kind] = waits.get(kind, 0) + 1
            oldest[kind] = max(oldest.get(kind, 0.0), now - parked_at)
    return StoreStats({str(status): int(count) for status, count in by_status}, waits, oldest)
