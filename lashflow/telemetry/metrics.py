"""Counters and histograms of one process, for ``/metrics`` and the OpenTelemetry meter.

``Metrics`` keeps what this process saw (steps, attempts and their durations, journal
commits, lease takeovers, drive endings) in plain dicts, and mirrors each record to the
application's OpenTelemetry meter when one is installed. What the database knows for all
processes (runs by status, open waits by kind and the age of the oldest) is read when
``/metrics`` is scraped (``StoreStats``) and rendered next to it in the Prometheus text
format. An engine without telemetry holds no ``Metrics``: nothing is counted.
"""

from __future__ import annotations

import bisect
import math
import sys
from typing import TYPE_CHECKING, Any, Sequence

from ..slotted import Frozen, Slotted

if TYPE_CHECKING:
    from ..store.base import StoreStats

Labels = tuple[tuple[str, str], ...]

DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0)
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0, 60.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

# name -> (kind, help, buckets); the OpenTelemetry name is the same with dots
INSTRUMENTS: dict[str, tuple[str, str, tuple[float, ...]]] = {
    "lashflow_steps_total": ("counter", "Tool steps that ran here, by tool and outcome.", ()),
    "lashflow_attempts_total": ("counter", "Tool attempts that ran here, by tool and outcome.",
                                ()),
    "lashflow_attempt_duration_seconds": ("histogram", "How long one tool attempt took.",
                                          DURATION_BUCKETS),
    "lashflow_rate_limited_calls_total": ("counter", "Tool calls whose rate limit slot was "
                                          "later than their start, by tool and how they "
                                          "waited (held: in the call; parked: the run "
                                          "parked).", ()),
    "lashflow_drives_total": ("counter", "Drives of runs that ended here, by the run's status.",
                              ()),
    "lashflow_journal_commit_seconds": ("histogram", "One journal transaction, queue to durable.",
                                        DURATION_BUCKETS),
    "lashflow_journal_commit_group_size": ("histogram", "Writes that shared one transaction.",
                                           SIZE_BUCKETS),
    "lashflow_lease_takeovers_total": ("counter", "Runs taken over from a dead or silent worker.",
                                       ()),
    "lashflow_schedule_fire_lag_seconds": ("histogram", "How late a schedule's tick fired "
                                           "(its run stored), jitter excluded.", LAG_BUCKETS),
    "lashflow_schedule_runs_started_total": ("counter", "Runs schedules started here, by "
                                             "schedule.", ()),
    "lashflow_schedule_missed_ticks_total": ("counter", "Ticks older than their catch-up "
                                             "window, by schedule.", ()),
    "lashflow_schedule_skipped_overlaps_total": ("counter", "Ticks the overlap policy "
                                                 "dropped, by schedule.", ()),
}


class _Histogram(Slotted):
    __slots__ = ("buckets", "counts", "total", "count")

    def __init__(
            self,
            buckets: tuple[float, ...],
            counts: list[int] | None = None,
            total: float = 0.0,
            count: int = 0,
    ) -> None:
        self.buckets = buckets
        self.counts = [] if counts is None else counts
        self.total = total
        self.count = count

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


class Metrics:
    """This process's counters and histograms (see the module doc)."""

    def __init__(self, meter_provider: Any = None) -> None:
        """``meter_provider``: where to mirror records (default: the one the application
        installed globally, if any)."""
        self._counters: dict[tuple[str, Labels], float] = {}
        self._histograms: dict[tuple[str, Labels], _Histogram] = {}
        self._otel = _otel_instruments(meter_provider)

    @property
    def mirrored(self) -> bool:
        """True when records also go to the application's OpenTelemetry meter."""
        return self._otel is not None

    def add(self, name: str, labels: Labels = (), value: float = 1) -> None:
        key = (name, labels)
        self._counters[key] = self._counters.get(key, 0) + value
        if self._otel is not None:
            self._otel[name].add(value, dict(labels))

    def observe(self, name: str, value: float, labels: Labels = ()) -> None:
        key = (name, labels)
        histogram = self._histograms.get(key)
        if histogram is None:
            histogram = self._histograms[key] = _Histogram(INSTRUMENTS[name][2])
        histogram.observe(value)
        if self._otel is not None:
            self._otel[name].record(value, dict(labels))

    # -- what the engine reports -------------------------------------------------------
    def attempt(self, tool: str, status: str, seconds: float | None) -> None:
        labels = (("tool", tool), ("outcome", status))
        self.add("lashflow_attempts_total", labels)
        if seconds is not None:
            self.observe("lashflow_attempt_duration_seconds", max(seconds, 0.0),
                         (("tool", tool),))

    def step(self, tool: str, status: str) -> None:
        self.add("lashflow_steps_total", (("tool", tool), ("outcome", status)))

    def commit(self, seconds: float, group: int) -> None:
        self.observe("lashflow_journal_commit_seconds", seconds)
        self.observe("lashflow_journal_commit_group_size", group)

    def schedule_fired(self, schedule: str, lags: list[float], started: int, missed: int,
                       skipped: int) -> None:
        labels = (("schedule", schedule),)
        for lag in lags:
            self.observe("lashflow_schedule_fire_lag_seconds", max(lag, 0.0))
        for name, value in (("lashflow_schedule_runs_started_total", started),
                            ("lashflow_schedule_missed_ticks_total", missed),
                            ("lashflow_schedule_skipped_overlaps_total", skipped)):
            if value:
                self.add(name, labels, value)

    # -- Prometheus text format ----------------------------------------------------------
    def render(self, stats: "StoreStats | None" = None,
               queues: Sequence[QueueGauge] = (),
               limits: "LimitGauges | None" = None) -> str:
        """The exposition text of this process's instruments, ``stats``, ``queues`` and
        tools' ``limits``."""
        lines: list[str] = []
        if limits is not None and (limits.rates or limits.slots):
            _limit_gauges(lines, limits)
        if queues:
            _gauge(lines, "lashflow_queue_waiting", "Runs of a queue not started yet.",
                   {(("queue", q.name),): q.waiting for q in queues})
            _gauge(lines, "lashflow_queue_running", "Runs of a queue holding a slot now.",
                   {(("queue", q.name),): q.running for q in queues})
            _gauge(lines, "lashflow_queue_oldest_wait_seconds",
                   "Seconds the oldest run of a queue not started yet has waited.",
                   {(("queue", q.name),): q.oldest_wait for q in queues})
            _gauge(lines, "lashflow_queue_rate_limited",
                   "1 while a queue's rate holds its next start back.",
                   {(("queue", q.name),): int(q.rate_limited) for q in queues})
            _gauge(lines, "lashflow_queue_paused", "1 while a queue is paused.",
                   {(("queue", q.name),): int(q.paused) for q in queues})
        if stats is not None:
            _gauge(lines, "lashflow_runs", "Runs in the database, by status.",
                   {(("status", k),): v for k, v in sorted(stats.runs_by_status.items())})
            _gauge(lines, "lashflow_open_waits", "Waits of parked runs, by kind.",
                   {(("kind", k),): v for k, v in sorted(stats.open_waits.items())})
            _gauge(lines, "lashflow_oldest_wait_age_seconds",
                   "Seconds since the longest-parked run of each wait kind parked.",
                   {(("kind", k),): v for k, v in sorted(stats.oldest_wait_age.items())})
        for name, (kind, help_text, buckets) in INSTRUMENTS.items():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            if kind == "counter":
                for (counted, labels), value in sorted(self._counters.items()):
                    if counted == name:
                        lines.append(f"{name}{_labels(labels)} {_number(value)}")
                continue
            for (observed, labels), histogram in sorted(self._histograms.items(),
                                                        key=lambda item: item[0]):
                if observed != name:
                    continue
                running = 0
                for bound, count in zip(buckets + (math.inf,), histogram.counts):
                    running += count
                    edge = "+Inf" if bound == math.inf else _number(bound)
                    lines.append(f"{name}_bucket{_labels(labels + (('le', edge),))} {running}")
                lines.append(f"{name}_sum{_labels(labels)} {_number(histogram.total)}")
                lines.append(f"{name}_count{_labels(labels)} {histogram.count}")
        return "\n".join(lines) + "\n"



class QueueGauge(Frozen):
    """One queue as ``/metrics`` shows it (read from the database at scrape time)."""

    __slots__ = ("name", "waiting", "running", "oldest_wait", "rate_limited", "paused")
    name: str
    waiting: int
    running: int
    oldest_wait: float
    rate_limited: bool
    paused: bool

    def __init__(
            self,
            name: str,
            waiting: int,
            running: int,
            oldest_wait: float,  # seconds; 0 when nothing waits
            rate_limited: bool,
            paused: bool,
    ) -> None:
        setter = object.__setattr__
        setter(self, "name", name)
        setter(self, "waiting", waiting)
        setter(self, "running", running)
        setter(self, "oldest_wait", oldest_wait)
        setter(self, "rate_limited", rate_limited)
        setter(self, "paused", paused)


class LimitGauges(Frozen):
    """Tools' limits as ``/metrics`` shows them, read from the database at scrape time:
    per rate limit (calls, calls that waited for their slot, seconds until its next free
    slot), and global concurrency slots held per tool."""

    __slots__ = ("rates", "slots")
    rates: dict[str, tuple[int, int, float]]
    slots: dict[str, int]

    def __init__(
            self,
            rates: dict[str, tuple[int, int, float]] | None = None,
            slots: dict[str, int] | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "rates", {} if rates is None else rates)
        setter(self, "slots", {} if slots is None else slots)


def _limit_gauges(lines: list[str], limits: LimitGauges) -> None:
    rates = sorted(limits.rates.items())
    _gauge(lines, "lashflow_rate_limit_calls", "Calls a rate limit gave a slot, all workers.",
           {(("limit", name),): calls for name, (calls, _, _) in rates})
    _gauge(lines, "lashflow_rate_limit_delayed_calls",
           "Calls of a rate limit that waited for their slot, all workers.",
           {(("limit", name),): delayed for name, (_, delayed, _) in rates})
    _gauge(lines, "lashflow_rate_limit_booked_seconds",
           "Seconds until a rate limit's next free slot (0: one is free now).",
           {(("limit", name),): booked for name, (_, _, booked) in rates})
    _gauge(lines, "lashflow_tool_global_slots_held",
           "Calls of a tool with global_concurrency in flight now, all workers.",
           {(("tool", tool),): held for tool, held in sorted(limits.slots.items())})


def _gauge(lines: list[str], name: str, help_text: str, values: dict[Labels, float]) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} gauge")
    for labels, value in values.items():
        lines.append(f"{name}{_labels(labels)} {_number(value)}")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _otel_instruments(provider: Any) -> dict[str, Any] | None:
    """Instruments of ``provider`` or of the meter provider the application installed."""
    if provider is None:
        api = sys.modules.get("opentelemetry.metrics")
        if api is None:
            return None
        provider = api.get_meter_provider()
        if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
            return None
    from lashflow import __version__

    meter = provider.get_meter("lashflow", __version__)
    made: dict[str, Any] = {}
    for name, (kind, help_text, _) in INSTRUMENTS.items():
        dotted = name.replace("_", ".")
        unit = "s" if name.endswith("_seconds") else "1"
        if kind == "counter":
            made[name] = meter.create_counter(dotted.removesuffix(".total"), unit=unit,
                                              description=help_text)
        else:
            made[name] = meter.create_histogram(dotted.removesuffix(".seconds"), unit=unit,
                                                description=help_text)
    return made


__all__ = ["INSTRUMENTS", "LimitGauges", "Metrics", "QueueGauge"]
