"""``engine.queues``: make, change and look at queues from Python; and what a run that
enters one carries (ADR 0031). The limits themselves are enforced by the store, on
every claim (``store.queues``); this module checks what users give and says what it
means."""

from __future__ import annotations

import builtins
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import rates
from ..errors import QueueExists, QueueInvalid, UnknownQueue
from ..rates import format_rate
from ..schedules.spec import parse_duration
from ..store import Store
from ..store.base import QueueRow, QueueStats
from ..telemetry.metrics import QueueGauge
from ..tools.clock import Clock

MAX_NAME = 100
MAX_KEY = 256
MAX_LEVELS = 100
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_queue_name(name: object) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not _NAME.match(name):
        raise QueueInvalid(f"queue name {name!r}: 1 to {MAX_NAME} letters, digits, '_', '.' "
                           "or '-', starting with a letter or digit")
    return name


def parse_rate(text: str | tuple[float, float] | None, what: str = "rate"
               ) -> tuple[float, float] | None:
    """(starts, period in seconds) of ``"10/s"``-style text; None stays None."""
    return rates.parse_rate(text, what, QueueInvalid)


def _limit(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise QueueInvalid(f"{what} must be a whole number of at least 1 (got {value!r})")
    return value


def check_key(key: Any) -> str:
    if not isinstance(key, str) or len(key) > MAX_KEY or "\x00" in key:
        raise QueueInvalid(f"queue key {str(key)[:40]!r}: text of at most {MAX_KEY} "
                           "characters, no NUL")
    return key


@dataclass(slots=True)
class QueueInfo:
    """A queue's limits and, from ``get``, what it holds now."""

    name: str
    concurrency: int | None
    per_key: int | None
    rate: tuple[float, float] | None
    key_rate: tuple[float, float] | None
    priority_levels: int
    fair: bool
    paused: bool
    weights: dict[str, float] = field(default_factory=dict)
    stats: QueueStats | None = None

    @classmethod
    def of(cls, row: QueueRow, stats: QueueStats | None = None) -> "QueueInfo":
        return cls(row.name, row.concurrency, row.per_key, row.rate, row.key_rate,
                   row.priority_levels, row.fair, row.paused, dict(row.weights), stats)

    @property
    def default_priority(self) -> int:
        return (self.priority_levels + 1) // 2

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "concurrency": self.concurrency,
            "concurrency_per_key": self.per_key,
            "rate": None if self.rate is None else format_rate(self.rate),
            "rate_per_key": None if self.key_rate is None else format_rate(self.key_rate),
            "priority_levels": self.priority_levels, "fair": self.fair, "paused": self.paused,
            "weights": self.weights}
        stats = self.stats
        if stats is not None:
            out.update({
                "waiting": sum(stats.waiting_by_priority.values()),
                "running": sum(stats.running_by_key.values()),
                "waiting_by_priority": {str(p): n for p, n in
                                        sorted(stats.waiting_by_priority.items())},
                "waiting_by_key": stats.waiting_by_key, "running_by_key": stats.running_by_key,
                "oldest_waiting_since": stats.oldest_waiting,
                "rate_limited_until": stats.rate_limited_until,
                "keys_rate_limited": stats.keys_rate_limited})
        return out


UNSET: Any = object()  # an option ``update`` leaves as it is


class Queues:
    """``await engine.queues.create("orders", concurrency_per_key=2, rate="10/s")``."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def create(self, name: str, *, concurrency: int | None = None,
                     concurrency_per_key: int | None = None,
                     rate: str | tuple[float, float] | None = None,
                     rate_per_key: str | tuple[float, float] | None = None,
                     priority_levels: int = 5, fair: bool = False,
                     weights: Mapping[str, float] | None = None) -> QueueInfo:
        """A new queue (``QueueExists`` if the name is taken). ``rate``: starts per
        period across all workers (``"10/s"``); ``fair``: weighted round robin across
        keys (``weights``: key -> weight, default 1)."""
        now = self.clock.now()
        row = QueueRow(check_queue_name(name), created_at=now, updated_at=now)
        _apply(row, concurrency, concurrency_per_key, rate, rate_per_key, priority_levels,
               fair, weights)
        if not await self.store.put_queue(row, create=True):
            raise QueueExists(f"a queue named {name!r} exists already (update or delete it)",
                              queue=name)
        return await self.get(name)

    async def update(self, name: str, *, concurrency: int | None = UNSET,
                     concurrency_per_key: int | None = UNSET,
                     rate: str | tuple[float, float] | None = UNSET,
                     rate_per_key: str | tuple[float, float] | None = UNSET,
                     priority_levels: int = UNSET, fair: bool = UNSET,
                     weights: Mapping[str, float] | None = UNSET,
                     paused: bool = UNSET) -> QueueInfo:
        """Change what is given (None clears a limit); runs already in it stay."""
        row = await self._row(name)
        keep = {"concurrency": row.concurrency, "per_key": row.per_key, "rate": row.rate,
                "key_rate": row.key_rate, "levels": row.priority_levels, "fair": row.fair}

        def given(value: Any, old: Any) -> Any:
            return old if value is UNSET else value
        _apply(row, given(concurrency, keep["concurrency"]),
               given(concurrency_per_key, keep["per_key"]), given(rate, keep["rate"]),
               given(rate_per_key, keep["key_rate"]), given(priority_levels, keep["levels"]),
               given(fair, keep["fair"]), None if weights is UNSET else weights)
        if paused is not UNSET:
            row.paused = bool(paused)
        row.updated_at = self.clock.now()
        if not await self.store.put_queue(row, create=False):
            raise UnknownQueue(f"no queue named {name!r}", queue=name)
        return await self.get(name)

    async def pause(self, name: str) -> QueueInfo:
        """No run of the queue is claimed (started or resumed) until ``resume``; runs
        being driven go on, nothing is lost."""
        return await self.update(name, paused=True)

    async def resume(self, name: str) -> QueueInfo:
        return await self.update(name, paused=False)

    async def get(self, name: str) -> QueueInfo:
        """The queue's limits and what it holds now."""
        row = await self._row(name)
        return QueueInfo.of(row, await self.store.queue_stats(name, self.clock.now()))

    async def list(self) -> builtins.list[QueueInfo]:
        now = self.clock.now()
        return [QueueInfo.of(row, await self.store.queue_stats(row.name, now))
                for row in await self.store.list_queues()]

    async def gauges(self, now: float) -> builtins.list[QueueGauge]:
        """Every queue as ``/metrics`` shows it."""
        found = []
        for info in await self.list():
            stats = info.stats or QueueStats()
            oldest = 0.0 if stats.oldest_waiting is None else max(0.0, now - stats.oldest_waiting)
            found.append(QueueGauge(info.name, sum(stats.waiting_by_priority.values()),
                                    sum(stats.running_by_key.values()), oldest,
                                    stats.rate_limited_until is not None, info.paused))
        return found

    async def delete(self, name: str) -> None:
        """Delete the queue: its runs stay, and are claimed as if they were in none."""
        if not await self.store.delete_queue(check_queue_name(name)):
            raise UnknownQueue(f"no queue named {name!r}", queue=name)

    async def _row(self, name: str) -> QueueRow:
        row = await self.store.get_queue(check_queue_name(name))
        if row is None:
            raise UnknownQueue(f"no queue named {name!r} (lashflow queue list shows them)",
                               queue=name)
        return row

    async def entry(self, name: str, key: str | None, priority: int | None,
                    dedup_id: str | None, debounce: str | float | None = None,
                    keep: str = "newest", singleton: str | None = None
                    ) -> tuple[dict[str, Any], str | None]:
        """What a run entering queue ``name`` carries in its meta, and its run id when a
        ``dedup_id`` decides it (the same id in the same queue: the same run).
        ``debounce`` (seconds or "30s"): submissions of one key within the window make
        one run, started when the window closes, with the ``newest`` (or ``oldest``)
        input; ``singleton`` (``skip`` or ``cancel-running``): one run at a time per key."""
        info = QueueInfo.of(await self._row(name))
        if sum(option is not None for option in (dedup_id, debounce, singleton)) > 1:
            raise QueueInvalid("choose one of dedup id, debounce and singleton for a run")
        if priority is None:
            priority = info.default_priority
        elif isinstance(priority, bool) or not isinstance(priority, int) \
                or not 1 <= priority <= info.priority_levels:
            raise QueueInvalid(f"priority {priority!r}: queue {name!r} has priorities 1 (first) "
                               f"to {info.priority_levels}")
        entry = {"name": name, "key": check_key("" if key is None else key),
                 "priority": priority}
        run_id = None
        if dedup_id is not None:
            if not isinstance(dedup_id, str) or not dedup_id or len(dedup_id) > MAX_KEY:
                raise QueueInvalid(f"dedup id {str(dedup_id)[:40]!r}: text of 1 to {MAX_KEY} "
                                   "characters")
            entry["dedup_id"] = dedup_id
            digest = hashlib.sha256(f"{name}\x00{dedup_id}".encode()).hexdigest()[:32]
            run_id = f"{name}~{digest}"
        if debounce is not None:
            seconds = _debounce_seconds(debounce)
            if keep not in ("newest", "oldest"):
                raise QueueInvalid(f"debounce keeps the newest or the oldest input, not {keep!r}")
            entry["debounce"], entry["keep"] = seconds, keep
        if singleton is not None:
            if singleton not in ("skip", "cancel-running"):
                raise QueueInvalid(f"singleton {singleton!r}: skip or cancel-running")
            if info.per_key != 1:
                raise QueueInvalid(f"a singleton needs a queue that runs one run per key at a "
                                   f"time: queue {name!r} has concurrency per key "
                                   f"{info.per_key or 'unlimited'} (lashflow queue update "
                                   f"{name} --concurrency-per-key 1)")
            entry["singleton"] = singleton
        return entry, run_id


def _debounce_seconds(value: str | float) -> float:
    try:
        seconds = parse_duration(value, "debounce")
    except Exception as exc:
        raise QueueInvalid(str(exc)) from None
    if not 0 < seconds <= 86400 * 30:
        raise QueueInvalid(f"debounce {value!r}: a window above 0 and at most 30 days")
    return seconds


def _apply(row: QueueRow, concurrency: Any, per_key: Any, rate: Any, key_rate: Any,
           levels: Any, fair: Any, weights: Mapping[str, float] | None) -> None:
    row.concurrency = _limit(concurrency, "concurrency")
    row.per_key = _limit(per_key, "concurrency per key")
    row.rate = parse_rate(rate, "rate")
    row.key_rate = parse_rate(key_rate, "rate per key")
    levels = _limit(levels, "priority levels")
    if levels is None or levels > MAX_LEVELS:
        raise QueueInvalid(f"priority levels must be 1 to {MAX_LEVELS} (got {levels!r})")
    row.priority_levels = levels
    row.fair = bool(fair)
    row.weights = {}
    for key, weight in (weights or {}).items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                or not math.isfinite(weight) or weight <= 0:
            raise QueueInvalid(f"weight of key {key!r} must be a number above 0 (got {weight!r})")
        row.weights[check_key(key)] = float(weight)


__all__ = ["QueueInfo", "Queues", "check_queue_name", "format_rate", "parse_rate"]
