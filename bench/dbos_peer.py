"""The peer of ``bench_durable.py``: DBOS Transact on SQLite, run in its own virtualenv.

Why a separate script: DBOS is a benchmark-only dependency that must never be imported
by lashflow or its test environment, so ``bench_durable.py`` runs this file with the
python of ``bench/.venv-dbos`` and reads the one JSON object it prints on stdout.

The workload is the same as lashflow's: a workflow of 10 trivial ``@DBOS.step()`` calls,
N workflows one after another (sequential) and N workflows with at most C in flight.
Each shape is measured with DBOS's synchronous API and with its asyncio API, and the
faster one is reported (both are printed in the JSON), so the peer is never handicapped
by our choice of API. ``--wal`` sets ``PRAGMA journal_mode=WAL`` on the database file
before DBOS opens it (journal mode is persistent in the file); without it DBOS runs
as shipped (rollback journal). ``synchronous`` is SQLite's default (FULL) either way.

Usage (normally called by bench_durable.py):
    bench/.venv-dbos/bin/python bench/dbos_peer.py --db DIR/dbos.sqlite [--wal]
        [--runs 200] [--steps 10] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import sys
import threading
import time
import uuid
from typing import Any, Callable

from dbos import DBOS, DBOSConfig, SetWorkflowID

STEPS = 10


@DBOS.step()
def noop_step(i: int) -> int:
    """The trivial step: returns its input, as lashflow's ``noop`` tool does."""
    return i


@DBOS.workflow()
def steps_workflow(n: int) -> int:
    """N journaled steps, one after another (synchronous API)."""
    i = 0
    while i < n:
        noop_step(i)
        i += 1
    return i


@DBOS.step()
async def noop_step_async(i: int) -> int:
    """The trivial step for the asyncio API."""
    return i


@DBOS.workflow()
async def steps_workflow_async(n: int) -> int:
    """N journaled steps, one after another (asyncio API)."""
    i = 0
    while i < n:
        await noop_step_async(i)
        i += 1
    return i


def _wid(prefix: str, k: int) -> str:
    return f"{prefix}-{k}-{uuid.uuid4().hex[:8]}"


def seq_sync(runs: int, steps: int) -> float:
    """Workflows one after another through the synchronous API; returns seconds."""
    started = time.perf_counter()
    for k in range(runs):
        with SetWorkflowID(_wid("seq-sync", k)):
            assert steps_workflow(steps) == steps
    return time.perf_counter() - started


def seq_async(runs: int, steps: int) -> float:
    """Workflows one after another through the asyncio API; returns seconds."""
    async def go() -> float:
        started = time.perf_counter()
        for k in range(runs):
            with SetWorkflowID(_wid("seq-async", k)):
                assert await steps_workflow_async(steps) == steps
        return time.perf_counter() - started
    return asyncio.run(go())


def conc_async(runs: int, steps: int, concurrency: int) -> float:
    """asyncio.gather of all workflows under a semaphore of ``concurrency``."""
    async def go() -> float:
        gate = asyncio.Semaphore(concurrency)

        async def one(k: int) -> None:
            async with gate:
                with SetWorkflowID(_wid("conc-async", k)):
                    assert await steps_workflow_async(steps) == steps

        started = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(runs)))
        return time.perf_counter() - started
    return asyncio.run(go())


def conc_threads(runs: int, steps: int, concurrency: int) -> float:
    """``concurrency`` threads each running synchronous workflows (DBOS's native model)."""
    counter = iter(range(runs))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                k = next(counter, None)
            if k is None:
                return
            with SetWorkflowID(_wid("conc-thread", k)):
                assert steps_workflow(steps) == steps

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def best(label_fns: dict[str, Callable[[], float]], total_steps: int) -> dict[str, Any]:
    """Run each variant once; report steps/s of each and of the fastest."""
    rates = {label: total_steps / fn() for label, fn in label_fns.items()}
    winner = max(rates, key=rates.__getitem__)
    return {"steps_per_s": rates[winner], "api": winner, "variants": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file (created; its folder must exist)")
    parser.add_argument("--wal", action="store_true", help="set journal_mode=WAL on the file first")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--size", action="store_true",
                        help="only run --runs workflows one after another and exit (the "
                             "caller measures the file: bench_size.py)")
    args = parser.parse_args()

    if args.wal:
        conn = sqlite3.connect(args.db)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        conn.close()
        assert mode == "wal", mode
    logging.getLogger("dbos").setLevel(logging.WARNING)
    config: DBOSConfig = {
        "name": "lashflow-bench",
        "system_database_url": f"sqlite:///{os.path.abspath(args.db)}",
        "application_version": "lashflow-bench-1",  # pinned: recovery never sees foreign runs
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    if args.size:
        try:
            seq_sync(args.runs, args.steps)
        finally:
            DBOS.destroy()
        return
    try:
        # warm-up: first-use costs (imports, statement caches) out of the timings
        seq_sync(2, args.steps)
        seq_async(2, args.steps)
        total = args.runs * args.steps
        sequential = best({
            "sync": lambda: seq_sync(args.runs, args.steps),
            "asyncio": lambda: seq_async(args.runs, args.steps),
        }, total)
        concurrent = best({
            "asyncio.gather": lambda: conc_async(args.runs, args.steps, args.concurrency),
            "threads": lambda: conc_threads(args.runs, args.steps, args.concurrency),
        }, total)
        conn = sqlite3.connect(args.db)
        journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        conn.close()
    finally:
        DBOS.destroy()
    json.dump({"sequential": sequential, "concurrent": concurrent, "journal_mode": journal_mode,
               "runs": args.runs, "steps": args.steps, "concurrency": args.concurrency,
               "dbos_version": _dbos_version()}, sys.stdout)
    sys.stdout.write("\n")


def _dbos_version() -> str:
    from importlib.metadata import version
    return version("dbos")


if __name__ == "__main__":
    main()
