"""A schedule's runs enter a queue (``schedule create/update --queue NAME --key K``):
they are the queue's runs, listed by queue and key, and the key can change."""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow import Engine
from lashflow.errors import UnknownQueue, UsageError
from lashflow.testing import FakeClock

HERE = Path(__file__).resolve().parent
T0 = 1_800_000_000.0


async def test_a_schedules_runs_enter_its_queue_under_its_key(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    async with Engine(db=str(tmp_path / "s.db"), clock=clock) as engine:
        await engine.queues.create("nightly", concurrency=1)
        info = await engine.schedules.create("report", HERE / "hold.lash", input={"n": 1},
                                             every="1m", overlap="allow", queue="nightly",
                                             key="tenant-1")
        assert info.to_json()["queue"] == {"name": "nightly", "key": "tenant-1", "priority": 3}
        clock.advance(60)
        await engine.schedules.scheduler.fire_due()
        first = len((await engine.runs(queue="nightly", key="tenant-1")).runs)
        assert first >= 1
        await engine.schedules.update("report", key="tenant-2")
        clock.advance(60)
        await engine.schedules.scheduler.fire_due()
        second = len((await engine.runs(queue="nightly", key="tenant-2")).runs)
        assert second >= 1
        assert len((await engine.runs(queue="nightly", key="tenant-1")).runs) == first
        await engine.schedules.update("report", input={"n": 2})  # the queue stays
        assert (await engine.schedules.get("report")).queue == {
            "name": "nightly", "key": "tenant-2", "priority": 3}
        stats = (await engine.queues.get("nightly")).stats
        assert stats is not None and stats.waiting_by_key == {"tenant-1": first, "tenant-2": second}
        with pytest.raises(UnknownQueue):
            await engine.schedules.create("other", HERE / "hold.lash", input={"n": 1},
                                          every="1m", queue="missing")
        with pytest.raises(UsageError):
            await engine.schedules.create("keyed", HERE / "hold.lash", input={"n": 1},
                                          every="1m", key="k")
