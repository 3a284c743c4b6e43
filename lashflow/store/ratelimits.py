"""Tools' rate limits and global concurrency in the store (ADR 0036).

- **A rate** is a token bucket kept as a theoretical arrival time ``tat`` (GCRA, no
  burst), one row per bucket: a named limit (``lashflow ratelimit set``) or a tool's own
  (``tool:MODULE.NAME``, its rate from the tool's code). A take *reserves*: ``count``
  slots from ``max(tat, now)``, one every ``period / n``, and moves ``tat`` past them, in
  one statement (SQLite: on the one writer; PostgreSQL: an ``UPDATE`` that holds the
  row's lock, so takes from every machine line up there). Slots are never handed out
  twice, so no window of one period holds more than ``n`` of them. ``now`` is the
  caller's clock, as for leases: machines sharing a PostgreSQL keep theirs in sync.
- **Global concurrency** is counted, never kept: a slot is a row naming the run, step,
  lease owner and lease generation that holds it, and it counts only while that run's
  lease is live (same owner and generation, not expired). A SIGKILLed worker's slots
  come back when its leases expire, as a queue's do (ADR 0031). Taking one counts and
  inserts under a lock (SQLite: the writer; PostgreSQL: an advisory lock in
  ``lashflow_take_slot``).
"""

from __future__ import annotations

from typing import Any

from .base import RateLimitRow, RateTake
from .programs import Program, one

RATE_COLUMNS = "name, rate_n, rate_period, tat, calls, delayed, own, created_at, updated_at"


def rate_from_row(row: Any) -> RateLimitRow:
    return RateLimitRow(row[0], (float(row[1]), float(row[2])), float(row[3]), int(row[4]),
                        int(row[5]), bool(row[6]), float(row[7]), float(row[8]))


def take_rate(name: str, rate: tuple[float, float] | None, count: int,
              now: float) -> Program[RateTake | None]:
    if rate is None:
        row = yield "take_named_rate", (name, count, now)
    else:
        row = yield "take_own_rate", (name, rate[0], rate[1], count, now)
    if row is None:
        return None
    first, n, period = (float(value) for value in row)
    return RateTake(first, period / n)


def take_slot(name: str, limit: int, run_id: str, step_key: str, owner: str, generation: int,
              now: float) -> Program[bool]:
    return bool((yield "take_slot", (name, limit, run_id, step_key, owner, generation, now)))


def rate_limits(name: str | None) -> Program[list[RateLimitRow]]:
    return [rate_from_row(row) for row in (yield "rate_limit_rows", (name,))]


def slots_held(now: float) -> Program[dict[str, int]]:
    return {str(name): int(count) for name, count in (yield "slots_held", (now,))}


class RateLimitStore:
    """The rate-limit methods of ``CoreStore`` (mixed in)."""

    async def take_rate(self, name: str, rate: tuple[float, float] | None, count: int,
                        now: float) -> RateTake | None:
        return await self._write(take_rate, name, rate, int(count), float(now))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def take_slot(self, name: str, limit: int, run_id: str, step_key: str, owner: str,
                        generation: int, now: float) -> bool:
        return await self._write(take_slot, name, int(limit), run_id, step_key, owner,  # type: ignore[attr-defined]  # a mixin of CoreStore
                                 int(generation), float(now))

    async def release_slot(self, name: str, run_id: str, step_key: str, owner: str) -> None:
        await self._write(one, "release_slot", name, run_id, step_key, owner, atomic=False)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def rate_limits(self, name: str | None = None) -> list[RateLimitRow]:
        return await self._read(rate_limits, name, scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def put_rate_limit(self, name: str, rate: tuple[float, float], now: float) -> bool:
        return bool(await self._write(one, "put_rate_limit", name, float(rate[0]),  # type: ignore[attr-defined]  # a mixin of CoreStore
                                      float(rate[1]), float(now), atomic=False))

    async def delete_rate_limit(self, name: str) -> bool:
        return bool(await self._write(one, "delete_rate_limit", name, atomic=False))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def slots_held(self, now: float) -> dict[str, int]:
        return await self._read(slots_held, float(now), scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore


# A slot counts while its run's lease is the one that took it (``{runs}`` the runs table).
LIVE_SLOT = ("EXISTS (SELECT 1 FROM {runs} r WHERE r.run_id = s.run_id AND "
             "r.lease_owner = s.owner AND r.generation = s.generation AND "
             "r.lease_expires >= {now})")

__all__ = ["LIVE_SLOT", "RATE_COLUMNS", "RateLimitStore", "rate_from_row", "rate_limits",
           "slots_held", "take_rate", "take_slot"]
