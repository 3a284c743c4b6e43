"""Schedules in the store: one row per schedule, changed only by compare-and-swap on its
``version``, and the program that fires ticks.

Exactly one run per tick rests on two facts written here: a tick's runs are inserted in
the same transaction as the swap that moves the schedule past the tick (a worker killed
mid-fire leaves neither), and a run's id is derived from the schedule and the tick, so
even a second insert of the same tick (a backfill over fired ticks) finds the run there
(``INSERT ... ON CONFLICT DO NOTHING``). Two workers racing for one tick both read
version N; one swap wins, the other changes nothing and inserts nothing.

What a schedule means (its spec, its overlap policy) is the durable layer's business:
the store keeps ``definition`` and ``state`` as JSON it does not read.
"""

from __future__ import annotations

from typing import Any, Collection

from .base import RunRecord, RunSummary, ScheduleRow
from .programs import Program, enqueued, one
from .queries import summary_from_row
from .rows import loads

SCHEDULE_COLUMNS = "name, definition, state, paused, note, due_at, version, created_at, updated_at"


def schedule_from_row(row: Any) -> ScheduleRow:
    return ScheduleRow(row[0], loads(row[1]), loads(row[2]) or {}, bool(row[3]), row[4],
                       row[5], int(row[6]), float(row[7]), float(row[8]))


def get_schedule(name: str) -> Program[ScheduleRow | None]:
    row = yield "schedule_row", (name,)
    return None if row is None else schedule_from_row(row)


def list_schedules() -> Program[list[ScheduleRow]]:
    return [schedule_from_row(row) for row in (yield "schedule_rows", ())]


def due_schedules(now: float, limit: int) -> Program[list[ScheduleRow]]:
    return [schedule_from_row(row) for row in (yield "due_schedules", (now, limit))]


def swap_schedule(row: ScheduleRow, expected: int | None, runs: list[RunRecord],
                  take_back: float | None) -> Program[bool]:
    """Write ``row`` if the stored version is still ``expected`` (None: only if no such
    schedule exists), then insert ``runs`` (those already there are left as they are).
    ``take_back``: first delete the runs written ahead for ticks whose time is after it
    (``drop_ahead``). False, with nothing written, when someone else changed the
    schedule first."""
    if expected is None:
        written = yield "insert_schedule", (row.values(),)
    else:
        written = yield "swap_schedule", (row.values(), expected)
    if not written:
        return False
    if take_back is not None:
        yield "drop_ahead", (row.name + "@", take_back)
    for run in runs:
        if (yield "insert_run", (run,)):
            yield from enqueued([run])
    return True


def swap_schedules(batch: list[tuple[ScheduleRow, int, list[RunRecord]]]
                   ) -> Program[list[bool]]:
    """``swap_schedule`` for each of ``batch`` (existing schedules only), in one
    transaction and a fixed number of statements: a swap that loses (someone changed that
    schedule first) writes nothing and does not stop the others."""
    won = set((yield "swap_schedule_batch", ([row.values() for row, _, _ in batch],
                                             [expected for _, expected, _ in batch])))
    runs = [run for row, _, row_runs in batch if row.name in won for run in row_runs]
    if runs:
        yield "insert_runs", (runs,)
        yield from enqueued(runs)
    return [row.name in won for row, _, _ in batch]


def delete_schedule(name: str, now: float) -> Program[bool]:
    if not (yield "delete_schedule", (name,)):
        return False
    yield "drop_ahead", (name + "@", now)
    return True


def schedule_runs(name: str, limit: int) -> Program[list[RunSummary]]:
    """The schedule's runs, newest first: ids ``name@...`` are one key range."""
    rows = yield "runs_with_prefix", (name + "@", limit)
    return [summary_from_row(row) for row in rows]


def run_statuses(run_ids: list[str]) -> Program[dict[str, str]]:
    return dict((yield "run_statuses", (run_ids,)))


class ScheduleStore:
    """The schedule methods of ``CoreStore`` (mixed in): each one program or statement."""

    async def get_schedule(self, name: str) -> ScheduleRow | None:
        return await self._read(get_schedule, name)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def list_schedules(self) -> list[ScheduleRow]:
        return await self._read(list_schedules, scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def due_schedules(self, now: float, limit: int = 500) -> list[ScheduleRow]:
        """Unpaused schedules due at ``now``, most overdue first."""
        return await self._read(due_schedules, float(now), limit, scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def swap_schedule(self, row: ScheduleRow, expected: int | None,
                            runs: Collection[RunRecord] = (), *,
                            take_back: float | None = None) -> bool:
        return bool(await self._write(swap_schedule, row, expected, list(runs), take_back))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def swap_schedules(self, batch: Collection[tuple[ScheduleRow, int, list[RunRecord]]]
                             ) -> list[bool]:
        if not batch:
            return []
        return list(await self._write(swap_schedules, list(batch)))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def next_due_at(self) -> float | None:
        """The earliest ``due_at`` of the unpaused schedules (when the next pass has work)."""
        return await self._read(one, "next_due_at")  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def delete_schedule(self, name: str, now: float) -> bool:
        """Delete the schedule (its runs stay, but those written ahead for ticks after
        ``now``); False if there was none."""
        return bool(await self._write(delete_schedule, name, float(now)))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def schedule_runs(self, name: str, limit: int = 20) -> list[RunSummary]:
        return await self._read(schedule_runs, name, limit, scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def run_statuses(self, run_ids: Collection[str]) -> dict[str, str]:
        """The status of each of ``run_ids`` that exists."""
        if not run_ids:
            return {}
        return await self._read(run_statuses, list(run_ids), scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore


__all__ = ["SCHEDULE_COLUMNS", "ScheduleRow", "ScheduleStore", "schedule_from_row"]
