"""Bulk actions by query (``lashflow retry|pause|unpause|cancel|gc --where``) over many
runs, on SQLite and PostgreSQL, printed as one table (goal: 100,000 runs in under 60 s).

Each database is filled with N failed runs (a tool step that failed, so each has a
journal): 200 real runs, then copied row for row under new run ids until there are N.
Then, in order, each action runs over all of them through ``Engine.bulk`` (a page of
1,000 runs per statement): a dry run (the count), retry (failed -> queued: each run's
journal is read to find where it restarts), pause (queued -> paused), unpause (paused ->
queued), cancel (a cancel requested on each; settling them is the workers' work, not
timed), then gc over them once marked cancelled by one UPDATE (setup, not timed). No
worker runs beside it. ``upgrade`` is left out: it replays every run against the new
version, which ``bench_verify.py`` measures.

Usage:
    python bench/bench_bulk.py                  # 100,000 runs on both databases
    python bench/bench_bulk.py --sizes 10000    # a quicker look
    python bench/bench_bulk.py --no-postgres
PostgreSQL: ``$LASHFLOW_BENCH_POSTGRES_URL`` (else ``$LASHFLOW_TEST_POSTGRES_URL``); each
size gets a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import time

from bench_verify import SEED_RUNS, databases, log, postgres_url

from lashflow import Engine, ToolResult, tool

PAY = "process pay(n: int) {\n  r = await tools.charge({n: n})?\n  finish r\n}"
STEPS = (("dry run", "retry", "status=failed", True), ("retry", "retry", "status=failed", False),
         ("pause", "pause", "status=queued", False),
         ("unpause", "unpause", "status=paused", False),
         ("cancel", "cancel", "status=queued", False), ("gc", "gc", "status=cancelled", False))


@tool
async def charge(n: int) -> ToolResult:
    return ToolResult.failure("card service down")


async def seed(db: str) -> None:
    async with Engine(db=db, tools=[charge]) as engine:
        for n in range(SEED_RUNS):
            outcome = await engine.run(PAY, "pay", {"n": n})
            assert outcome.status.value == "failed", outcome


async def settle_cancelled(db: str) -> None:
    """Setup for gc (not timed): what the workers would do to the cancelled runs."""
    if db.startswith("sqlite"):
        conn = sqlite3.connect(db.removeprefix("sqlite:///"))
        with conn:
            conn.execute("UPDATE runs SET status = 'cancelled', cancel_requested = 0")
        conn.close()
        return
    import asyncpg

    conn = await asyncpg.connect(db)
    try:
        await conn.execute("UPDATE lashflow_runs SET status = 'cancelled', "
                           "cancel_requested = FALSE")
    finally:
        await conn.close()


async def measure(db: str, size: int) -> list[tuple[str, int, float]]:
    rows = []
    async with Engine(db=db, tools=[charge]) as engine:
        for label, action, where, dry in STEPS:
            if action == "gc":
                await settle_cancelled(db)
            start = time.perf_counter()
            report = await engine.bulk(action, where, dry_run=dry)
            seconds = time.perf_counter() - start
            assert report.acted == size, (label, report.to_json())
            rows.append((label, report.acted, seconds))
            log(f"  {label}: {report.acted:,} runs in {seconds:.1f} s")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="bulk actions over many runs")
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base = None if args.no_postgres else postgres_url()
    table = [(name, size, asyncio.run(measure(url, size)))
             for name, size, url in databases(sizes, base, seed, "failed")]
    print(f"bulk actions by query, a page of 1,000 runs per statement ({os.cpu_count()} "
          f"cores, load {os.getloadavg()[0]:.1f}; goal: 100,000 runs under 60 s)")
    header = f"{'database':<11} {'runs':>8}  {'action':<8} {'seconds':>8} {'runs/s':>9}"
    print(header)
    print("-" * len(header))
    for name, size, steps in table:
        for label, acted, seconds in steps:
            print(f"{name:<11} {size:>8,}  {label:<8} {seconds:>8.1f} "
                  f"{acted / max(seconds, 1e-9):>9,.0f}")


if __name__ == "__main__":
    sys.exit(main())
