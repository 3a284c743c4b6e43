"""How idle workers learn of work: NOTIFY on PostgreSQL (polling as the fallback), and
wake-ups that survive a run parking at the moment something is delivered to it."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, AsyncIterator

import asyncpg
import pytest

from lashflow.store import Commit, RunChange, RunRecord, Store, open_store
from lashflow.store.leases import new_owner_id
from lashflow.store.pg_wakeups import channel_for
from pg_support import postgres_base_url, with_query
from workers_support import Db


def make_run(run_id: str, **fields: Any) -> RunRecord:
    return RunRecord(run_id=run_id, source_hash="sha256:x", process=None, input={},
                     input_hash="h", **fields)


@pytest.fixture
async def store(db: Db) -> AsyncIterator[Store]:
    async with open_store(db.url) as opened:
        yield opened


async def woken_within(store: Store, timeout: float, action: Any = None) -> float:
    """Seconds until ``wait_for_work(timeout)`` returned, with ``action`` run meanwhile."""
    started = time.monotonic()
    waiter = asyncio.ensure_future(store.wait_for_work(timeout))
    await asyncio.sleep(0.05)  # the waiter is asleep now
    if action is not None:
        await action()
    await waiter
    return time.monotonic() - started


async def listening(store: Store) -> None:
    """The first wait connects the listener and returns once it listens."""
    await asyncio.wait_for(store.wait_for_work(30), 30)


async def test_a_delivery_that_races_the_park_is_not_lost(store: Store) -> None:
    owner = new_owner_id()
    await store.create_run(make_run("r", status="running", lease_owner=owner, lease_expires=1e12))
    await store.mark_due("r", 5.0)  # mark_due alone: waiting runs only
    assert (await store.get_run("r")).wake_at is None  # type: ignore[union-attr]
    await store.wake("r", 5.0)  # a completion arrived while the run is on its way to park
    await store.commit(Commit("r", None, run=RunChange("waiting", waiting=[{"kind": "completion"}],
                                                        release_lease=True)))
    parked = await store.get_run("r")
    assert parked is not None and (parked.status, parked.wake_at) == ("waiting", 5.0)
    assert "r" in await store.claimable(10.0)
    # its own earlier timer wins; once running again the wake-up is spent
    await store.create_run(make_run("t", status="running"))
    await store.wake("t", 5.0)
    await store.commit(Commit("t", None, run=RunChange("waiting", wake_at=3.0)))
    assert (await store.get_run("t")).wake_at == 3.0  # type: ignore[union-attr]
    await store.commit(Commit("t", None, run=RunChange("running")))
    await store.commit(Commit("t", None, run=RunChange("finished", result=1)))
    assert (await store.get_run("t")).wake_at is None  # type: ignore[union-attr]
    await store.wake("t", 7.0)  # settled: nothing to wake
    assert (await store.get_run("t")).wake_at is None  # type: ignore[union-attr]


async def test_claimable_respects_the_limit_and_held_leases(store: Store) -> None:
    for n in range(5):
        await store.create_run(make_run(f"q{n}", status="queued", created_at=float(n)))
    assert await store.claimable(100.0, limit=2) == ["q0", "q1"]
    generation = await store.claim("q0", new_owner_id(), 30.0, 100.0)
    assert generation is not None
    assert await store.claimable(100.0, limit=2) == ["q1", "q2"]


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
async def test_a_due_run_being_resumed_is_not_claimable(store: Store) -> None:
    await store.create_run(make_run("due", status="waiting", wake_at=1.0))
    assert await store.claimable(10.0) == ["due"]
    assert await store.claim("due", new_owner_id(), 30.0, 10.0) is not None
    assert await store.claimable(10.0) == []


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
async def test_notify_wakes_an_idle_worker_at_once(db: Db, store: Store) -> None:
    await listening(store)
    async with open_store(db.url) as other:  # another process, as far as the server knows
        async def create() -> None:
            await other.create_run(make_run("new", status="queued"))
        assert await woken_within(store, 10, create) < 2
        await other.create_run(make_run("parked", status="waiting"))

        async def complete() -> None:
            await other.mark_due("parked", 1.0)
        assert await woken_within(store, 10, complete) < 2
        owner = new_owner_id()
        generation = await other.claim("new", owner, 30.0, time.time())

        async def drain() -> None:  # a stopping worker hands its run back
            await other.commit(Commit("new", generation, run=RunChange("queued",
                                                                       release_lease=True)))
        assert await woken_within(store, 10, drain) < 2
        # nothing claimable happened: the wait runs its full time (the polling fallback)
        assert await woken_within(store, 0.5) >= 0.5


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
async def test_schemas_do_not_wake_each_other(store: Store) -> None:
    base = postgres_base_url()
    schema = f"lashflow_test_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(base, timeout=5)
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        await listening(store)
        async with open_store(with_query(base, search_path=schema)) as elsewhere:
            async def create() -> None:
                await elsewhere.create_run(make_run("x", status="queued"))
            assert await woken_within(store, 0.5, create) >= 0.5
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()
    assert channel_for("s" * 100) != channel_for("s" * 99)
    assert len(channel_for("s" * 100).encode()) <= 63


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
async def test_a_lost_listener_falls_back_to_polling_and_comes_back(db: Db, store: Store) -> None:
    await listening(store)
    channel = store.backend.channel  # type: ignore[attr-defined]
    admin = await asyncpg.connect(db.raw_url, timeout=5)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid IN "
            "(SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND query LIKE $1)",
            f"%{channel}%")
        assert killed == 1
        # deaf meanwhile: a wait still ends (polling); the listener reconnects by itself
        assert await woken_within(store, 0.3) >= 0.3
        await asyncio.wait_for(store.wait_for_work(30), 30)  # reconnected: "look once"

        async def create() -> None:
            await store.create_run(make_run("after", status="queued"))
        assert await woken_within(store, 10, create) < 2
    finally:
        await admin.close()
