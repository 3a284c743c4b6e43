"""What a submission into a queue does, with real worker processes on both backends:
dedup ids from concurrent submitters, debounce windows, singletons (ADR 0031)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from lashflow import Engine
from lashflow.store import open_store
from lashflow.testing import FakeClock
from test_workers_queues import HELD, make_queue, starts
from workers_support import TOOLS, Db, Fleet, child_env, wait_all, wait_for


async def test_ten_concurrent_submissions_with_one_dedup_id_make_one_run(
        db: Db, fleet: Fleet, log: Path) -> None:
    """Ten ``lashflow submit`` processes at once, one dedup id, different inputs."""
    await make_queue(db.url, "orders")
    procs = [subprocess.Popen(
        [sys.executable, "-m", "lashflow", "submit", str(HELD), "--input",
         json.dumps({"key": "k", "ms": n}), "--queue", "orders", "--key", "k",
         "--dedup-id", "order-4711", "--db", db.url, "--tools", str(TOOLS), "--json"],
        env=child_env(log), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(10)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        answers.append(json.loads(out)["run_id"])
    assert len(set(answers)) == 1
    fleet.start(concurrency=8, poll=0.1)
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 1, "finished", timeout=120)
        assert [run.run_id for run in await store.list_runs()] == answers[:1]
    fleet.stop()
    assert [line.run_id for line in starts(log)] == answers[:1]


async def test_a_hundred_submissions_in_a_window_make_one_run_with_the_newest_input(
        db: Db, fleet: Fleet, log: Path) -> None:
    """The submitter's clock stands still (a FakeClock at the real time), so all 100
    submissions fall in one 3 s window whatever the machine's load, and the queue is
    paused while they are made (a loaded machine may take longer than the window to make
    them: the run must not start in the middle). The workers' clocks are real: resumed,
    the run starts once the window has closed, with the last input."""
    await make_queue(db.url, "reindex")
    async with Engine(db=db.url) as engine:
        await engine.queues.pause("reindex")
    fleet.start(concurrency=8, poll=0.1)
    await fleet.ready()
    submitted_at = time.time()
    async with Engine(db=db.url, modules=[str(TOOLS)], clock=FakeClock(submitted_at)) as engine:
        ids = {(await engine.create(HELD, input={"key": "doc-1", "ms": n}, queue="reindex",
                                    key="doc-1", debounce="3s")).run_id for n in range(100)}
        other = await engine.create(HELD, input={"key": "doc-2", "ms": 1}, queue="reindex",
                                    key="doc-2", debounce="3s", debounce_keep="oldest")
        again = await engine.create(HELD, input={"key": "doc-2", "ms": 2}, queue="reindex",
                                    key="doc-2", debounce="3s", debounce_keep="oldest")
        await engine.queues.resume("reindex")
    assert len(ids) == 1 and again.run_id == other.run_id
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 2, "finished", timeout=120)
        runs = {run.run_id: run for run in await store.list_runs()}
    fleet.stop()
    [run_id] = ids
    assert (runs[run_id].input, runs[run_id].result) == ({"key": "doc-1", "ms": 99}, 99)
    assert runs[other.run_id].input == {"key": "doc-2", "ms": 1}
    first = min(line.at for line in starts(log))
    assert first >= submitted_at + 3.0  # not before the window closed
    assert sorted(line.run_id for line in starts(log)) == sorted([run_id, other.run_id])


async def test_a_singleton_key_skips_or_cancels_the_running_run(db: Db, fleet: Fleet,
                                                                log: Path) -> None:
    await make_queue(db.url, "sync", concurrency_per_key=1)
    fleet.start(concurrency=8, poll=0.1)
    await fleet.ready()
    async with Engine(db=db.url, modules=[str(TOOLS)]) as engine:
        first = await engine.create(HELD, input={"key": "acct", "ms": 60_000}, queue="sync",
                                    key="acct", singleton="skip")

        async def first_started() -> bool:
            return any(line.run_id == first.run_id for line in starts(log))
        await wait_for(first_started, fleet, 120, "the first run to start")
        skipped = await engine.create(HELD, input={"key": "acct", "ms": 5}, queue="sync",
                                      key="acct", singleton="skip")
        assert skipped.run_id == first.run_id
        newer = await engine.create(HELD, input={"key": "acct", "ms": 5}, queue="sync",
                                    key="acct", singleton="cancel-running")
        assert newer.run_id != first.run_id
        async with open_store(db.url) as store:
            async def settled() -> bool:
                found = {run.run_id: run.status for run in await store.list_runs()}
                return found == {first.run_id: "cancelled", newer.run_id: "finished"}
            await wait_for(settled, fleet, 120, "the first cancelled, the newer finished")
    fleet.stop()
