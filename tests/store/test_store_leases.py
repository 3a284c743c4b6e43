"""Leases: claim, renew, take-over from expired or dead owners, generation fencing."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from typing import Any

import pytest

from lashflow.store import Commit, Fenced, RunRecord, StepRecord, Store
from lashflow.store.leases import new_owner_id


def make_run(run_id: str, **fields: Any) -> RunRecord:
    return RunRecord(run_id=run_id, source_hash="src", process=None, input={}, input_hash="in",
                     **fields)


def dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:deadbeef"


async def test_claim_a_free_run_takes_the_lease_and_bumps_the_generation(store: Store) -> None:
    await store.create_run(make_run("r"))
    assert await store.claim("r", "w1", ttl=30, now=100.0) == 1
    run = await store.get_run("r")
    assert run is not None
    assert (run.lease_owner, run.lease_expires, run.generation) == ("w1", 130.0, 1)


async def test_claim_run_hands_back_the_row_as_claimed_and_whose_lease_it_was(
        store: Store) -> None:
    await store.create_run(RunRecord("r", "src", None, {"n": 1}, "in", status="waiting",
                                     meta={"m": 2}))
    first = await store.claim_run("r", "w1", ttl=30, now=100.0)
    assert first is not None and first.taken_from is None
    assert first.run == await store.get_run("r")  # exactly what a read would give now
    assert (first.run.lease_owner, first.run.lease_expires, first.run.generation) == ("w1", 130.0, 1)
    assert (first.run.status, first.run.input, first.run.meta) == ("waiting", {"n": 1}, {"m": 2})
    again = await store.claim_run("r", "w1", ttl=30, now=110.0)
    assert again is not None and again.taken_from == "w1" and again.run.generation == 2
    taken = await store.claim_run("r", "w2", ttl=30, now=200.0)  # w1's lease ran out
    assert taken is not None and taken.taken_from == "w1" and taken.run.lease_owner == "w2"
    assert taken.run == await store.get_run("r")
    assert await store.claim_run("r", "w3", ttl=30, now=201.0) is None


async def test_claim_of_an_unknown_run_is_none(store: Store) -> None:
    assert await store.claim("missing", "w1", ttl=30, now=0.0) is None


async def test_a_held_lease_is_refused_to_others_and_reclaimed_by_its_owner(store: Store) -> None:
    await store.create_run(make_run("r"))
    assert await store.claim("r", "w1", ttl=30, now=100.0) == 1
    assert await store.claim("r", "w2", ttl=30, now=129.0) is None
    assert await store.claim("r", "w2", ttl=30, now=130.0) is None  # expires < now is strict
    assert await store.claim("r", "w1", ttl=30, now=110.0) == 2
    run = await store.get_run("r")
    assert run is not None and run.lease_owner == "w1" and run.lease_expires == 140.0


async def test_renew_needs_the_owner_and_the_generation(store: Store) -> None:
    await store.create_run(make_run("r"))
    generation = await store.claim("r", "w1", ttl=30, now=100.0)
    assert generation == 1
    assert await store.renew("r", "w1", 1, ttl=30, now=120.0) is True
    assert (await store.get_run("r")).lease_expires == 150.0  # type: ignore[union-attr]
    assert await store.renew("r", "w2", 1, ttl=30, now=120.0) is False
    assert await store.renew("r", "w1", 2, ttl=30, now=120.0) is False
    assert await store.renew("missing", "w1", 1, ttl=30, now=120.0) is False
    # renewed: still held at 140 by w1, so w2 cannot take it
    assert await store.claim("r", "w2", ttl=30, now=140.0) is None


async def test_an_expired_lease_is_taken_over_and_the_old_owner_fenced(store: Store) -> None:
    await store.create_run(make_run("r"))
    old = await store.claim("r", "w1", ttl=10, now=100.0)
    new = await store.claim("r", "w2", ttl=10, now=111.0)
    assert (old, new) == (1, 2)
    assert await store.renew("r", "w1", 1, ttl=10, now=112.0) is False
    with pytest.raises(Fenced) as info:
        await store.commit(Commit("r", old, steps=[StepRecord("r", "s:0", "tool", seq=0)]))
    assert info.value.code == "lease_lost"
    await store.commit(Commit("r", new, steps=[StepRecord("r", "s:0", "tool", seq=0, outcome=2)]))
    steps, _ = await store.load_journal("r")
    assert [(s.step_key, s.outcome) for s in steps] == [("s:0", 2)]


async def test_a_dead_local_owner_loses_its_lease_at_once(store: Store) -> None:
    await store.create_run(make_run("r", lease_owner=dead_owner(), lease_expires=1e12, generation=4))
    assert await store.claim("r", "w2", ttl=30, now=0.0, steal_from_dead=False) is None
    assert await store.claim("r", "w2", ttl=30, now=0.0) == 5


async def test_a_live_owner_keeps_its_lease(store: Store) -> None:
    await store.create_run(make_run("r", lease_owner=new_owner_id(), lease_expires=1e12,
                                    generation=1))
    assert await store.claim("r", "w2", ttl=30, now=0.0) is None  # our own pid is alive
    await store.create_run(make_run("r2", lease_owner="far-away-host:1:abc", lease_expires=1e12))
    assert await store.claim("r2", "w2", ttl=30, now=0.0) is None  # not provably dead


async def test_release_in_a_commit_frees_the_lease(store: Store) -> None:
    from lashflow.store import RunChange

    await store.create_run(make_run("r"))
    generation = await store.claim("r", "w1", ttl=30, now=100.0)
    await store.commit(Commit("r", generation, run=RunChange("waiting", release_lease=True)))
    run = await store.get_run("r")
    assert run is not None and run.lease_owner is None and run.lease_expires == 0.0
    assert run.generation == 1
    assert await store.claim("r", "w2", ttl=30, now=100.0) == 2


async def test_concurrent_claims_by_many_workers_have_one_winner(backend: Any) -> None:
    async with backend.make() as first, backend.make() as second:
        await first.create_run(make_run("r"))
        stores = [first, second]
        results = await asyncio.gather(*[
            stores[i % 2].claim("r", f"w{i}", ttl=30, now=100.0) for i in range(20)])
        winners = [i for i, generation in enumerate(results) if generation is not None]
        assert len(winners) == 1
        assert results[winners[0]] == 1
        run = await first.get_run("r")
        assert run is not None and run.lease_owner == f"w{winners[0]}" and run.generation == 1


async def test_many_runs_claimed_concurrently_each_once(backend: Any) -> None:
    async with backend.make() as first, backend.make() as second:
        for i in range(30):
            await first.create_run(make_run(f"r{i}"))
        claims = [(store, f"r{i}", f"w{k}") for i in range(30)
                  for k, store in enumerate((first, second))]
        results = await asyncio.gather(*[store.claim(run_id, owner, ttl=30, now=1.0)
                                         for store, run_id, owner in claims])
        won: dict[str, list[str]] = {}
        for (_, run_id, owner), generation in zip(claims, results):
            if generation is not None:
                won.setdefault(run_id, []).append(owner)
        assert sorted(won) == sorted(f"r{i}" for i in range(30))
        assert all(len(owners) == 1 for owners in won.values())


async def test_a_worker_racing_a_takeover_never_writes_after_it(backend: Any) -> None:
    async with backend.make() as old_worker, backend.make() as new_worker:
        await old_worker.create_run(make_run("r"))
        generation = await old_worker.claim("r", "w1", ttl=1, now=0.0)
        assert generation is not None
        acknowledged: list[str] = []

        async def keep_writing() -> None:
            n = 0
            while True:
                key = f"s{n}:0"
                try:
                    await old_worker.commit(Commit("r", generation,
                                                   steps=[StepRecord("r", key, "tool", seq=n)]))
                except Fenced:
                    return
                acknowledged.append(key)
                n += 1

        writer = asyncio.ensure_future(keep_writing())
        while len(acknowledged) < 5:
            await asyncio.sleep(0.005)
        assert await new_worker.claim("r", "w2", ttl=60, now=10.0) == generation + 1
        at_takeover = len(acknowledged)
        await asyncio.wait_for(writer, 10)
        # at most the one write already in flight lands; everything acknowledged is there
        assert len(acknowledged) <= at_takeover + 1
        steps, _ = await new_worker.load_journal("r")
        assert [s.step_key for s in steps] == acknowledged


async def test_a_settled_run_is_not_claimed_and_not_touched(store: Store) -> None:
    for status in ("finished", "failed", "cancelled"):
        await store.create_run(make_run(status, status=status, updated_at=5.0))
        assert await store.claim_run(status, "w1", ttl=30, now=100.0) is None
        run = await store.get_run(status)
        assert run is not None
        assert (run.lease_owner, run.generation, run.updated_at) == (None, 0, 5.0)
