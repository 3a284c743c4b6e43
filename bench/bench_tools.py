"""Tool-layer benchmarks.

1. Dispatch overhead per call in a batch of 100 no-op tools: the batch's wall time
   minus what the bare coroutines cost when gathered directly, divided by 100.
2. Budget projection of a 10 MB output (many lines, one huge line, and a structured
   value with one huge string leaf), head and tail.

Run: python bench/bench_tools.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from lashflow.tools import (
    DispatchCall, Dispatcher, MemoryJournal, NullJournal, ToolCall, ToolRegistry, ToolResult, project_output, tool,
)


@tool
async def noop(call: ToolCall) -> ToolResult:
    return ToolResult.ok(None)


@tool
async def typed_noop(n: int) -> int:
    return n


async def _bare() -> None:
    return None


def _best(samples: list[float]) -> tuple[float, float]:
    return min(samples), statistics.median(samples)


async def bench_dispatch(rounds: int) -> list[tuple[str, float, float]]:
    dispatcher = Dispatcher(ToolRegistry([noop, typed_noop]))
    raw_calls = [DispatchCall("tools", "noop", {}, f"s:{i}") for i in range(100)]
    typed_calls = [DispatchCall("tools", "typed_noop", {"n": i}, f"s:{i}") for i in range(100)]
    rows = []

    bare: list[float] = []
    for _ in range(rounds):
        began = time.perf_counter()
        await asyncio.gather(*(asyncio.ensure_future(_bare()) for _ in range(100)))
        bare.append(time.perf_counter() - began)
    base = min(bare)

    cases: list[tuple[str, list[DispatchCall], dict[str, Any]]] = [
        ("raw no-op, null journal", raw_calls, {"journal": NullJournal()}),
        ("raw no-op, memory journal", raw_calls, {"journal": MemoryJournal()}),
        ("typed no-op (pydantic), null journal", typed_calls, {"journal": NullJournal()}),
        ("raw no-op, with cancel event", raw_calls, {"journal": NullJournal(), "cancel": asyncio.Event()}),
    ]
    for label, calls, options in cases:
        samples = []
        for _ in range(rounds):
            began = time.perf_counter()
            await dispatcher.batch(calls, **options)
            samples.append(time.perf_counter() - began)
        best, median = _best(samples)
        rows.append((label, (best - base) / 100 * 1e6, (median - base) / 100 * 1e6))
    rows.insert(0, ("bare coroutines gathered (baseline)", base / 100 * 1e6, statistics.median(bare) / 100 * 1e6))
    return rows


def bench_projection(rounds: int) -> list[tuple[str, float, float]]:
    many_lines = "".join(f"log line {i:08d} with some text é\n" for i in range(300_000))[: 10 * 1024 * 1024]
    one_line = "x" * (10 * 1024 * 1024)
    structured = {"stdout": one_line, "code": 0, "files": ["a", "b"]}
    cases = [
        ("10 MB, many lines, head", lambda: project_output(many_lines)),
        ("10 MB, many lines, tail", lambda: project_output(many_lines, tail=True)),
        ("10 MB, one line, head", lambda: project_output(one_line)),
        ("10 MB, structured leaf, head", lambda: project_output(structured)),
    ]
    rows = []
    for label, fn in cases:
        samples = []
        for _ in range(rounds):
            began = time.perf_counter()
            out = fn()
            samples.append(time.perf_counter() - began)
        assert len(out) < 20_000
        best, median = _best(samples)
        rows.append((label, best * 1e3, median * 1e3))
    return rows


def _table(title: str, unit: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}")
    print(f"{'case':<42} {'best ' + unit:>12} {'median ' + unit:>14}")
    print("-" * 70)
    for label, best, median in rows:
        print(f"{label:<42} {best:>12.2f} {median:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    _table("Dispatch overhead per call, batch of 100 no-op tools", "us", asyncio.run(bench_dispatch(args.rounds)))
    _table("Budget projection of a 10 MB output", "ms", bench_projection(max(3, args.rounds // 5)))


if __name__ == "__main__":
    main()
