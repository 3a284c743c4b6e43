"""How soon the default limits of a run bite, in seconds and in peak memory.

Each hostile program runs at the default ``Limits`` in a fresh child process (so its
peak resident memory is its own), on a SQLite file in a temporary folder:

- ``effects_100k``: a loop of prints past ``max_effects`` (100,000);
- ``nested_range``: a comprehension of million-item ranges (each under the value limit,
  together past ``max_live_bytes``, 256 MiB);
- ``nested_comprehension``: the same with an inner comprehension.

Goal: each ends with ``limit_exceeded`` within seconds on a quiet core and within its
memory budget (``max_live_bytes`` plus the interpreter's own ~40 MiB).

    python bench/bench_limits.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

PROGRAMS = {
    "effects_100k": "for i in range(200000) { print(i) }",
    "nested_range": "x = [range(1000000) for i in range(1000)]\nfinish len(x)",
    "nested_comprehension": "x = [[j for j in range(1000000)] for i in range(1000)]\n"
                            "finish len(x)",
}

CHILD = """
import asyncio, json, resource, sys, time
from lashflow import Engine

async def main(db, source):
    async with Engine(db=db) as engine:
        began = time.perf_counter()
        outcome = await engine.run(source)
        took = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": took, "peak_mib": peak, "status": outcome.status.value,
                      "error": outcome.error.message if outcome.error else None}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def main() -> None:
    print(f"{'program':<22} {'seconds':>8} {'peak MiB':>9}  ended with")
    with tempfile.TemporaryDirectory(prefix="lashflow-bench-limits-") as folder:
        for name, source in PROGRAMS.items():
            db = f"sqlite:///{os.path.join(folder, name + '.db')}"
            done = subprocess.run([sys.executable, "-c", CHILD, db, source], check=True,
                                  capture_output=True, text=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{name:<22} {row['seconds']:>8.1f} {row['peak_mib']:>9.0f}  "
                  f"{(row['error'] or row['status'])[:60]}")


if __name__ == "__main__":
    main()
