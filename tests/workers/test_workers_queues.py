"""Queues obeyed by real worker processes sharing one database, on both backends: per-key
concurrency (measured by the tools themselves), priority, weighted fairness, pause, and
a SIGKILLed worker's slots coming back after its lease (ADR 0031)."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

from lashflow import Engine
from lashflow.store import open_store
from workers_support import TOOLS, Db, Fleet, Line, read_log, scaled, wait_all, wait_for

HELD = Path(__file__).resolve().parent / "held.lash"


async def submit(db_url: str, runs: list[dict[str, Any]], queue: str, prefix: str) -> list[str]:
    """Queue runs of ``held.lash``: each dict has ``key``, ``ms`` and maybe ``priority``."""
    ids = []
    async with Engine(db=db_url, modules=[str(TOOLS)]) as engine:
        for index, run in enumerate(runs):
            record = await engine.create(HELD, input={"key": run["key"], "ms": run["ms"]},
                                         run_id=f"{prefix}{index:05d}", queue=queue,
                                         key=run["key"], priority=run.get("priority"))
            ids.append(record.run_id)
    return ids


async def make_queue(db_url: str, name: str, **limits: Any) -> None:
    async with Engine(db=db_url) as engine:
        await engine.queues.create(name, **limits)


def peaks(log: Path) -> dict[str, int]:
    """The most runs of each key the ``held`` tool ever saw inside it at once."""
    folder = log.parent / "held"
    return {path.name: int(path.read_text().split()[1]) for path in folder.iterdir()}


def starts(log: Path) -> list[Line]:
    return sorted((line for line in read_log(log) if line.tag == "held"), key=lambda l: l.at)


async def test_concurrency_per_key_is_never_exceeded(db: Db, fleet: Fleet, log: Path) -> None:
    """3 workers, 50 keys, 2 runs per key at once. The issue's 2,000 runs are 600 here
    (``LASHFLOW_WORKERS_QUEUE_RUNS`` sets it): on a loaded machine a worker claims a few
    dozen runs a second, and 600 keep each backend's share of the suite under a minute.
    The first 100 runs (two per key) hold for 3 s, so that every key has both its slots
    taken while the workers look for more; the rest take 20 ms. The peak per key is
    counted by the tools, across processes, under a file lock: not by the store that
    enforces it."""
    count = scaled("queue_runs", 600)
    await make_queue(db.url, "orders", concurrency_per_key=2)
    for _ in range(3):
        fleet.start(concurrency=32, poll=0.2)
    await fleet.ready()
    await submit(db.url, [{"key": f"c{n % 50:02d}", "ms": 3000 if n < 100 else 20}
                          for n in range(count)], "orders", "per-key")
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=600)
    assert set(fleet.stop().values()) == {0}
    found = peaks(log)
    assert len(found) == 50
    assert max(found.values()) == 2, found  # the limit was reached, and never passed
    assert len(starts(log)) == count


async def test_a_priority_one_run_starts_next(db: Db, fleet: Fleet, log: Path) -> None:
    """One run at a time (concurrency 1), 1,000 priority-3 runs queued (300 on SQLite,
    for time), then a priority-1 run: it starts at most two starts after it was queued
    (the run holding the slot, and one a worker may have listed just before it came),
    not a thousand."""
    behind = 1000 if db.name == "postgres" else 300
    await make_queue(db.url, "jobs", concurrency=1)
    await submit(db.url, [{"key": f"k{n % 7}", "ms": 5, "priority": 3} for n in range(behind)],
                 "jobs", "low")
    for _ in range(3):
        fleet.start(concurrency=8, poll=0.2)
    await fleet.ready()

    async def some_started() -> bool:
        return len(starts(log)) >= 5
    await wait_for(some_started, fleet, 120, "the first runs to start")
    [urgent] = await submit(db.url, [{"key": "vip", "ms": 5, "priority": 1}], "jobs", "urgent")
    before = len(starts(log))  # started by the time it was queued (or just after)

    async def urgent_started() -> bool:
        return any(line.run_id == urgent for line in starts(log))
    await wait_for(urgent_started, fleet, 120, "the priority-1 run to start")
    order = [line.run_id for line in starts(log)]
    assert order.index(urgent) - before <= 2, f"{order.index(urgent) - before} runs went first"
    assert order.index(urgent) < behind // 2, "most low runs had started: the test proved nothing"
    fleet.stop()


async def test_weighted_fairness_across_keys(db: Db, fleet: Fleet, log: Path) -> None:
    """Keys weighted 3:1, both with a backlog (300 and 100 runs, so both last as long),
    four runs at a time: over the first 240 starts (both keys still have runs waiting)
    each key's share is within 5% of its weight's (75% and 25%)."""
    await make_queue(db.url, "tenants", concurrency=4, fair=True,
                     weights={"gold": 3.0, "free": 1.0})
    runs = [{"key": "gold", "ms": 5}] * 300 + [{"key": "free", "ms": 5}] * 100
    await submit(db.url, runs, "tenants", "fair")
    for _ in range(3):
        fleet.start(concurrency=8, poll=0.2)
    await fleet.ready()
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 400, "finished", timeout=300)
    fleet.stop()
    lines = starts(log)
    print(f"\n{db.name}: 400 starts in {lines[-1].at - lines[0].at:.1f} s")
    first = Counter(line.extra for line in lines[:240])
    for key, share in (("gold", 0.75), ("free", 0.25)):
        measured = first[key] / 240
        assert abs(measured - share) <= 0.05 * share, (key, measured, dict(first))


async def test_a_paused_queue_starts_nothing_and_loses_nothing(db: Db, fleet: Fleet,
                                                               log: Path) -> None:
    await make_queue(db.url, "held", concurrency=4)
    async with Engine(db=db.url) as engine:
        await engine.queues.pause("held")
    ids = await submit(db.url, [{"key": "k", "ms": 1}] * 20, "held", "paused")
    fleet.start(concurrency=8, poll=0.1)
    await fleet.ready()
    async with Engine(db=db.url, modules=[str(TOOLS)]) as engine:
        # runs in no queue, queued after: once they finished, the worker has listed the
        # paused queue's runs too (both lists are read in the same pass), and left them
        for n in range(3):
            await engine.create(HELD, input={"key": "free", "ms": 1}, run_id=f"free{n}")
        async with open_store(db.url) as store:
            await wait_all(store, fleet, 3, "finished", timeout=120)
            assert Counter(run.status for run in await store.list_runs()) == \
                {"queued": 20, "finished": 3}
            assert {line.run_id for line in starts(log)} == {"free0", "free1", "free2"}
            # read while still paused: once resumed, a worker may start some before the
            # answer of ``resume`` reads the queue
            info = await engine.queues.get("held")
            assert info.stats is not None and sum(info.stats.waiting_by_priority.values()) == 20
            assert not (await engine.queues.resume("held")).paused
            await wait_all(store, fleet, 23, "finished", timeout=120)
    fleet.stop()
    assert sorted(line.run_id for line in starts(log) if line.run_id in ids) == ids


async def test_a_killed_workers_slots_come_back_after_its_lease(db: Db, fleet: Fleet,
                                                                log: Path) -> None:
    """Two slots; a worker takes both and is SIGKILLed mid-run. Until its leases run out
    no run of the queue starts anywhere (its slots are still held); then another worker
    takes its runs and the rest, and everything finishes."""
    await make_queue(db.url, "slots", concurrency=2)
    ids = await submit(db.url, [{"key": f"k{n}", "ms": 1500} for n in range(4)], "slots", "slot")
    victim = fleet.start(concurrency=8, poll=0.1, lease_ttl=3.0)
    await fleet.ready()

    async def both_taken() -> bool:
        return len(starts(log)) == 2
    await wait_for(both_taken, fleet, 120, "the victim to start two runs")
    fleet.kill(victim, signal.SIGKILL)
    async with open_store(db.url) as store:
        leases = [(run.lease_owner, run.lease_expires) for run in await store.list_runs()
                  if run.lease_owner is not None]
        assert len(leases) == 2
        expiry = max(expires for _, expires in leases)
        fleet.start(concurrency=8, poll=0.1)
        await wait_all(store, fleet, len(ids), "finished", timeout=120, dead_ok=(victim,))
    assert set(fleet.stop().values()) == {0}
    later = [line for line in starts(log) if line.pid != victim.pid]
    assert len(later) == 4  # the victim's two again, and the two that waited
    assert min(line.at for line in later) > expiry  # nothing before its leases ran out
