"""A worker SIGKILLed mid-run: the others finish every run it held. Each recorded step ran
once, except the steps in flight at the kill (at most one per run the dead worker held),
which ran again elsewhere: the tools are idempotent, so that is allowed, and counted."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from lashflow.store import open_store
from workers_support import (
    FIVE, Db, Fleet, Line, check_journal, create_runs, executions, journals, read_log, scaled,
    wait_all, wait_for,
)

# (workers, runs of five 20 ms steps, runs per worker at once)
SIZES = {"postgres": (3, scaled("runs", 300), 16), "sqlite": (3, scaled("sqlite_runs", 60), 6)}


async def test_a_killed_workers_runs_finish_elsewhere(db: Db, fleet: Fleet, log: Path) -> None:
    workers, count, concurrency = SIZES[db.name]
    # The dead worker's runs are taken at once: it ran on this host and its pid is gone.
    # (A worker on another host would wait for the lease; test_workers_fencing covers a
    # lease that expires.) The lease is long so that a live worker, slowed down by a busy
    # machine, never loses a run here.
    procs = [fleet.start(concurrency=concurrency, poll=0.2, lease_ttl=10.0)
             for _ in range(workers)]
    victim = procs[0]
    await fleet.ready()
    # created while the test watches: on a loaded machine the creating alone can outlast
    # the workers' whole job, and the victim is caught in the middle of its runs only if
    # the watching starts with them
    creating = asyncio.ensure_future(create_runs(db.url, FIVE, [{"ms": 20}] * count, "kill"))

    async def under_way() -> bool:  # the victim is in the middle of many runs
        calls = executions(read_log(log))
        steps_per_run: dict[str, int] = {}
        for (run_id, _), found in calls.items():
            if found[0].pid == victim.pid:
                steps_per_run[run_id] = steps_per_run.get(run_id, 0) + 1
        return sum(done < 5 for done in steps_per_run.values()) >= concurrency // 2
    await wait_for(under_way, fleet, 120, "the victim to be in the middle of runs", pause=0.01)
    fleet.kill(victim, signal.SIGKILL)
    killed_at = time.time()
    ids = await creating
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=180, dead_ok=(victim,))
    recovered_in = time.time() - killed_at
    assert set(fleet.stop().values()) == {0}

    runs, steps, attempts = await journals(db.url)
    lines = read_log(log)
    calls = executions(lines)
    last_of_victim: dict[str, Line] = {}
    for line in lines:
        if line.pid == victim.pid:
            last_of_victim[line.run_id] = line
    twice: dict[str, str] = {}
    for run_id in ids:
        run = runs[run_id]
        assert (run.status, run.result, run.lease_owner) == ("finished", 5, None)
        keys = check_journal(steps[run_id], attempts[run_id])
        assert len(keys) == 5
        assert {step for run, step in calls if run == run_id} == set(keys)  # nothing else ran
        for key in keys:
            found = calls[(run_id, key)]
            if len(found) == 1:
                continue
            # ran twice: first by the victim as its last call in this run, before the kill
            # (in flight), then by a survivor
            assert len(found) == 2, found
            first, second = found
            assert first.pid == victim.pid != second.pid, found
            assert last_of_victim[run_id] == first and first.at <= killed_at, found
            assert run_id not in twice, (run_id, twice[run_id], key)
            twice[run_id] = key
    held = {run_id for run_id, line in last_of_victim.items()
            if any(other.pid != victim.pid and other.at > line.at
                   for key in steps_of(calls, run_id) for other in calls[(run_id, key)])}
    assert held, "the victim held no run at the kill: nothing was taken over"
    assert set(twice) <= held and len(held) <= concurrency
    print(f"\n{db.name}: killed a worker holding {len(held)} runs; all {count} runs finished "
          f"{recovered_in:.2f} s later; {len(twice)} steps in flight at the kill ran twice, "
          f"every other step once")


def steps_of(calls: dict[tuple[str, str], list[Line]], run_id: str) -> list[str]:
    return [step for run, step in calls if run == run_id]



async def test_a_stopped_worker_hands_its_runs_back_whole(db: Db, fleet: Fleet, log: Path) -> None:
    """SIGTERM is the graceful way: attempts in flight finish and are journaled, the runs
    go back to the queue with their lease released, and no step runs twice."""
    workers, count, concurrency = SIZES[db.name]
    count //= 2
    procs = [fleet.start(concurrency=concurrency, poll=0.2) for _ in range(workers)]
    leaving = procs[0]
    await fleet.ready()
    # steps of 80 ms: a run spans 0.4 s, so the SIGTERM lands inside the leaving worker's
    # runs even on a loaded machine (with 20 ms steps it could find them all finished)
    creating = asyncio.ensure_future(create_runs(db.url, FIVE, [{"ms": 80}] * count, "term"))

    async def under_way() -> bool:
        return sum(line.pid == leaving.pid for line in read_log(log)) >= concurrency
    await wait_for(under_way, fleet, 120, "the leaving worker to be busy", pause=0.01)
    fleet.kill(leaving, signal.SIGTERM)
    ids = await creating
    assert leaving.wait(timeout=60) == 0
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=180, dead_ok=(leaving,))
    assert set(fleet.stop().values()) == {0}
    runs, steps, attempts = await journals(db.url)
    calls = executions(read_log(log))
    handed_back = set()
    for run_id in ids:
        assert (runs[run_id].status, runs[run_id].result) == ("finished", 5)
        keys = check_journal(steps[run_id], attempts[run_id])
        for key in keys:
            assert len(calls[(run_id, key)]) == 1, calls[(run_id, key)]
        pids = [calls[(run_id, key)][0].pid for key in keys]
        if leaving.pid in pids and pids[-1] != leaving.pid:
            handed_back.add(run_id)
    touched = {run_id: [calls[(run_id, key)][0].pid for key in check_journal(steps[run_id],
                                                                           attempts[run_id])]
               for run_id in ids}
    assert handed_back, ("the leaving worker handed no run back: "
                         f"{ {r: p for r, p in touched.items() if leaving.pid in p} }")
    print(f"\n{db.name}: a worker stopped by SIGTERM handed {len(handed_back)} runs back; "
          f"others finished them, no step ran twice")
