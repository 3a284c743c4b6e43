"""Firing through a real store on both backends, time driven by the fake clock: the
catch-up window after downtime, each overlap policy with a run that outlasts its
interval, backfill, both daylight-saving changes, pause and resume, trigger, the
errors a user can cause, and databases of versions 4 and 5 migrated to schedules."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from lashflow import Engine
from lashflow.errors import ScheduleExists, ScheduleInvalid, UnknownSchedule
from lashflow.testing import FakeClock

HOLD = str(Path(__file__).resolve().parent / "hold.lash")
T0 = 1_800_000_000.0  # a whole minute (and hour) in UTC


def engine(db: str, clock: FakeClock) -> Engine:
    return Engine(db=db, clock=clock)


async def fire(e: Engine) -> int:
    return (await e.schedules.scheduler.fire_due()).started


async def test_an_hour_down_fires_the_catch_up_window_and_counts_the_rest_missed(db: str) -> None:
    clock = FakeClock(T0)
    async with engine(db, clock) as e:
        await e.schedules.create("minutely", HOLD, input={"n": 1}, every="1m", overlap="allow")
        assert await fire(e) == 1  # the tick at T0
        clock.advance(3600)  # no worker for an hour
        report = await e.schedules.scheduler.fire_due()
        assert (report.started, report.missed) == (2, 58)  # T0+3540 (60 s late) and T0+3600
        assert report.lags == [60.0, 0.0]
        info = await e.schedules.get("minutely")
        assert (info.fired, info.missed, info.skipped) == (3, 58, 0)
        assert [r.run_id for r in info.runs] == [
            "minutely@20270115T090000Z", "minutely@20270115T085900Z", "minutely@20270115T080000Z"]
        record = await e.get_record("minutely@20270115T085900Z")
        assert record.meta["schedule"] == "minutely" and record.meta["tick"] == T0 + 3540
        assert record.status == "queued" and record.input == {"n": 1}
        assert await fire(e) == 0  # nothing twice
        assert info.next_fires[0] == T0 + 3660


async def test_a_restart_fires_what_is_due_once(db: str) -> None:
    clock = FakeClock(T0)
    async with engine(db, clock) as e:
        await e.schedules.create("s", HOLD, input={"n": 1}, every="10s", overlap="allow",
                                 catchup_window="1m")
    clock.advance(30)
    async with engine(db, clock) as first, engine(db, clock) as second:
        # T0 .. T0+30 once each, and T0+40 written ahead (due within 10 s)
        assert await fire(first) + await fire(second) == 5
    async with engine(db, clock) as e:
        assert await fire(e) == 0
        assert len(await e.schedules.runs("s")) == 5


async def settle(e: Engine, run_id: str) -> None:
    await e.cancel(run_id)
    assert (await e.get_record(run_id)).status == "cancelled"


@pytest.mark.parametrize(("policy", "expected"), [
    # (runs started, skipped, buffered) after ticks 1-3 with run 1 still going, then after
    # run 1 settles and the next pass
    ("skip", [(1, 2, 0), (1, 2, 0)]),
    ("buffer-one", [(1, 1, 1), (2, 1, 0)]),
    ("buffer-all", [(1, 0, 2), (2, 0, 1)]),
    # the cancelled run settles at once (it was queued): each tick starts on the next pass
    ("cancel-other", [(2, 0, 1), (3, 0, 0)]),
    ("allow", [(3, 0, 0), (3, 0, 0)]),
])
async def test_each_overlap_policy_with_a_run_that_outlasts_its_interval(
        db: str, policy: str, expected: list[tuple[int, int, int]]) -> None:
    clock = FakeClock(T0)
    async with engine(db, clock) as e:
        await e.schedules.create("o", HOLD, input={"n": 1}, every="1m", overlap=policy)
        for minute in range(3):  # run 1 stays queued (unsettled) through ticks 2 and 3
            clock.advance(60 if minute else 0)
            await fire(e)
        info = await e.schedules.get("o")
        assert (info.fired, info.skipped, info.buffered) == expected[0]
        first = "o@20270115T080000Z"
        if policy == "cancel-other":  # the policy itself stopped run 1
            assert (await e.get_record(first)).status == "cancelled"
        else:
            await settle(e, first)
        clock.advance(1)
        await fire(e)  # before the next tick: only a buffered tick can start
        info = await e.schedules.get("o")
        assert (info.fired, info.skipped, info.buffered) == expected[1]
        runs = {r.run_id for r in await e.schedules.runs("o")}
        assert len(runs) == info.fired


async def test_backfill_a_week_of_hourly_ticks(db: str) -> None:
    clock = FakeClock(T0)
    async with engine(db, clock) as e:
        await e.schedules.create("h", HOLD, input={"n": 2}, cron="0 * * * *", overlap="allow")
        start, end = "2027-01-01T00:00:00Z", "2027-01-08T00:00:00Z"
        report = await e.schedules.backfill("h", start, end)
        assert (report.started, report.buffered, report.skipped) == (168, 0, 0)
        again = await e.schedules.backfill("h", "2027-01-07T00:00:00Z", end)
        assert again.started == 24
        runs = await e.schedules.runs("h", limit=1000)
        assert len(runs) == 168  # the second backfill found its ticks' runs there
        assert runs[-1].run_id == "h@20270101T000000Z" and runs[0].run_id == "h@20270107T230000Z"
        buffered = await e.schedules.create("b", HOLD, input={"n": 2}, every="1h",
                                            overlap="buffer-all")
        report = await e.schedules.backfill(buffered.name, start, end)
        assert (report.started, report.buffered) == (1, 167)  # one at a time, in order
        with pytest.raises(ScheduleInvalid):
            await e.schedules.backfill("h", end, start)


@pytest.mark.parametrize(("day", "fired_at"), [
    ("2026-03-29", "2026-03-29T03:00:00+02:00"),  # 02:00-03:00 does not exist
    ("2026-10-25", "2026-10-25T02:30:00+02:00"),  # 02:00-03:00 happens twice
])
async def test_a_0230_daily_schedule_fires_once_on_each_daylight_saving_day(
        db: str, day: str, fired_at: str) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    midnight = datetime.fromisoformat(f"{day}T00:00").replace(tzinfo=berlin).timestamp()
    clock = FakeClock(midnight - 86400)
    async with engine(db, clock) as e:
        await e.schedules.create("d", HOLD, input={"n": 3}, cron="30 2 * * *",
                                 tz="Europe/Berlin", overlap="allow")
        for _ in range(3 * 24 * 4):  # three days, a pass every quarter of an hour
            clock.advance(900)
            await fire(e)
        runs = await e.schedules.runs("d")
        ticks = sorted([(await e.get_record(r.run_id)).meta["tick"] for r in runs])
        assert len(ticks) == 3
        on_day = [t for t in ticks if datetime.fromtimestamp(t, berlin).date().isoformat() == day]
        assert [datetime.fromtimestamp(t, berlin).isoformat() for t in on_day] == [fired_at]


async def test_pause_then_resume_fires_only_inside_the_catch_up_window(db: str) -> None:
    clock = FakeClock(T0)
    async with engine(db, clock) as e:
        await e.schedules.create("p", HOLD, input={"n": 1}, every="1m", overlap="allow")
        assert await fire(e) == 1
        paused = await e.schedules.pause("p", note="maintenance")
        assert paused.paused and paused.note == "maintenance"
        clock.advance(600)
        assert await fire(e) == 0  # paused: not due
        resumed = await e.schedules.resume("p")
        assert not resumed.paused
        assert await fire(e) == 2  # T0+540 (60 s late) and T0+600, not the eight before
        info = await e.schedules.get("p")
        assert (info.fired, info.missed) == (3, 0)
        # paused and resumed inside the window: the paused tick still fires
        await e.schedules.pause("p")
        clock.advance(60)
        await e.schedules.resume("p")
        assert await fire(e) == 1


async def test_trigger_update_delete_and_the_errors_a_user_can_cause(db: str) -> None:
    clock = FakeClock(T0 + 10)
    async with engine(db, clock) as e:
        await e.schedules.create("t", HOLD, input={"n": 1}, every="1h", overlap="skip")
        run_id = await e.schedules.trigger("t")
        assert run_id == "t@20270115T080010.000Z-trigger"
        assert (await e.get_record(run_id)).meta["schedule"] == "t"
        with pytest.raises(ScheduleExists):
            await e.schedules.create("t", HOLD, input={"n": 1}, every="1h")
        with pytest.raises(UnknownSchedule) as unknown:
            await e.schedules.pause("nope")
        assert unknown.value.code == "unknown_schedule"
        with pytest.raises(ScheduleInvalid):
            await e.schedules.create("bad", HOLD, input={"n": 1}, cron="* * *")
        updated = await e.schedules.update("t", cron="*/5 * * * *", input={"n": 7})
        assert updated.spec.cron == "*/5 * * * *" and updated.spec.every is None
        assert updated.input == {"n": 7}
        assert updated.next_fires[:2] == [T0 + 300, T0 + 600]
        assert [s.name for s in await e.schedules.list()] == ["t"]
        await e.schedules.delete("t")
        assert await e.schedules.list() == []
        assert (await e.get_record(run_id)).status == "queued"  # its runs stay
        with pytest.raises(UnknownSchedule):
            await e.schedules.delete("t")


LATER_TABLES = {4: ["schedules", "versions"], 5: ["schedules"]}  # what each version lacks


async def as_version(db: str, version: int) -> None:
    """Make the database look as ``version`` left it: the later tables dropped, its
    number in meta."""
    tables = LATER_TABLES[version]
    if db.startswith("sqlite:"):
        conn = sqlite3.connect(db.removeprefix("sqlite:///"))
        for table in tables:
            conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        conn.commit()
        conn.close()
        return
    import asyncpg

    conn = await asyncpg.connect(db)
    try:
        for table in tables:
            await conn.execute(f"DROP TABLE lashflow_{table}")
        await conn.execute("UPDATE lashflow_meta SET value = $1 WHERE key = 'schema_version'",
                           str(version).encode())
    finally:
        await conn.close()


@pytest.mark.parametrize("version", [4, 5])
async def test_an_older_database_migrates_to_schedules(db: str, version: int) -> None:
    """A database from before schedules (version 4: before deployed versions too) opens,
    keeps its runs and takes schedules."""
    clock = FakeClock(T0)
    async with engine(db, clock) as e:
        await e.create(HOLD, input={"n": 1}, run_id="old")
    await as_version(db, version)
    async with engine(db, clock) as e:
        assert (await e.get_record("old")).status == "queued"
        await e.schedules.create("m", HOLD, input={"n": 1}, every="1m")
        assert await fire(e) == 1
        assert await e.versions() == []
    async with engine(db, clock) as e:  # migrated once: opens as it is
        assert [info.name for info in await e.schedules.list()] == ["m"]
