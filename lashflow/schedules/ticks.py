"""When a schedule ticks, and what one pass of the scheduler does with the ticks that
have come due: fire those inside the catch-up window, count the older ones missed.

A tick is a nominal time (epoch seconds, whole seconds). Its run fires at the tick plus
its jitter, a fixed fraction of the schedule's jitter drawn from a hash of the schedule
name and the tick: every worker computes the same fire time for the same tick, so the
fire time is as deterministic as the run id (``tick_id``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterator

from cronsim import CronSim

from .spec import ScheduleSpec, seconds_of, split_cron

MAX_COUNTED = 100_000  # missed cron ticks counted in one pass (the rest in the next)


def tick_id(name: str, tick: float) -> str:
    """The run id of a schedule's tick: ``nightly@20260329T003000Z`` (a name has no
    ``@``, so the run ids of one schedule share the prefix ``name@``)."""
    return f"{name}@{datetime.fromtimestamp(tick, timezone.utc):%Y%m%dT%H%M%SZ}"


def jitter_offset(name: str, tick: float, jitter: float) -> float:
    """A delay in ``[0, jitter)`` that every worker computes alike for this tick."""
    if jitter <= 0:
        return 0.0
    digest = hashlib.sha256(f"{name}\x00{tick:.0f}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * jitter


def ticks_from(spec: ScheduleSpec, moment: float) -> Iterator[float]:
    """The schedule's ticks at or after ``moment``, in order, within start and end."""
    if spec.start is not None:
        moment = max(moment, spec.start)
    source = _interval(spec.every, moment) if spec.every is not None else _cron(spec, moment)
    for tick in source:
        if spec.end is not None and tick >= spec.end:
            return
        yield tick


def next_ticks(spec: ScheduleSpec, after: float, count: int) -> list[float]:
    """The first ``count`` ticks strictly after ``after`` (what ``show`` lists)."""
    found: list[float] = []
    for tick in ticks_from(spec, math.floor(after) + 1):
        found.append(tick)
        if len(found) == count:
            break
    return found


def tick_after(spec: ScheduleSpec, tick: float) -> float | None:
    return next(iter(ticks_from(spec, tick + 1)), None)


def _interval(every: float, moment: float) -> Iterator[float]:
    tick = math.ceil(moment / every) * every  # counted from the epoch: zones do not move it
    while True:
        yield float(tick)
        tick += every


def _cron(spec: ScheduleSpec, moment: float) -> Iterator[float]:
    """cronsim walks the minutes (its rules for daylight-saving changes are Debian
    cron's: a time the clocks skip fires once right after the skip, a time they repeat
    fires once, at its first occurrence); a six-field expression adds its seconds to
    each minute it yields."""
    seconds_field, classic = split_cron(spec.cron or "")
    seconds = seconds_of(seconds_field)
    minute = math.floor(moment / 60) * 60
    for found in CronSim(classic, datetime.fromtimestamp(minute - 1, spec.zone)):
        start = found.timestamp()
        for second in seconds:
            if start + second >= moment:
                yield start + second


@dataclass(slots=True)
class Plan:
    """One pass over a schedule: ``fire`` these ticks (oldest first), ``missed`` ticks
    fell out of the catch-up window, ``next_tick`` is the first tick not yet handled
    (None: the schedule has ended) and ``lags`` how late each fired tick is."""

    fire: list[float] = field(default_factory=list)
    missed: int = 0
    next_tick: float | None = None
    lags: list[float] = field(default_factory=list)


def fire_at(name: str, spec: ScheduleSpec, tick: float) -> float:
    return tick + jitter_offset(name, tick, spec.jitter)


def plan(name: str, spec: ScheduleSpec, next_tick: float | None, now: float, *,
         limit: int = 1000) -> Plan:
    """What is due at ``now`` from ``next_tick`` on: at most ``limit`` ticks fire in one
    pass (the rest are due in the next); ticks whose fire time is more than the
    catch-up window before ``now`` are missed, the ones too old to fire even with the
    largest jitter counted without being looked at one by one where that is cheap."""
    result = Plan(next_tick=next_tick)
    tick = next_tick
    surely_missed = now - spec.catchup_window - spec.jitter
    if tick is not None and tick < surely_missed:
        result.missed, tick = _skip(spec, tick, surely_missed)
    while tick is not None and len(result.fire) < limit:
        due = fire_at(name, spec, tick)
        if due > now:
            break
        if now - due <= spec.catchup_window:
            result.fire.append(tick)
            result.lags.append(now - due)
        else:
            result.missed += 1
        tick = tick_after(spec, tick)
    result.next_tick = tick
    return result


def _skip(spec: ScheduleSpec, tick: float, before: float) -> tuple[int, float | None]:
    """(how many ticks lie in ``[tick, before)``, the first tick at or after ``before``)."""
    if spec.every is not None:
        count = math.ceil((before - tick) / spec.every)
        if spec.end is not None:
            count = min(count, max(0, math.ceil((spec.end - tick) / spec.every)))
        following = tick + count * spec.every
        return count, (None if spec.end is not None and following >= spec.end else following)
    count = 0
    for found in ticks_from(spec, tick):
        if found >= before or count >= MAX_COUNTED:
            return count, found
        count += 1
    return count, None


__all__ = ["MAX_COUNTED", "Plan", "fire_at", "jitter_offset", "next_ticks", "plan",
           "tick_after", "tick_id", "ticks_from"]
