"""Fire lag, write throughput and worker CPU of 10,000 schedules that all tick every
minute.

For each backend (SQLite in a temporary folder; PostgreSQL at ``--postgres URL`` or
``$LASHFLOW_TEST_POSTGRES_URL``, in a schema made for the run and dropped after), the
schedules (overlap ``allow``) are made through ``engine.schedules``, then one worker
process fires them for ``--minutes`` minute boundaries. The worker here only fires (the
runs it stores stay queued: driving them is ``bench_workers.py``'s business), so its
CPU is the cost of firing: the due-schedule reads, the tick arithmetic and the batched
compare-and-swap transactions that insert the runs.

Fire lag of a tick: from its fire time to the moment its run is claimable, that is
``max(0, commit - fire time)`` where ``commit`` is when the transaction that stored the
run committed, as the worker measured it. A run written ahead (ADR 0030, amendment:
ticks due within 10 s are stored early, claimable from their fire time) that was
committed before its fire time has lag 0. Counted for the ticks of the minute
boundaries after the worker started; ticks that fell due while the schedules were being
made fire on start, as after downtime, and are counted apart. Write throughput: runs
stored per second of the transactions that stored them. Worker CPU: the worker
process's CPU seconds over the whole window (idle passes included), per tick and as a
share of one core.

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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import percentile, pg_schemas  # noqa: E402

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
    fire the last). Ticks whose fire time is before the first boundary caught up on
    what fell due while the schedules were being made: counted apart, not in the lags."""
    passes: list[Any] = []
    start = time.time()
    first = (start // 60 + 1) * 60
    until = first + (minutes - 1) * 60 + 20
    async with Engine(db=db) as engine:
        scheduler = engine.schedules.scheduler
        fire_due = scheduler.fire_due

        async def recorded(**options: Any) -> Any:
            passes.append(await fire_due(**options))
            return passes[-1]
        scheduler.fire_due = recorded  # type: ignore[method-assign]
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(until - time.time(), stop.set)
        cpu, wall = time.process_time(), time.time()
        await scheduler.loop(stop)
        cpu, wall = time.process_time() - cpu, time.time() - wall
    lags = [lag for r in passes for lag, at in zip(r.lags, r.fire_times) if at >= first]
    return {"lags": lags, "started": len(lags), "passes": len(passes),
            "caught_up": sum(1 for r in passes for at in r.fire_times if at < first),
            "written": sum(r.started for r in passes),
            "write_seconds": sum(r.write_seconds for r in passes), "cpu": cpu, "wall": wall}


def measure(db: str, count: int, minutes: int, source: Path) -> dict[str, object]:
    made = asyncio.run(make(db, count, source))
    out = subprocess.run([sys.executable, __file__, "--child", db, str(minutes)],
                         capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    result["made"] = made
    return result


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
    with tempfile.TemporaryDirectory() as folder, \
            pg_schemas(args.postgres or "", "bench_sched") as schemas:
        source = Path(folder) / "tick.lash"
        source.write_text(PROCESS)
        backends = [("SQLite", f"sqlite:///{folder}/bench.db")]
        if args.postgres:
            backends.append(("PostgreSQL", schemas.make()))
        for name, db in backends:
            print(f"{name}: {args.schedules} schedules, {args.minutes} minute(s)...",
                  file=sys.stderr)
            rows.append((name, measure(db, args.schedules, args.minutes, source)))
    print(f"{args.schedules:,} schedules ticking every minute, one worker firing "
          f"({args.minutes} minute boundaries; load {os.getloadavg()[0]:.1f})")
    print(f"{'backend':<11} {'ticks':>7} {'lag p50':>8} {'lag p99':>8} {'lag max':>8} "
          f"{'writes/s':>8} {'CPU s':>6} {'CPU/tick':>9} {'core':>5}")
    for name, result in rows:
        lags = list(result["lags"])  # type: ignore[call-overload]
        cpu, wall = float(result["cpu"]), float(result["wall"])  # type: ignore[arg-type]
        ticks = int(result["started"])  # type: ignore[call-overload]
        spent = float(result["write_seconds"])  # type: ignore[arg-type]
        rate = int(result["written"]) / spent if spent else float("nan")  # type: ignore[call-overload]
        print(f"{name:<11} {ticks:>7,} {percentile(lags, 0.5):>7.3f}s "
              f"{percentile(lags, 0.99):>7.3f}s {max(lags, default=float('nan')):>7.3f}s "
              f"{rate:>8.0f} {cpu:>6.1f} {cpu / max(ticks, 1) * 1e6:>7.0f}us "
              f"{cpu / wall:>5.0%}")
    for name, result in rows:
        print(f"{name}: made in {float(result['made']):.0f} s; "  # type: ignore[arg-type]
              f"{result['caught_up']} ticks due before the first boundary fired on start, "
              f"not counted; {result['passes']} passes")

if __name__ == "__main__":
    main()
