"""Fire lag and worker CPU of 10,000 schedules that all tick every minute.

For each backend (SQLite in a temporary folder; PostgreSQL at ``--postgres URL`` or
``$LASHFLOW_TEST_POSTGRES_URL``, in a schema made for the run and dropped after), the
schedules are made through ``engine.schedules``, then one worker process fires them for
``--minutes`` minute boundaries. The worker here only fires (the runs it stores stay
queued: driving them is ``bench_workers.py``'s business), so its CPU is the cost of
firing: the due-schedule reads, the tick arithmetic and the batched compare-and-swap
transactions that insert the runs.

Fire lag: from a tick's fire time to the commit of the transaction that stored its run,
as the worker measured it, for the ticks of the minute boundaries after the worker
started (ticks that fell due while the schedules were being made fire on start, as after
downtime, and are counted apart). Worker CPU: the worker process's CPU seconds over the whole
window (idle passes included), per tick and as a share of one core.

Goal: p99 lag under 1 s.

Run: python bench/bench_schedules.py [--schedules 10000] [--minutes 2] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lashflow import Engine  # noqa: E402

PROCESS = "process tick(n: int) {\n  finish n\n}\n"


async def make(db: str, count: int, source: Path) -> float:
    """``count`` schedules ticking every minute; returns the seconds it took."""
    started = time.perf_counter()
    async with Engine(db=db) as engine:
        schedules = engine.schedules
        for first in range(0, count, 200):
            await asyncio.gather(*(
                schedules.create(f"s{index:05d}", source, input={"n": index}, every="1m",
                                 overlap="allow")
                for index in range(first, min(count, first + 200))))
    return time.perf_counter() - started


async def fire(db: str, minutes: int) -> dict[str, object]:
    """The worker's side (run in its own process): the scheduler's own loop, as a
    worker runs it, over ``minutes`` minute boundaries after it starts (plus 20 s to
    fire the last). Passes before the first boundary catch up on ticks that fell due
    while the schedules were being made: they are counted apart, not in the lags."""
    passes: list[tuple[float, Any]] = []
    start = time.time()
    first = (start // 60 + 1) * 60
    until = first + (minutes - 1) * 60 + 20
    async with Engine(db=db) as engine:
        scheduler = engine.schedules.scheduler
        fire_due = scheduler.fire_due

        async def recorded(**options: Any) -> Any:
            began = time.time()
            passes.append((began, await fire_due(**options)))
            return passes[-1][1]
        scheduler.fire_due = recorded  # type: ignore[method-assign]
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(until - time.time(), stop.set)
        cpu, wall = time.process_time(), time.time()
        await scheduler.loop(stop)
        cpu, wall = time.process_time() - cpu, time.time() - wall
    measured = [report for began, report in passes if began >= first]
    return {"lags": [lag for r in measured for lag in r.lags],
            "started": sum(r.started for r in measured), "passes": len(passes),
            "caught_up": sum(r.started for began, r in passes if began < first),
            "cpu": cpu, "wall": wall}


def measure(db: str, count: int, minutes: int, source: Path) -> dict[str, object]:
    made = asyncio.run(make(db, count, source))
    out = subprocess.run([sys.executable, __file__, "--child", db, str(minutes)],
                         capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    result["made"] = made
    return result


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def pg_schema(url: str, drop: str | None = None) -> str:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        if drop:
            await conn.execute(f"DROP SCHEMA IF EXISTS {drop} CASCADE")
            return drop
        schema = f"bench_sched_{uuid.uuid4().hex[:12]}"
        await conn.execute(f"CREATE SCHEMA {schema}")
        return schema
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--postgres", default=os.environ.get("LASHFLOW_TEST_POSTGRES_URL"))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        db, minutes = args.child
        print(json.dumps(asyncio.run(fire(db, int(minutes)))))
        return
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "tick.lash"
        source.write_text(PROCESS)
        backends = [("SQLite", f"sqlite:///{folder}/bench.db")]
        schema = None
        if args.postgres:
            schema = asyncio.run(pg_schema(args.postgres))
            sep = "&" if "?" in args.postgres else "?"
            backends.append(("PostgreSQL", f"{args.postgres}{sep}search_path={schema}"))
        try:
            for name, db in backends:
                print(f"{name}: {args.schedules} schedules, {args.minutes} minute(s)...",
                      file=sys.stderr)
                rows.append((name, measure(db, args.schedules, args.minutes, source)))
        finally:
            if schema is not None:
                asyncio.run(pg_schema(args.postgres, drop=schema))
    print(f"{args.schedules:,} schedules ticking every minute, one worker firing "
          f"({args.minutes} minute boundaries)")
    print(f"{'backend':<11} {'ticks':>7} {'lag p50':>8} {'lag p99':>8} {'lag max':>8} "
          f"{'CPU s':>6} {'CPU/tick':>9} {'core':>5}")
    for name, result in rows:
        lags = list(result["lags"])  # type: ignore[call-overload]
        cpu, wall = float(result["cpu"]), float(result["wall"])  # type: ignore[arg-type]
        ticks = int(result["started"])  # type: ignore[call-overload]
        print(f"{name:<11} {ticks:>7,} {percentile(lags, 0.5):>7.3f}s "
              f"{percentile(lags, 0.99):>7.3f}s {max(lags, default=float('nan')):>7.3f}s "
              f"{cpu:>6.1f} {cpu / max(ticks, 1) * 1e6:>7.0f}us {cpu / wall:>5.0%}")
    for name, result in rows:
        print(f"{name}: made in {float(result['made']):.0f} s; "  # type: ignore[arg-type]
              f"{result['caught_up']} ticks due before the first boundary fired on start, "
              f"not counted; {result['passes']} passes")


if __name__ == "__main__":
    main()
