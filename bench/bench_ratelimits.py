"""Tools' rate limits (ADR 0036): the rate worker processes achieve against the one
configured, and what one take from the store's bucket costs.

For each backend (SQLite in a temporary folder; PostgreSQL at ``--postgres URL`` or
``$LASHFLOW_TEST_POSTGRES_URL``, in a schema made for the run and dropped after):

1. achieved rate: ``--runs`` runs each make ``--calls`` calls, one after another, of a
   tool with ``rate=--rate``, driven by ``--workers`` worker processes (``lashflow
   worker``, 32 slots each). The tool logs its start and its slot. Measured from the
   first to the last call: calls per second by the slots the store gave and by the
   tools' own start times (the goal: within 5% of the limit), the most calls in any
   one-second window (slots: at most the limit, always; starts: may be one more when a
   call starts late and the next on time), and how late after its slot a call started
   (p50/p99).
2. takes: ``--takes`` takes of one slot in a row from one process (the worker's path:
   ``Store.take_rate``), then takes of 50 at once (a fan-out's): wall time per take
   p50/p99, and this process's CPU per take (on PostgreSQL the server's is not counted).

The machine is shared: quote figures from one run, with its load.

Run: python bench/bench_ratelimits.py [--rate 40/s] [--runs 40] [--calls 10]
     [--workers 3] [--takes 2000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
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
from lashflow.rates import parse_rate  # noqa: E402
from lashflow.store import open_store  # noqa: E402

TOOLS = '''
import os, time
from lashflow import ToolCall, tool

@tool(rate=os.environ["BENCH_RATE"])
async def hit(call: ToolCall) -> int:
    line = f"{time.time():.6f} {call.context.rate_slot:.6f}\\n"
    fd = os.open(os.environ["BENCH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return int(call.input["i"]) + 1
'''
PROCESS = """process go(calls: int) {
  i = 0
  while i < calls { i = await tools.hit({ i: i })? }
  finish i
}
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def most_in_a_second(times: list[float]) -> int:
    ordered = sorted(times)
    return max(bisect.bisect_left(ordered, at + 1.0 - 1e-5) - index
               for index, at in enumerate(ordered))


def per_second(times: list[float]) -> float:
    return (len(times) - 1) / (max(times) - min(times))


async def achieved(url: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    log = folder / f"calls-{uuid.uuid4().hex[:6]}.log"
    tools, source = folder / "bench_rate_tools.py", folder / "go.lash"
    tools.write_text(TOOLS)
    source.write_text(PROCESS)
    env = dict(os.environ, BENCH_RATE=args.rate, BENCH_LOG=str(log),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    os.environ.update(BENCH_RATE=args.rate, BENCH_LOG=str(log))
    async with Engine(db=url, modules=[str(tools)]) as engine:
        for first in range(0, args.runs, 100):
            await asyncio.gather(*(engine.create(source, input={"calls": args.calls})
                                   for _ in range(first, min(args.runs, first + 100))))
    workers = [subprocess.Popen([sys.executable, "-m", "lashflow", "worker", "--db", url,
                                 "--tools", str(tools), "--concurrency", "32", "--poll", "1"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(args.workers)]
    total = args.runs * args.calls
    try:
        async with open_store(url) as store:
            while True:
                runs = await store.list_runs()
                if sum(run.status == "finished" for run in runs) == args.runs:
                    break
                if any(worker.poll() is not None for worker in workers):
                    raise SystemExit("a worker exited early")
                await asyncio.sleep(0.5)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
    lines = [tuple(map(float, text.split())) for text in log.read_text().splitlines()]
    starts, slots = [s for s, _ in lines], [slot for _, slot in lines]
    late = [s - slot for s, slot in lines]
    assert len(lines) == total, (len(lines), total)
    return {"by_slots": per_second(slots), "by_starts": per_second(starts),
            "most_slots": most_in_a_second(slots), "most_starts": most_in_a_second(starts),
            "late_p50": percentile(late, 0.5), "late_p99": percentile(late, 0.99)}


async def takes(url: str, count: int) -> dict[str, Any]:
    async with open_store(url) as store:
        await store.take_rate("tool:bench.warm", (1e6, 1.0), 1, time.time())
        result: dict[str, Any] = {}
        for size, rounds in ((1, count), (50, max(1, count // 10))):
            walls: list[float] = []
            cpu = time.process_time()
            for _ in range(rounds):
                began = time.perf_counter()
                await store.take_rate(f"tool:bench.k{size}", (1e6, 1.0), size, time.time())
                walls.append(time.perf_counter() - began)
            result[size] = (percentile(walls, 0.5), percentile(walls, 0.99),
                            (time.process_time() - cpu) / rounds)
        return result


async def pg_schema(url: str, drop: str | None = None) -> str:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        if drop:
            await conn.execute(f"DROP SCHEMA IF EXISTS {drop} CASCADE")
            return drop
        schema = f"bench_rate_{uuid.uuid4().hex[:12]}"
        await conn.execute(f"CREATE SCHEMA {schema}")
        return schema
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="40/s")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--takes", type=int, default=2000)
    parser.add_argument("--postgres", default=os.environ.get("LASHFLOW_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    rate = parse_rate(args.rate)
    assert rate is not None
    limit = rate[0] / rate[1]
    rows = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        backends = [("SQLite", lambda part: f"sqlite:///{folder}/{part}.db")]
        schemas: list[str] = []
        if args.postgres:
            sep = "&" if "?" in args.postgres else "?"

            def pg_for(part: str) -> str:
                schemas.append(asyncio.run(pg_schema(args.postgres)))
                return f"{args.postgres}{sep}search_path={schemas[-1]}"
            backends.append(("PostgreSQL", pg_for))
        try:
            for backend, url_for in backends:
                print(f"{backend}: {args.runs * args.calls} calls at {args.rate}...",
                      file=sys.stderr)
                rows.append((backend, asyncio.run(achieved(url_for("rate"), folder, args)),
                             asyncio.run(takes(url_for("takes"), args.takes))))
        finally:
            for schema in schemas:
                asyncio.run(pg_schema(args.postgres, drop=schema))
    load = os.getloadavg()
    print(f"{args.runs * args.calls} calls of a tool with rate {args.rate} ({limit:g}/s), "
          f"{args.runs} runs, {args.workers} workers (load {load[0]:.1f} {load[1]:.1f})")
    print(f"{'backend':<11} {'slots/s':>8} {'starts/s':>8} {'vs limit':>8} {'max/1s':>11} "
          f"{'late p50':>9} {'late p99':>9}")
    for backend, got, _ in rows:
        print(f"{backend:<11} {got['by_slots']:>8.2f} {got['by_starts']:>8.2f} "
              f"{got['by_starts'] / limit - 1:>+8.1%} "
              f"{got['most_slots']:>5}/{got['most_starts']:<5} "
              f"{got['late_p50'] * 1000:>7.1f}ms {got['late_p99'] * 1000:>7.1f}ms")
    print("(max/1s: the most slots / starts in any one-second window; late: a call's "
          "start after its slot)")
    print(f"\ntakes from one process ({args.takes} of 1 slot, {max(1, args.takes // 10)} of "
          f"50 slots)")
    print(f"{'backend':<11} {'k':>3} {'p50':>9} {'p99':>9} {'CPU/take':>9}")
    for backend, _, cost in rows:
        for size, (p50, p99, cpu) in cost.items():
            print(f"{backend:<11} {size:>3} {p50 * 1e3:>7.2f}ms {p99 * 1e3:>7.2f}ms "
                  f"{cpu * 1e6:>7.0f}us")


if __name__ == "__main__":
    main()
