"""Several worker processes share one database: every run finishes and every step's side
effect happens exactly once; SIGTERM drains them and leaves no lease behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from lashflow.store import open_store
from workers_support import (
    FIVE, TOOLS, Db, Fleet, check_journal, child_env, create_runs, executions, journals,
    read_log, scaled, wait_all,
)

# (worker processes, runs of five steps, runs per worker at once): the numbers on
# PostgreSQL; fewer slots than runs, so that every worker has to take some
SIZES = {"postgres": (3, scaled("runs", 300), 32), "sqlite": (3, scaled("sqlite_runs", 60), 8)}


async def test_workers_run_every_step_exactly_once(db: Db, fleet: Fleet, log: Path) -> None:
    workers, count, concurrency = SIZES[db.name]
    for _ in range(workers):
        fleet.start(concurrency=concurrency, poll=0.2)
    await fleet.ready()
    started = time.monotonic()
    ids = await create_runs(db.url, FIVE, [{"ms": 5}] * (count - 1), "share")
    submitted = subprocess.run(  # one as an operator submits it
        [sys.executable, "-m", "lashflow", "submit", str(FIVE), "--input", '{"ms": 5}',
         "--run-id", "share-cli", "--db", db.url, "--tools", str(TOOLS), "--json"],
        env=child_env(log), capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["status"] in ("queued", "running", "finished")
    ids.append("share-cli")
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=180)
    elapsed = time.monotonic() - started
    assert fleet.stop() == {f"worker{n}": 0 for n in range(workers)}  # drained, exit 0

    runs, steps, attempts = await journals(db.url)
    assert sorted(runs) == sorted(ids)
    calls = executions(read_log(log))
    for run_id in ids:
        run = runs[run_id]
        assert (run.status, run.result, run.lease_owner) == ("finished", 5, None)
        keys = check_journal(steps[run_id], attempts[run_id])
        assert len(keys) == 5
        for key in keys:
            assert len(calls[(run_id, key)]) == 1, calls[(run_id, key)]
    assert sum(len(found) for found in calls.values()) == 5 * count  # nothing else ran
    per_worker = Counter(found[0].pid for found in calls.values())
    assert len(per_worker) == workers, f"not every worker took runs: {per_worker}"
    print(f"\n{db.name}: {workers} workers, {count} runs x 5 steps in {elapsed:.2f} s "
          f"({5 * count / elapsed:.0f} steps/s); steps per worker {sorted(per_worker.values())}")
