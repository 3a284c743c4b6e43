"""Queues in the store: their limits, the gate a queued run's claim passes, and the
listing that finds a queue's next runs (ADR 0031, ADR 0037).

A run enters a queue when it is created (columns ``queue``, ``queue_key``, ``priority``
and ``fair_tag`` of its row, the first three also kept in its meta for reads). What the
queue allows is decided here once, for both backends:

- **Concurrency** is counted, never kept as a counter: a queue slot is a live lease of
  one of its runs (a worker driving it). A run that parks hands its lease back, and so
  its slot; a SIGKILLed worker's slots come back when its leases expire. Nothing has
  to be decremented, so nothing can leak.
- **Rates** are a token bucket per queue and per (queue, key), kept as a theoretical
  arrival time (GCRA, no burst): a start is allowed at ``t >= tat`` and moves ``tat``
  to ``max(tat, t) + period / n``, so no half-open window of one period holds more
  than ``n`` starts.
- **Fairness** is start-time fair queueing with tags given on arrival: a run of key
  ``k`` entering a fair queue takes ``tag = max(vtime, finish_k)``, then
  ``finish_k = tag + 1 / weight_k``; a start moves the queue's virtual time to its
  run's tag. A key idle for long comes back at the virtual time (no burst of credit).
  As the tag is a column, "priority, then fairness, then age" is the order of one index
  (``runs_queue_next``), and the listing reads a queue's next runs from its front
  instead of ranking every waiting run (ADR 0037).

The gate runs while the queue's row is locked, so two workers never both take the last
slot, and it is one statement on the wire: SQLite runs ``gate`` on its one writer, in
one transaction; PostgreSQL calls ``lashflow_gate_claim``, a function that applies the
same rule in the server, where the lock is held for microseconds. Only runs in a queue
pay for it: an unqueued run's claim is the one statement it always was.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Collection

from ..states import SETTLED, RunStatus
from .base import Claimed, QueueRow, QueueStats, QueueTake, RunRecord
from .leases import may_claim
from .programs import Program, enqueued, one
from .rows import NO_KEY, QUEUE_RUN_COLUMNS, dumps, run_from_row, run_queue
from ..slotted import Slotted

QUEUE_COLUMNS = ("name, concurrency, per_key, rate_n, rate_period, key_rate_n, key_rate_period, "
                 "priority_levels, fair, paused, vtime, created_at, updated_at")
PAGE_MIN = 32  # rows of a queue's front read at once (more when more slots are free)
PAGES = 4  # pages read per queue and listing at most (keys at their limit are passed over)


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
    for a run's first start, move its buckets and the queue's virtual time. The claimed
    run's row, or None."""
    lease = yield "queue_lease_of", (run_id,)
    if lease is None:
        return None
    status, queue, key = lease[3], lease[4], lease[5]
    row = yield "lock_queue", (queue,)
    starting = status == RunStatus.QUEUED and generation == 0
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
            yield "fair_started", (queue, run_id)
    return claimed


# -- the listing ----------------------------------------------------------------------------
class _Front(Slotted):
    """What the listing knows of one queue while it walks the queue's front."""

    __slots__ = ("config", "held", "want", "now", "skip", "picked", "taken", "limited",
                 "queue_tat", "key_tats")

    def __init__(
            self,
            config: QueueRow,
            held: dict[str, int],  # live leases per key
            want: int,  # runs to list at most (the free slots, or the asked limit)
            now: float,
            skip: frozenset[str],
            picked: list[tuple[Any, ...]],
            taken: Counter[str],
            limited: list[float],
            queue_tat: float | None = None,
            key_tats: dict[str, float] | None = None,
    ) -> None:
        self.config = config
        self.held = held
        self.want = want
        self.now = now
        self.skip = skip
        self.picked = picked
        self.taken = taken
        self.limited = limited
        self.queue_tat = queue_tat
        self.key_tats = key_tats

    def admit(self, row: Any) -> None:
        """List ``row`` (run_id, key, priority, tag, created_at, starting, generation of a
        new run or None) if its key has room and, for a first start, the queue's and the
        key's rates allow one now."""
        run_id, key, priority, tag, created, starting, generation = row
        per_key = self.config.per_key
        if len(self.picked) >= self.want or run_id in self.skip or \
                (per_key is not None and self.held.get(key, 0) + self.taken[key] >= per_key):
            return
        if starting:
            for tat in (self.queue_tat, (self.key_tats or {}).get(key)):
                if tat is not None and tat > self.now:
                    self.limited.append(tat)
                    return
        self.taken[key] += 1
        self.picked.append((priority, tag, created, run_id, generation))


def candidates(now: float, limit: int, skip: frozenset[str]
               ) -> Program[tuple[list[tuple[str, int | None]], float | None]]:
    """The runs of queues a worker may try to claim now, best first, cut to what each
    queue's and key's limits allow (at most ``limit``; each with its generation if it is
    new, None if it is being resumed), and when a rate-limited queue or key next allows
    a start (None: none is). The unpaused queues with their held leases by key in one
    statement (``open_queues``); then per queue its runs being resumed with the first
    page of its front
    (``queue_front``, in index order), further pages while keys at their limit were
    passed over and slots are still free. Few statements: each is a round trip on
    PostgreSQL."""
    picked: list[tuple[Any, ...]] = []
    limited: list[float] = []
    queues: dict[str, QueueRow] = {}
    holders: dict[str, dict[str, int]] = {}
    for row in (yield "open_queues", (now,)):
        queues.setdefault(row[0], queue_from_row(row))
        if row[-2] is not None:
            holders.setdefault(row[0], {})[row[-2]] = int(row[-1])
    for config in queues.values():
        held = holders.get(config.name, {})
        want = limit
        if config.concurrency is not None:
            want = min(want, config.concurrency - sum(held.values()))
        if want <= 0:
            continue
        front = _Front(config, held, want, now, skip, [], Counter(), limited)
        if config.rate is not None:
            front.queue_tat = yield "bucket", (config.name, NO_KEY)
        after: tuple[Any, ...] | None = None
        for _ in range(PAGES):
            if len(front.picked) >= want:
                break
            size = max(PAGE_MIN, 2 * want)
            rows = sorted((yield "queue_front", (config.name, now, after, size)),
                          key=lambda r: (r[6] is not None, r[2], r[3], r[4], r[0]))
            yield from _rate_of_keys(front, rows)
            for found in rows:
                front.admit(found)
            page = [found for found in rows if found[6] is not None]
            if len(page) < size:
                break
            last = page[-1]
            after = (last[2], last[3], last[4], last[0])
        picked += front.picked
    picked.sort(key=lambda row: row[:4])
    return [(row[3], row[4]) for row in picked[:limit]], min(limited) if limited else None


def take(now: float, limit: int, owner: str, ttl: float,
         skip: frozenset[str]) -> Program[QueueTake]:
    """SQLite's ``take_turn``: the listing, then every new run it found through the gate
    at once (``gate_claims``: one statement, the gate applied run by run in list order,
    under each queue's lock)."""
    found, allowed_at = yield from candidates(now, limit, skip)
    new = [(run_id, generation) for run_id, generation in found if generation is not None]
    rows = list((yield "gate_claims", ([run_id for run_id, _ in new],
                                       [generation for _, generation in new],
                                       owner, now, now + ttl))) if new else []
    return QueueTake([Claimed(run_from_row(row), None) for row in rows],
                     [run_id for run_id, generation in found if generation is None], allowed_at)


def take_turn(now: float, limit: int, owner: str, ttl: float,
              skip: frozenset[str]) -> Program[QueueTake]:
    """A worker's turn as one statement: SQLite answers it with ``take`` on its writer,
    PostgreSQL with ``lashflow_take_queued``, the same turn in the server (one round trip
    instead of three, ADR 0043)."""
    found: QueueTake = yield "take_turn", (now, limit, owner, ttl, sorted(skip))
    return found


def _rate_of_keys(front: _Front, rows: list[Any]) -> Program[None]:
    """Read the per-key buckets of the keys of ``rows`` not read yet (a queue with a
    rate per key only)."""
    if front.config.key_rate is None:
        return
    if front.key_tats is None:
        front.key_tats = {}
    keys = sorted({row[1] for row in rows if row[5] and row[1] not in front.key_tats})
    if keys:
        front.key_tats.update(dict.fromkeys(keys, 0.0))
        front.key_tats.update(dict((yield "key_buckets", (front.config.name, keys))))


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
    yield from enqueued([run])
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
    yield from enqueued([run])
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

    async def take_queued(self, now: float, limit: int, owner: str, ttl: float,
                          skip: Collection[str] = ()) -> QueueTake:
        """Claim for ``owner`` up to ``limit`` new runs of queues, best first (priority,
        then fairness or age), as each queue's and key's limits allow, in one
        statement; list the runs being resumed, to claim one by one; say when a
        rate-limited queue or key next allows a start."""
        if limit <= 0:
            return QueueTake([], [], None)
        # not one transaction: the listing only reads (the gate judges again) and the
        # claims are one statement; on PostgreSQL the whole turn is one (ADR 0043)
        return await self._write(take_turn, float(now), int(limit), owner, float(ttl),  # type: ignore[attr-defined]  # a mixin of CoreStore
                                 frozenset(skip), atomic=False)


# ``queue show``: runs of the queue by priority, key and whether they hold a slot now
# (started: a live lease), with the oldest creation time of each group.
DEPTHS = """
SELECT priority, queue_key,
       (lease_owner IS NOT NULL AND lease_expires >= $2) AS started,
       COUNT(*), MIN(created_at)
FROM {runs} WHERE queue = $1 AND status NOT IN ('finished', 'failed', 'cancelled')
GROUP BY priority, queue_key, (lease_owner IS NOT NULL AND lease_expires >= $2)
"""

# A queue's runs being resumed (``$1`` the queue, ``$2`` now): handed back while
# running, due after a park, or held by a lease that lapsed; read with the first page
# of the front (``FIRST``). The rest of its ready runs are new (queued, never leased)
# and are read from its front (``FRONT``).
RESUMABLE = """
SELECT run_id, queue_key, priority, fair_tag, created_at, FALSE, CAST(NULL AS BIGINT)
FROM {runs} WHERE queue = $1 AND status IN ('running', 'waiting')
  AND (lease_owner IS NULL OR lease_expires < $2)
  AND (status = 'running' OR (wake_at IS NOT NULL AND wake_at <= $2))
UNION ALL
SELECT run_id, queue_key, priority, fair_tag, created_at, FALSE, CAST(NULL AS BIGINT)
FROM {runs} {held} WHERE queue = $1 AND lease_owner IS NOT NULL AND status = 'queued'
  AND lease_expires < $2 AND (wake_at IS NULL OR wake_at <= $2)
"""

# A page of a queue's front: its new runs in the order they start (priority, fairness
# tag, age), after the row-value ``{after}`` when a page was read before. One range of
# the index ``runs_queue_next``; a debounced run still in its window is passed over.
FRONT = """
SELECT run_id, queue_key, priority, fair_tag, created_at, generation = 0, generation
FROM {runs} WHERE queue = $1 AND status = 'queued' AND lease_owner IS NULL
  AND (wake_at IS NULL OR wake_at <= $2){after}
ORDER BY priority, fair_tag, created_at, run_id LIMIT $3
"""
FRONT_AFTER = " AND (priority, fair_tag, created_at, run_id) > ($4, $5, $6, $7)"
FIRST = RESUMABLE + "UNION ALL\nSELECT * FROM (" + FRONT + ") AS front\n"

# The unpaused queues, each with its live leases by key (the held index): a row per
# (queue, key holding leases), or one with no key for a queue holding none.
OPEN_QUEUES = """
SELECT {columns}, h.queue_key, h.n FROM {queues} q LEFT JOIN (
    SELECT queue, queue_key, COUNT(*) AS n FROM {runs} {held}
    WHERE queue IS NOT NULL AND lease_owner IS NOT NULL AND lease_expires >= $1
      AND status NOT IN ('finished', 'failed', 'cancelled')
    GROUP BY queue, queue_key) h ON h.queue = q.name
WHERE q.paused = 0 ORDER BY q.name
"""


def queue_sql(template: str, prefix: str, after: str = "", held: str = "") -> str:
    """``template`` for a dialect: its tables' ``prefix``, the keyset condition
    ``after``, and ``held``, how it names the index of a queue's leased runs (SQLite's
    planner, without statistics, would read all the queue's runs instead)."""
    return template.format(runs=f"{prefix}runs", queues=f"{prefix}queues",
                           keys=f"{prefix}queue_keys", buckets=f"{prefix}buckets",
                           after=after, held=held, columns=", ".join(
                               "q." + column.strip() for column in QUEUE_COLUMNS.split(",")))


__all__ = ["DEPTHS", "FIRST", "FRONT", "FRONT_AFTER", "OPEN_QUEUES", "NO_KEY", "QUEUE_COLUMNS", "QUEUE_RUN_COLUMNS",
           "RESUMABLE", "QueueRow", "QueueStats", "QueueStore", "candidates", "claim_queued",
           "enqueued", "gate", "queue_from_row", "queue_sql", "run_queue", "take", "take_turn"]
