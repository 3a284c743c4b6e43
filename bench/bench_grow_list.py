"""Building a list item by item in a loop: ``log = push(log, n)`` and ``log = log + [n]``.

Both must cost about what the items cost (linear), not a copy of the list each time round
(quadratic: 200,000 items once took over 30 s). Prints seconds per program and size, best
of 3, on the in-memory test host; with ``--original RUNNER`` (the runner that
``scripts/oracle/oracle.py build`` makes) the original's times beside them.

    python bench/bench_grow_list.py [--sizes 50000,100000,200000] [--original PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import time

from lashflow.interp.compiler import compile_module
from lashflow.lang import link, parse
from lashflow.lang.catalog import Catalog
from lashflow.testing.memory_host import MemoryHost

PROGRAMS = {
    "push(log, n)": "n = 0\nlog = []\nwhile n < {size} {{ n = n + 1  log = push(log, n) }}\nfinish len(log)\n",
    "log + [n]": "n = 0\nlog = []\nwhile n < {size} {{ n = n + 1  log = log + [n] }}\nfinish len(log)\n",
}


def lashflow_seconds(source: str) -> float:
    catalog = Catalog.permissive({"tools": ["noop"]})
    program = compile_module(link(parse(source), catalog), catalog)
    began = time.perf_counter()
    result = asyncio.run(MemoryHost(program).run())
    assert result.status == "finished", result
    return time.perf_counter() - began


def original_seconds(runner: str, source: str) -> float:
    began = time.perf_counter()
    out = subprocess.run([runner, "--serve"], input=json.dumps({"source": source}) + "\n",
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["outcome"] == "finished", out
    return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50000,100000,200000")
    ap.add_argument("--original", help="the original's runner, for comparison")
    args = ap.parse_args()
    header = f"{'program':<14} {'items':>8} {'lashflow s':>11}"
    if args.original:
        header += f" {'original s':>11}"
    print(header)
    print("-" * len(header))
    for label, template in PROGRAMS.items():
        for size in (int(s) for s in args.sizes.split(",")):
            source = template.format(size=size)
            row = f"{label:<14} {size:>8,} {min(lashflow_seconds(source) for _ in range(3)):>11.2f}"
            if args.original:
                row += f" {min(original_seconds(args.original, source) for _ in range(3)):>11.2f}"
            print(row)


if __name__ == "__main__":
    main()
