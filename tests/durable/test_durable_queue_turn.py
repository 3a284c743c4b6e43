"""A worker's queued turn (``Store.take_queued``) decides the same on both backends:
SQLite runs the listing program on its writer, PostgreSQL the function
``lashflow_take_queued`` in the server (ADR 0043), two texts of one rule. Keys at their
limit are passed over (counting the runs this turn takes), runs whose lease lapsed are
listed to be resumed one by one, skipped runs are left, a paused queue gives nothing,
and a rate that holds starts back says until when."""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow import Engine
from lashflow.store.base import QueueTake
from lashflow.testing import FakeClock

T0 = 1_800_000_000.0


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "job.lash"
    path.write_text("process job(n: int) {\n  finish n\n}\n")
    return path


async def test_one_turn_passes_over_full_keys_and_lists_lapsed_runs(backend_url: str,
                                                                    source: Path) -> None:
    clock = FakeClock(T0)
    async with Engine(db=backend_url, clock=clock) as engine:
        await engine.queues.create("q", concurrency_per_key=1)
        for run_id, key, priority in (("a1", "a", 2), ("a2", "a", 1), ("b1", "b", 3),
                                      ("c1", "c", 3), ("d1", "d", 3)):
            await engine.create(source, input={"n": 1}, run_id=run_id, queue="q", key=key,
                                priority=priority)
            clock.advance(1)
        store = engine.store
        # best first: a2 (priority 1) takes key a, so a1 waits; d1 is skipped
        first = await store.take_queued(clock.now(), 10, "w1", 30.0, skip={"d1"})
        assert [c.run.run_id for c in first.claimed] == ["a2", "b1", "c1"]
        assert (first.listed, first.allowed_at) == ([], None)
        assert all(c.run.lease_owner == "w1" for c in first.claimed)
        second = await store.take_queued(clock.now(), 10, "w2", 30.0)
        assert [c.run.run_id for c in second.claimed] == ["d1"]  # a, b and c are held
        clock.advance(31)  # every lease lapsed: those runs are resumed, not started again
        third = await store.take_queued(clock.now(), 10, "w3", 30.0, skip={"b1"})
        assert third.claimed == [] and third.listed == ["a2", "c1", "d1"]
        await engine.queues.pause("q")
        assert await store.take_queued(clock.now(), 10, "w3", 30.0) == QueueTake([], [], None)


async def test_a_rate_that_holds_starts_back_says_until_when(backend_url: str,
                                                             source: Path) -> None:
    clock = FakeClock(T0)
    async with Engine(db=backend_url, clock=clock) as engine:
        await engine.queues.create("slow", rate="1/m")
        await engine.queues.create("per-key", rate_per_key="2/m")
        for n in range(2):
            await engine.create(source, input={"n": n}, run_id=f"s{n}", queue="slow")
            await engine.create(source, input={"n": n}, run_id=f"k{n}", queue="per-key",
                                key="k")
            clock.advance(1)
        store = engine.store
        # both of each are listed, the gate lets one of each start
        first = await store.take_queued(clock.now(), 10, "w1", 30.0)
        assert sorted(c.run.run_id for c in first.claimed) == ["k0", "s0"]
        assert first.allowed_at is None
        held = await store.take_queued(clock.now(), 10, "w1", 30.0)
        # the per-key bucket allows the next start 30 s after the first, the queue's 60 s
        assert (held.claimed, held.listed) == ([], [])
        assert held.allowed_at == clock.now() + 30.0
        clock.advance(30)
        later = await store.take_queued(clock.now(), 10, "w1", 30.0)
        assert [c.run.run_id for c in later.claimed] == ["k1"]
        assert later.allowed_at == T0 + 2 + 60.0
