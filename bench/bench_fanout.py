"""Fan-out batches: `await [tools.nap({}) for i in range(N)]` with each call an
`asyncio.sleep(0.2)`, for N = 10, 100, 1,000, printed as one table.

Measured per width, in a fresh subprocess on a fresh SQLite file (WAL, synchronous=FULL):
- wall: `Engine.run` from call to return (compile, every call, every commit, finish);
- start spread: from the first call's start to the last one's (the batch's own cost of
  starting N calls, one after another on one event loop);
- lateness: each call's end past its own start + 0.2 s (p99 and max), the goal's
  measure: how late the loop gets back to a call whose sleep is over (stalls, other
  members' work in the way);
- end past batch start: each call's end past the *first* call's start + 0.2 s (max),
  stricter: it adds the start spread;
- CPU: the process's CPU time over the run (both threads), divided by N: what each call
  costs in all, which a loaded machine stretches in wall time but not here.
"cold" is the process's first run (first compile, first use of everything); "warm" is a
second run in the same process; "frozen" a third, after `gc.freeze()` (what `lashflow
worker` and `lashflow serve` do once started: a full garbage collection then no longer
walks everything start-up made); "asyncio" is the floor: the same N sleeps gathered by
plain asyncio in that process, nothing journaled. Goal: a 1,000-wide batch within 0.2 s + 10% (0.22 s),
worst lateness under 20 ms.

Columns (80 wide): spread = start spread, late p99 / late max = lateness, behind = end
past batch start (all in ms), CPU us/call.

Usage: python bench/bench_fanout.py [--widths 10,100,1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import writer_cpu
from lashflow import Engine, ToolCall, ToolResult, tool

SLEEP = 0.2


SPANS: list[tuple[float, float]] = []  # (start, end) of each call of the current run


@tool
async def nap(call: ToolCall) -> ToolResult:
    began = time.perf_counter()
    await asyncio.sleep(SLEEP)
    SPANS.append((began, time.perf_counter()))
    return ToolResult.ok(call.input["i"])


async def _worker(width: int) -> dict[str, dict[str, float]]:
    spans = SPANS
    source = f"finish await [tools.nap({{ i: i }})? for i in range({width})]"
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with Engine(db=f"sqlite:///{Path(tmp) / 'fan.db'}", tools=[nap]) as engine:
            for label in ("cold", "warm", "frozen"):
                if label == "frozen":  # what `lashflow worker` and `serve` do once up
                    gc.collect()
                    gc.freeze()
                spans.clear()
                began, cpu = time.perf_counter(), time.process_time()
                cpu += writer_cpu(engine.store)  # its writer process's work is the run's
                outcome = await engine.run(source)
                wall = time.perf_counter() - began
                cpu = time.process_time() + writer_cpu(engine.store) - cpu
                assert outcome.result == list(range(width)), outcome.error
                first = min(start for start, _ in spans)
                late = sorted((end - start - SLEEP) * 1000 for start, end in spans)
                spread = (max(start for start, _ in spans) - first) * 1000
                behind = max(end - first - SLEEP for _, end in spans) * 1000
                figures[label] = {"wall": wall, "max": late[-1], "spread": spread,
                                  "p99": late[min(len(late) - 1, int(len(late) * 0.99))],
                                  "behind": behind, "cpu_us": cpu / width * 1e6}
    # the floor: the same sleeps gathered by asyncio alone, in the same warm process
    spans.clear()
    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(_bare_nap() for _ in range(width)))
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    first = min(start for start, _ in spans)
    late = sorted((end - start - SLEEP) * 1000 for start, end in spans)
    figures["asyncio"] = {"wall": wall, "max": late[-1],
                          "spread": (max(start for start, _ in spans) - first) * 1000,
                          "p99": late[min(len(late) - 1, int(len(late) * 0.99))],
                          "behind": max(end - first - SLEEP for _, end in spans) * 1000,
                          "cpu_us": cpu / width * 1e6}
    return figures


async def _bare_nap() -> None:
    began = time.perf_counter()
    await asyncio.sleep(SLEEP)
    SPANS.append((began, time.perf_counter()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="10,100,1000")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_worker(args.worker))))
        return
    print(f"fan-out of N calls of asyncio.sleep({SLEEP}), SQLite WAL synchronous=FULL; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'N':>5} {'run':<7} {'wall s':>7} {'spread ms':>9} {'late p99':>8} {'late max':>8} "
          f"{'behind ms':>9} {'CPU us/call':>11}")
    for width in (int(w) for w in args.widths.split(",")):
        done = subprocess.run([sys.executable, __file__, "--worker", str(width)],
                              capture_output=True, text=True, check=True)
        for label, row in json.loads(done.stdout).items():
            print(f"{width:>5} {label:<7} {row['wall']:>7.3f} {row['spread']:>9.1f} "
                  f"{row['p99']:>8.1f} {row['max']:>8.1f} {row['behind']:>9.1f} "
                  f"{row['cpu_us']:>11.1f}")


if __name__ == "__main__":
    main()
