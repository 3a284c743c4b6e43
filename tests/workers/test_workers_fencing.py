"""Fencing: a worker paused (SIGSTOP) past its lease's expiry loses the run to another
worker. Resumed (SIGCONT), its writes are refused (``Fenced``): it stops driving the run,
the journal holds no duplicate or conflicting entry and the run finishes once."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from lashflow.store import open_store
from workers_support import (
    FIVE, Db, Fleet, check_journal, create_runs, executions, journals, read_log, wait_all,
    wait_for,
)

STEP_MS = 500  # long enough that the pause lands inside a step's attempt


async def test_a_paused_worker_is_fenced_when_it_resumes(db: Db, fleet: Fleet, log: Path) -> None:
    paused = fleet.start(concurrency=1, poll=0.2, lease_ttl=1.0)
    await fleet.ready()
    [run_id] = await create_runs(db.url, FIVE, [{"ms": STEP_MS}], "fence")

    async def started() -> bool:
        return any(line.pid == paused.pid for line in read_log(log))
    await wait_for(started, fleet, 60, "the first worker's first step", pause=0.01)
    fleet.kill(paused, signal.SIGSTOP)
    stopped_at = time.time()
    # the taker's own lease is long: the paused one must not win the run back
    taker = fleet.start(concurrency=1, poll=0.2, lease_ttl=30.0)

    async def taken_over() -> bool:
        return any(line.pid == taker.pid for line in read_log(log))
    await wait_for(taken_over, fleet, 60, "the second worker to take the run over")
    fleet.kill(paused, signal.SIGCONT)
    resumed_at = time.time()

    async def refused() -> bool:
        return "lease moved to another worker" in fleet.output(paused)[1]
    await wait_for(refused, fleet, 30, "the resumed worker to be fenced")
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 1, "finished", timeout=60)
    assert set(fleet.stop().values()) == {0}  # the fenced worker is healthy and drains

    paused_out, paused_err = fleet.output(paused)
    taker_out, _ = fleet.output(taker)
    assert f"run {run_id}: its lease moved to another worker" in paused_err
    reported = [line.split(f"run {run_id} ", 1)[1].split()[0]
                for line in paused_out.splitlines() if f"run {run_id} " in line]
    assert set(reported) <= {"running"}  # it never reported the run ended
    assert taker_out.count(f"run {run_id} finished") == 1
    lines = read_log(log)
    assert all(line.at < stopped_at for line in lines if line.pid == paused.pid)
    assert not [line for line in lines if line.pid == paused.pid and line.at > resumed_at]

    runs, steps, attempts = await journals(db.url)
    run = runs[run_id]
    assert (run.status, run.result, run.lease_owner) == ("finished", 5, None)
    keys = check_journal(steps[run_id], attempts[run_id])
    assert [step.outcome["value"] for step in steps[run_id] if step.kind == "tool"] == [1, 2, 3, 4, 5]
    assert [attempt.attempt for attempt in attempts[run_id]] == [1] * 5
    calls = executions(lines)
    paused_keys = [key for key in keys if calls[(run_id, key)][0].pid == paused.pid]
    assert paused_keys, "the paused worker ran no step"
    interrupted = paused_keys[-1]  # the step it was in when paused: the taker ran it again
    assert [line.pid for line in calls[(run_id, interrupted)]] == [paused.pid, taker.pid]
    for key in keys:
        if key != interrupted:
            assert len(calls[(run_id, key)]) == 1, calls[(run_id, key)]
    print(f"\n{db.name}: paused worker fenced after {resumed_at - stopped_at:.1f} s; the "
          f"taker re-ran step {keys.index(interrupted) + 1} and finished the run")
