"""Queues in the store: their limits, the gate a queued run's claim passes, and the
listing that orders a queue's ready runs (ADR 0031).

A run enters a queue when it is created (columns ``queue``, ``queue_key``, ``priority``
of its row, also kept in its meta for reads). What the queue allows is decided here
once, for both backends:

- **Concurrency** is counted, never kept as a counter: a queue slot is a live lease of
  one of its runs (a worker driving it). A run that parks hands its lease back, and so
  its slot; a SIGKILLed worker's slots come back when its leases expire. Nothing has
  to be decremented, so nothing can leak.
- **Rates** are a token bucket per queue and per (queue, key), kept as a theoretical
  arrival time (GCRA, no burst): a start is allowed at ``t >= tat`` and moves ``tat``
  to ``max(tat, t) + period / n``, so no half-open window of one period holds more
  than ``n`` starts.
- **Fairness** is start-time fair queueing: each key has a finish tag, the queue a
  virtual time; a start of key ``k`` takes ``start = max(vtime, finish_k)``, then
  ``finish_k = start + 1 / weight_k`` and ``vtime = start``. A key idle for long comes
  back at the queue's virtual time (no burst of credit).

The gate runs while the queue's row is locked, so two workers never both take the last
slot, and it is one statement on the wire: SQLite runs ``gate`` on its one writer, in
one transaction; PostgreSQL calls ``lashflow_gate_claim``, a function that applies the
same rule in the server, where the lock is held for microseconds (a gate of several
round trips held it while the claiming worker's event loop was busy elsewhere, and
three workers spent more time waiting for it than claiming). Only runs in a queue pay
for it: an unqueued run's claim is the one statement it always was.
"""

from __future__ import annotations

from typing import Any

from ..states import SETTLED
from .base import Claimed, QueueRow, QueueStats, RunRecord
from .leases import may_claim
from .programs import Program, one
from .rows import dumps, run_from_row

QUEUE_COLUMNS = ("name, concurrency, per_key, rate_n, rate_period, key_rate_n, key_rate_period, "
                 "priority_levels, fair, paused, vtime, created_at, updated_at")
NO_KEY = ""  # the key of a run submitted without one


def queue_from_row(row: Any) -> QueueRow:
    return QueueRow(row[0], row[1], row[2], None if row[3] is None else (row[3], row[4]),
                    None if row[5] is None else (row[5], row[6]), int(row[7]), bool(row[8]),
                    bool(row[9]), float(row[10]), float(row[11]), float(row[12]))


# -- the gate -----------------------------------------------------------------------------
def next_arrival(tat: float | None, now: float, n: float, period: float) -> float | None:
    """GCRA: the bucket's new theoretical arrival time if a start is allowed at ``now``,
    else None."""
    if tat is not None and now < tat:
        return None
    return max(tat or now, now) + period / n


def claim_queued(run_id: str, owner: str, ttl: float, now: float,
                 steal_from_dead: bool) -> Program[Claimed | None]:
    """Claim a run of a queue if the queue's limits allow it now (see the module doc):
    the lease is judged here (``may_claim``, which may look at this host's processes),
    the queue's limits by ``gate_claim``, one statement that swaps the lease only if
    nobody moved it since it was read."""
    lease = yield "queue_lease_of", (run_id,)
    if lease is None:
        return None
    holder, held_until, generation, status = lease[:4]
    if status in SETTLED or not may_claim(holder, held_until, owner, now,
                                         steal_from_dead=steal_from_dead):
        return None
    dead = holder not in (None, owner) and held_until >= now
    row = yield "gate_claim", (run_id, owner, now, now + ttl, generation, holder, dead)
    return None if row is None else Claimed(run_from_row(row), holder)


def gate(run_id: str, owner: str, now: float, expires: float, generation: int,
         holder: str | None, dead: bool) -> Program[Any]:
    """The queue's gate as statements (the rule PostgreSQL's ``lashflow_gate_claim``
    function applies in the server): under the queue's lock, refuse a paused queue, a
    full queue or key, a rate that does not allow a start yet; else swap the lease and,
    for a run's first start, move its buckets and fairness tags. The claimed run's row,
    or None."""
    lease = yield "queue_lease_of", (run_id,)
    if lease is None:
        return None
    status, queue, key = lease[3], lease[4], lease[5]
    row = yield "lock_queue", (queue,)
    starting = status == "queued" and generation == 0
    config = None if row is None else queue_from_row(row)  # None: the queue was deleted
    buckets: list[tuple[str, float]] = []
    if config is not None:
        if config.paused:
            return None
        if config.concurrency is not None or config.per_key is not None:
            total, of_key = yield "queue_held", (queue, key, now, run_id)
            if config.concurrency is not None and total >= config.concurrency:
                return None
            if config.per_key is not None and of_key >= config.per_key:
                return None
        if starting:
            for bucket_key, rate in ((NO_KEY, config.rate), (key, config.key_rate)):
                if rate is None:
                    continue
                tat = yield "bucket", (queue, bucket_key)
                moved = next_arrival(tat, now, rate[0], rate[1])
                if moved is None:
                    return None
                buckets.append((bucket_key, moved))
    claimed = yield "claim_swap", (run_id, owner, now, expires, generation, holder, dead)
    if claimed is None:
        return None
    if config is not None and starting:
        for bucket_key, tat in buckets:
            yield "put_bucket", (queue, bucket_key, tat)
        if config.fair:
            yield "fair_start", (queue, key, config.vtime)
    return claimed


# -- debounce and singletons --------------------------------------------------------------
def debounce_run(run: RunRecord, keep_newest: bool) -> Program[tuple[RunRecord, bool]]:
    """Collapse ``run`` (queued, its ``wake_at`` the end of its debounce window) into the
    run of its queue and key that is still in its window, never started: that run's
    window moves to ``run``'s end and, ``keep_newest``, it takes ``run``'s input. With
    none, ``run`` is stored. Under the queue's lock: two submissions never both store."""
    queue, key, _ = run_queue(run)
    yield "lock_queue", (queue,)
    row = yield "debounce_target", (queue, key)
    if row is not None:
        target = run_from_row(row)
        if keep_newest:
            target.input, target.input_hash = run.input, run.input_hash
            target.source_hash, target.meta = run.source_hash, run.meta
        target.wake_at = run.wake_at
        if (yield "debounce_update", (target.run_id, dumps(target.input), target.input_hash,
                                      target.source_hash, dumps(target.meta),
                                      target.wake_at)):
            return target, False
    yield "insert_run", (run,)
    return run, True


def singleton_run(run: RunRecord, cancel_running: bool
                  ) -> Program[tuple[RunRecord, bool, list[str]]]:
    """One run at a time per key: with a run of ``run``'s queue and key not settled,
    either answer it (skip: nothing stored) or ask it to cancel and store ``run``
    (cancel-running). Under the queue's lock. (stored or existing run, created, the runs
    asked to cancel)."""
    queue, key, _ = run_queue(run)
    yield "lock_queue", (queue,)
    found = list((yield "key_unsettled", (queue, key)))
    if found and not cancel_running:
        row = yield "run_row", (found[0],)
        if row is not None:
            return run_from_row(row), False, []
    for run_id in found:
        yield "request_cancel", (run_id,)
    yield "insert_run", (run,)
    return run, True, found


# -- reads and changes ---------------------------------------------------------------------
def get_queue(name: str) -> Program[QueueRow | None]:
    row = yield "queue_row", (name,)
    if row is None:
        return None
    queue = queue_from_row(row)
    queue.weights = dict((yield "queue_weights", (name,)))
    return queue


def list_queues() -> Program[list[QueueRow]]:
    return [queue_from_row(row) for row in (yield "queue_rows", ())]


def put_queue(queue: QueueRow, create: bool) -> Program[bool]:
    """Insert (``create``: only if the name is free) or update the queue's limits (its
    virtual time and creation time stay); its keys' weights are written too."""
    if create:
        written = yield "insert_queue", (queue.values(),)
    else:
        written = yield "update_queue", (queue.values(),)
    if written:
        for key, weight in queue.weights.items():
            yield "put_weight", (queue.name, key, float(weight))
    return bool(written)


def queue_stats(name: str, now: float) -> Program[QueueStats]:
    stats = QueueStats()
    for priority, key, started, count, oldest in (yield "queue_depths", (name, now)):
        if started:
            stats.running_by_key[key] = stats.running_by_key.get(key, 0) + int(count)
            continue
        stats.waiting_by_priority[int(priority)] = \
            stats.waiting_by_priority.get(int(priority), 0) + int(count)
        stats.waiting_by_key[key] = stats.waiting_by_key.get(key, 0) + int(count)
        if oldest is not None and (stats.oldest_waiting is None or oldest < stats.oldest_waiting):
            stats.oldest_waiting = float(oldest)
    for key, tat in (yield "buckets_of", (name,)):
        if tat > now:
            if key == NO_KEY:
                stats.rate_limited_until = float(tat)
            else:
                stats.keys_rate_limited += 1
    return stats


class QueueStore:
    """The queue methods of ``CoreStore`` (mixed in)."""

    async def get_queue(self, name: str) -> QueueRow | None:
        return await self._read(get_queue, name)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def list_queues(self) -> list[QueueRow]:
        return await self._read(list_queues, scan=True)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def put_queue(self, queue: QueueRow, *, create: bool) -> bool:
        """False: ``create`` and the name is taken, or an update of no such queue."""
        return bool(await self._write(put_queue, queue, create))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def delete_queue(self, name: str) -> bool:
        """Delete the queue (its runs stay, and are claimed as if unqueued)."""
        return bool(await self._write(one, "delete_queue", name, atomic=False))  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def debounce_run(self, run: RunRecord, *, keep_newest: bool = True
                           ) -> tuple[RunRecord, bool]:
        return await self._write(debounce_run, run, keep_newest)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def singleton_run(self, run: RunRecord, *, cancel_running: bool
                            ) -> tuple[RunRecord, bool, list[str]]:
        return await self._write(singleton_run, run, cancel_running)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def queue_stats(self, name: str, now: float) -> QueueStats:
        return await self._read(queue_stats, name, float(now), scan=True, snapshot=True)  # type: ignore[attr-defined]  # a mixin of CoreStore

    async def queue_claimable(self, now: float, limit: int) -> tuple[list[str], float | None]:
        """Runs of queues a worker may try to claim now, best first (priority, then
        fairness or age), already cut to what each key's and queue's limits allow, and
        when a rate-limited queue or key next allows a start (None: none is)."""
        rows = await self._read(one, "queue_candidates", float(now), int(limit))  # type: ignore[attr-defined]  # a mixin of CoreStore
        ready = [row[0] for row in rows if row[0] is not None]
        later = [float(row[1]) for row in rows if row[0] is None and row[1] is not None]
        return ready, min(later) if later else None


# The ready runs of queues, ranked. ``$1`` now, ``$2`` the limit. ``{greatest}`` is the
# dialect's two-argument maximum. A key's runs are numbered (``nth``) so that a key with
# room for two more runs lists at most two, and a queue's (``qn``) so that a queue with
# one free slot lists one run (a longer list would be claimed one by one as slots free,
# after runs that came later and rank higher); fairness orders by each run's start tag
# as if its key's earlier runs started first. The second part says when the soonest
# rate-limited queue or key with ready runs allows a start again.
CANDIDATES = """
WITH held AS (
    SELECT queue, queue_key, COUNT(*) AS n FROM {runs}
    WHERE queue IS NOT NULL AND lease_owner IS NOT NULL AND lease_expires >= $1
      AND status NOT IN ('finished', 'failed', 'cancelled')
    GROUP BY queue, queue_key),
held_queue AS (SELECT queue, SUM(n) AS n FROM held GROUP BY queue),
ready AS (
    SELECT r.run_id, r.queue, r.queue_key, r.priority, r.created_at,
           (r.status = 'queued' AND r.generation = 0) AS starting,
           ROW_NUMBER() OVER (PARTITION BY r.queue, r.queue_key
                              ORDER BY r.priority, r.created_at, r.run_id) AS nth
    FROM {runs} r
    WHERE r.queue IS NOT NULL AND (r.lease_owner IS NULL OR r.lease_expires < $1)
      AND (r.status = 'running'
           OR (r.status = 'queued' AND (r.wake_at IS NULL OR r.wake_at <= $1))
           OR (r.status = 'waiting' AND r.wake_at IS NOT NULL AND r.wake_at <= $1))),
ranked AS (
    SELECT ready.run_id, ready.priority, ready.created_at, ready.queue,
           q.concurrency - COALESCE(t.n, 0) AS room,
           CASE WHEN q.fair = 1 THEN {greatest}(q.vtime, COALESCE(k.finish, 0))
                + (ready.nth - 1) / COALESCE(k.weight, 1.0) ELSE 0 END AS tag,
           CASE WHEN ready.starting AND qb.tat > $1 THEN qb.tat
                WHEN ready.starting AND kb.tat > $1 THEN kb.tat END AS limited
    FROM ready LEFT JOIN {queues} q ON q.name = ready.queue
    LEFT JOIN held h ON h.queue = ready.queue AND h.queue_key = ready.queue_key
    LEFT JOIN held_queue t ON t.queue = ready.queue
    LEFT JOIN {keys} k ON k.queue = ready.queue AND k.key = ready.queue_key
    LEFT JOIN {buckets} qb ON qb.queue = ready.queue AND qb.key = '' AND q.rate_n IS NOT NULL
    LEFT JOIN {buckets} kb ON kb.queue = ready.queue AND kb.key = ready.queue_key
         AND q.key_rate_n IS NOT NULL
    WHERE COALESCE(q.paused, 0) = 0
      AND (q.per_key IS NULL OR COALESCE(h.n, 0) + ready.nth <= q.per_key)),
numbered AS (
    SELECT run_id, priority, created_at, tag, room,
           ROW_NUMBER() OVER (PARTITION BY queue ORDER BY priority, tag, created_at, run_id)
               AS qn
    FROM ranked WHERE limited IS NULL)
SELECT run_id, NULL FROM (
    SELECT run_id FROM numbered WHERE room IS NULL OR qn <= room
    ORDER BY priority, tag, created_at, run_id LIMIT $2) AS best
UNION ALL
SELECT NULL, MIN(limited) FROM ranked WHERE limited IS NOT NULL
"""

# ``queue show``: runs of the queue by priority, key and whether they hold a slot now
# (started: a live lease), with the oldest creation time of each group.
DEPTHS = """
SELECT priority, queue_key,
       (lease_owner IS NOT NULL AND lease_expires >= $2) AS started,
       COUNT(*), MIN(created_at)
FROM {runs} WHERE queue = $1 AND status NOT IN ('finished', 'failed', 'cancelled')
GROUP BY priority, queue_key, (lease_owner IS NOT NULL AND lease_expires >= $2)
"""


def queue_sql(template: str, prefix: str, greatest: str = "MAX") -> str:
    return template.format(runs=f"{prefix}runs", queues=f"{prefix}queues",
                           keys=f"{prefix}queue_keys", buckets=f"{prefix}buckets",
                           greatest=greatest)


QUEUE_RUN_COLUMNS = "queue, queue_key, priority"  # after RUN_COLUMNS when a run is inserted


def run_queue(run: RunRecord) -> tuple[str | None, str | None, int | None]:
    """The values of ``QUEUE_RUN_COLUMNS`` for ``run``: what its meta's ``queue`` names."""
    entry = run.meta.get("queue")
    if not isinstance(entry, dict):
        return None, None, None
    return entry.get("name"), entry.get("key", NO_KEY), entry.get("priority")


__all__ = ["CANDIDATES", "DEPTHS", "NO_KEY", "QUEUE_COLUMNS", "QueueRow", "QueueStats",
           "QUEUE_RUN_COLUMNS", "QueueStore", "claim_queued", "gate", "queue_from_row", "queue_sql",
           "run_queue"]
