"""The pure schedule modules as tables: cron and interval ticks, time zones and both
daylight-saving changes, jitter, the catch-up window and every overlap policy."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from lashflow.errors import ScheduleInvalid
from lashflow.schedules import ScheduleSpec, decide, parse_duration, parse_moment, plan
from lashflow.schedules.spec import check_name, format_duration
from lashflow.schedules.ticks import jitter_offset, next_ticks, tick_id

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, zone: ZoneInfo = BERLIN, fold: int = 0) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone, fold=fold).timestamp()


def local(ticks: list[float], zone: ZoneInfo = BERLIN) -> list[str]:
    return [datetime.fromtimestamp(t, zone).strftime("%m-%d %H:%M:%S%z") for t in ticks]


@pytest.mark.parametrize(("expr", "after", "expected"), [
    # a 02:30 schedule on the day Berlin skips 02:00-03:00 fires once, at 03:00
    ("30 2 * * *", "2026-03-28T12:00", ["03-29 03:00:00+0200", "03-30 02:30:00+0200",
                                        "03-31 02:30:00+0200"]),
    # on the day 02:00-03:00 happens twice it fires once, in the first 02:30
    ("30 2 * * *", "2026-10-24T12:00", ["10-25 02:30:00+0200", "10-26 02:30:00+0100",
                                        "10-27 02:30:00+0100"]),
    # an every-30-minutes schedule fires in both copies of the repeated hour
    ("*/30 * * * *", "2026-10-25T01:45", ["10-25 02:00:00+0200", "10-25 02:30:00+0200",
                                          "10-25 02:00:00+0100", "10-25 02:30:00+0100",
                                          "10-25 03:00:00+0100"]),
    # and skips nothing real across the spring gap: 01:30, then 03:00 (the next real minute)
    ("*/30 * * * *", "2026-03-29T01:15", ["03-29 01:30:00+0100", "03-29 03:00:00+0200",
                                          "03-29 03:30:00+0200"]),
    # six fields: seconds first
    ("*/20 * * * * *", "2026-01-05T10:00:05", ["01-05 10:00:20+0100", "01-05 10:00:40+0100",
                                               "01-05 10:01:00+0100", "01-05 10:01:20+0100"]),
    ("5,50 30 9 * * MON", "2026-01-01T00:00", ["01-05 09:30:05+0100", "01-05 09:30:50+0100",
                                               "01-12 09:30:05+0100"]),
])
def test_cron_ticks_in_a_zone(expr: str, after: str, expected: list[str]) -> None:
    spec = ScheduleSpec(cron=expr, tz="Europe/Berlin")
    assert local(next_ticks(spec, at(after), len(expected))) == expected


def test_a_daily_schedule_fires_once_on_each_daylight_saving_day() -> None:
    spec = ScheduleSpec(cron="30 2 * * *", tz="Europe/Berlin")
    for day in ("2026-03-29", "2026-10-25"):
        start, end = at(f"{day}T00:00"), at(f"{day}T23:59")
        assert len([t for t in next_ticks(spec, start, 3) if t < end]) == 1, day


def test_interval_ticks_count_from_the_epoch_and_respect_start_and_end() -> None:
    spec = ScheduleSpec(every=300, start=1_000_000.0, end=1_001_000.0)
    assert next_ticks(spec, 0, 10) == [1_000_200.0, 1_000_500.0, 1_000_800.0]
    assert next_ticks(ScheduleSpec(every=3600, tz="Asia/Kolkata"), 3599.5, 2) == [3600.0, 7200.0]


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({}, "exactly one of"),
    ({"cron": "* * * *"}, "five fields"),
    ({"cron": "61 * * * *"}, "Bad minute"),
    ({"cron": "70 * * * * *"}, "seconds run 0-59"),
    ({"cron": "x * * * * *"}, "seconds field"),
    ({"every": 0.5}, "at least 1s"),
    ({"every": 60, "tz": "Mars/Olympus"}, "unknown"),
    ({"every": 60, "overlap": "queue"}, "overlap policy"),
    ({"every": 60, "start": 10.0, "end": 5.0}, "--end"),
])
def test_a_spec_that_cannot_work_is_refused_with_one_message(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        ScheduleSpec(**kwargs)
    assert fragment in caught.value.message
    assert caught.value.code == "schedule_invalid"


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0), ("1d", 86400.0), ("250ms", 0.25),
    ("0", 0.0), (90, 90.0), ("2 h", 7200.0),
])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "5", "5x", "m5", "-1s", "1h-", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ScheduleInvalid):
        parse_duration(text)  # type: ignore[arg-type]


def test_durations_and_moments_read_back() -> None:
    for seconds in (1.0, 61.0, 5400.0, 90061.0, 0.25):
        assert parse_duration(format_duration(seconds)) == seconds
    assert parse_moment("2026-03-29T02:30", "UTC") == at("2026-03-29T02:30", ZoneInfo("UTC"))
    assert parse_moment("2026-03-29T03:30", "Europe/Berlin") == parse_moment(
        "2026-03-29T01:30:00Z")
    with pytest.raises(ScheduleInvalid):
        parse_moment("yesterday")


@pytest.mark.parametrize("name", ["", "a@b", "-x", "x" * 101, "a b", None])
def test_bad_names(name: object) -> None:
    with pytest.raises(ScheduleInvalid):
        check_name(name)


def test_tick_ids_are_derived_from_name_and_tick() -> None:
    tick = datetime(2026, 3, 29, 0, 30, tzinfo=timezone.utc).timestamp()
    assert tick_id("nightly", tick) == "nightly@20260329T003000Z"


def test_jitter_is_the_same_for_everyone_and_within_bounds() -> None:
    offsets = [jitter_offset("s", float(t), 30.0) for t in range(0, 60_000, 60)]
    assert offsets == [jitter_offset("s", float(t), 30.0) for t in range(0, 60_000, 60)]
    assert all(0 <= o < 30 for o in offsets)
    assert max(offsets) - min(offsets) > 20  # spread, not one fixed delay
    assert jitter_offset("s", 60.0, 0.0) == 0.0


MINUTE = ScheduleSpec(every=60)


@pytest.mark.parametrize(("next_tick", "now", "fire", "missed", "following"), [
    (600.0, 599.0, [], 0, 600.0),  # not due yet
    (600.0, 600.0, [600.0], 0, 660.0),  # due on the dot
    (600.0, 659.5, [600.0], 0, 660.0),  # late, inside the window
    # down for an hour: the last minute's ticks fire, the rest are missed
    (600.0, 600.0 + 3600, [4140.0, 4200.0], 59, 4260.0),
    # down for a year: counted without walking each tick
    (600.0, 600.0 + 365 * 86400, [31_536_540.0, 31_536_600.0], 525_599, 31_536_660.0),
])
def test_a_pass_fires_inside_the_catch_up_window_and_counts_the_rest(
        next_tick: float, now: float, fire: list[float], missed: int, following: float) -> None:
    result = plan("s", MINUTE, next_tick, now)
    assert (result.fire, result.missed, result.next_tick) == (fire, missed, following)


def test_the_catch_up_window_is_the_schedules_own() -> None:
    spec = ScheduleSpec(every=60, catchup_window=600)
    assert len(plan("s", spec, 0.0, 3600.0).fire) == 11
    assert plan("s", ScheduleSpec(every=60, catchup_window=0), 0.0, 3600.0).fire == [3600.0]


def test_a_cron_pass_after_downtime_and_a_schedule_that_ended() -> None:
    spec = ScheduleSpec(cron="*/5 * * * *", catchup_window=60)
    result = plan("s", spec, 0.0, 3600.0 + 30)
    assert (result.fire, result.missed, result.next_tick) == ([3600.0], 12, 3900.0)
    ended = plan("s", ScheduleSpec(every=60, end=200.0), 120.0, 1000.0)
    assert ended.next_tick is None


def test_jittered_ticks_fire_at_their_own_time() -> None:
    spec = ScheduleSpec(every=60, jitter=30)
    delay = jitter_offset("s", 600.0, 30.0)
    assert plan("s", spec, 600.0, 600.0 + delay - 0.01).fire == []
    assert plan("s", spec, 600.0, 600.0 + delay).fire == [600.0]


@pytest.mark.parametrize(("policy", "busy", "buffered", "start", "after", "skipped", "cancel"), [
    ("allow", True, [], [1.0, 2.0], [], 0, False),
    ("skip", False, [], [1.0], [], 1, False),
    ("skip", True, [], [], [], 2, False),
    ("buffer-one", True, [], [], [1.0], 1, False),
    ("buffer-one", False, [0.0], [0.0], [1.0], 1, False),
    ("buffer-all", True, [0.0], [], [0.0, 1.0, 2.0], 0, False),
    ("buffer-all", False, [0.0], [0.0], [1.0, 2.0], 0, False),
    ("cancel-other", True, [], [], [2.0], 1, True),
    ("cancel-other", False, [], [1.0], [2.0], 0, True),
])
def test_overlap_policies(policy: str, busy: bool, buffered: list[float], start: list[float],
                          after: list[float], skipped: int, cancel: bool) -> None:
    decision = decide(policy, busy, buffered, [1.0, 2.0])
    assert (decision.start, decision.buffered, decision.skipped, decision.cancel) == (
        start, after, skipped, cancel)


def test_the_pure_modules_reach_nothing_of_the_runtime() -> None:
    import subprocess
    import sys

    code = ("import sys, lashflow.schedules; print(sorted(m for m in sys.modules if "
            "m.startswith(('lashflow.store', 'lashflow.durable', 'lashflow.interp', 'asyncio'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
