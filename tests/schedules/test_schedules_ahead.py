"""Ticks written ahead (ADR 0030, amendment), on both backends with the fake clock: an
``allow`` schedule's run is stored before its tick and becomes claimable at its fire
time, not before; pausing, updating or deleting the schedule takes back such runs (a
paused schedule's tick that has not come does not start), and resuming fires the tick
again if it is inside the catch-up window; other overlap policies fire at the tick."""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow import Engine
from lashflow.errors import UnknownRun
from lashflow.testing import FakeClock

HOLD = str(Path(__file__).resolve().parent / "hold.lash")
T0 = 1_800_000_000.0  # a whole minute in UTC
TICK = "s@20270115T080000Z"  # the run id of the tick at T0


async def claimable(e: Engine, now: float) -> list[str]:
    return await e.store.claimable(now, limit=100)


async def test_a_tick_is_written_ahead_and_claimable_from_its_time(db: str) -> None:
    clock = FakeClock(T0 - 30)
    async with Engine(db=db, clock=clock) as e:
        await e.schedules.create("s", HOLD, input={"n": 1}, every="1m", overlap="allow")
        assert (await e.schedules.scheduler.fire_due()).started == 0  # 30 s ahead: not yet
        clock.advance(25)
        report = await e.schedules.scheduler.fire_due()
        assert (report.started, report.lags, report.fire_times) == (1, [0.0], [T0])
        record = await e.get_record(TICK)
        assert (record.status, record.wake_at, record.meta["tick"]) == ("queued", T0, T0)
        assert TICK not in await claimable(e, clock.now())
        assert TICK not in await claimable(e, T0 - 0.001)
        assert TICK in await claimable(e, T0)
        assert (await e.schedules.scheduler.fire_due()).started == 0  # once
        info = await e.schedules.get("s")
        assert info.fired == 1 and info.next_fires[0] == T0 + 60


async def test_a_tick_written_ahead_in_a_queue_waits_for_its_time(db: str) -> None:
    clock = FakeClock(T0 - 5)
    async with Engine(db=db, clock=clock) as e:
        await e.queues.create("q")
        await e.schedules.create("s", HOLD, input={"n": 1}, every="1m", overlap="allow",
                                 queue="q", key="k")
        assert (await e.schedules.scheduler.fire_due()).started == 1
        early = await e.store.take_queued(clock.now(), 4, "w-early", 30.0)
        assert early.claimed == [] and early.listed == []
        due = await e.store.take_queued(T0, 4, "w-due", 30.0)
        assert [c.run.run_id for c in due.claimed] == [TICK]


@pytest.mark.parametrize("change", ["pause", "update", "delete"])
async def test_a_change_takes_back_the_runs_written_ahead(db: str, change: str) -> None:
    clock = FakeClock(T0 - 5)
    async with Engine(db=db, clock=clock) as e:
        await e.schedules.create("s", HOLD, input={"n": 1}, every="1m", overlap="allow")
        assert (await e.schedules.scheduler.fire_due()).started == 1
        if change == "pause":
            await e.schedules.pause("s")
        elif change == "update":
            await e.schedules.update("s", input={"n": 2})
        else:
            await e.schedules.delete("s")
        with pytest.raises(UnknownRun):
            await e.get_record(TICK)  # taken back: it never starts
        assert TICK not in await claimable(e, T0 + 1)
        if change == "delete":
            return
        info = await e.schedules.get("s")
        assert info.fired == 0 and info.next_fires[0] == T0  # the tick is the next again
        if change == "pause":
            clock.advance(15)  # T0 + 10: inside the catch-up window
            await e.schedules.resume("s")
        report = await e.schedules.scheduler.fire_due()
        assert report.started == 1
        record = await e.get_record(TICK)
        assert record.input == {"n": 2 if change == "update" else 1}
        assert (record.wake_at or 0.0) <= T0 + 10


async def test_resumed_after_the_catch_up_window_the_taken_back_tick_is_passed_over(
        db: str) -> None:
    clock = FakeClock(T0 - 5)
    async with Engine(db=db, clock=clock) as e:
        await e.schedules.create("s", HOLD, input={"n": 1}, every="1m", overlap="allow",
                                 catchup_window="10s")
        assert (await e.schedules.scheduler.fire_due()).started == 1
        await e.schedules.pause("s")
        clock.advance(35)  # T0 + 30: past the window
        await e.schedules.resume("s")
        assert (await e.schedules.scheduler.fire_due()).started == 0
        with pytest.raises(UnknownRun):
            await e.get_record(TICK)
        assert (await e.schedules.get("s")).next_fires[0] == T0 + 60


async def test_other_overlap_policies_fire_at_the_tick(db: str) -> None:
    clock = FakeClock(T0 - 5)
    async with Engine(db=db, clock=clock) as e:
        await e.schedules.create("s", HOLD, input={"n": 1}, every="1m", overlap="skip")
        assert (await e.schedules.scheduler.fire_due()).started == 0
        clock.advance(5)
        assert (await e.schedules.scheduler.fire_due()).started == 1
        assert (await e.get_record(TICK)).wake_at is None
