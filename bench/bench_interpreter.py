"""Interpreter speed on a pure loop against CPython.

Runs the same loop of 1,000,000 iterations doing arithmetic and record updates in
Lashlang and in plain CPython, and prints iterations per second and the ratio.
Usage: python bench/bench_interpreter.py [--iterations N] [--repeat K]
"""

from __future__ import annotations

import argparse
import time

from lashflow.lang import link, parse
from lashflow.lang.catalog import Catalog
from lashflow.interp.compiler import compile_module
from lashflow.interp.vm import Interpreter

WHILE_LOOP = """
r = { count: 0, total: 0, last: 0 }
i = 0
while i < {n} {
  r.count = r.count + 1
  r.total = r.total + i * 2 % 7
  r.last = i
  i = i + 1
}
finish r
"""

FOR_LOOP = """
r = { count: 0, total: 0, last: 0 }
for i in range({n}) {
  r.count = r.count + 1
  r.total = r.total + i * 2 % 7
  r.last = i
}
finish r
"""


def python_while(n: int) -> dict:
    r = {"count": 0, "total": 0, "last": 0}
    i = 0
    while i < n:
        r["count"] = r["count"] + 1
        r["total"] = r["total"] + i * 2 % 7
        r["last"] = i
        i = i + 1
    return r


def python_for(n: int) -> dict:
    r = {"count": 0, "total": 0, "last": 0}
    for i in range(n):
        r["count"] = r["count"] + 1
        r["total"] = r["total"] + i * 2 % 7
        r["last"] = i
    return r


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def lash_runner(template: str, n: int):
    source = template.replace("{n}", str(n))
    program = compile_module(link(parse(source), Catalog()), None)

    def run() -> object:
        return Interpreter(program).start().value
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.iterations
    rows = []
    for label, template, native in (("while loop", WHILE_LOOP, python_while),
                                    ("for-range loop", FOR_LOOP, python_for)):
        lash_time, lash_value = best_of(args.repeat, lash_runner(template, n))
        py_time, py_value = best_of(args.repeat, lambda: native(n))
        assert lash_value == py_value, (lash_value, py_value)
        rows.append((label, n / lash_time, n / py_time, lash_time / py_time))
    print(f"pure loop, {n:,} iterations (3 record updates + arithmetic each), best of {args.repeat}")
    print(f"{'loop':<16}{'lashflow it/s':>16}{'CPython it/s':>16}{'ratio':>9}")
    for label, lash_rate, py_rate, ratio in rows:
        print(f"{label:<16}{lash_rate:>16,.0f}{py_rate:>16,.0f}{ratio:>8.1f}x")


if __name__ == "__main__":
    main()
