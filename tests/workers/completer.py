"""The outside world of the worker tests: delivers completions from its own process.

    python completer.py DB_URL LOG OUT --count N [--rate R] [--eager]

Reads the completion keys the ``park`` tool wrote to LOG and resolves each with
``Engine.complete(key, ToolResult.ok(100), resume=False)``: the run is only marked due, a
worker has to pick it up. Without ``--eager`` it waits for N keys, then delivers at R per
second; with ``--eager`` it delivers each key as soon as it shows up (racing the run's
park). LOG lines are ``pid run_id/step tag time key``. One line per key goes to OUT: ``run_id t_before t_after status seen``: the
run's status after the delivery (``duplicate``: the key already had this very answer),
and (``--eager``) before it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from lashflow import Engine, ToolResult
from lashflow.tools import CompletionError

VALUE = 100
IN_FLIGHT = 4  # deliveries at once


class KeyTail:
    """The park calls' keys, read incrementally from the log (whole lines only)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0
        self.seen: set[str] = set()

    def new_keys(self) -> list[tuple[str, str]]:
        """(run_id, key) of the park calls not seen yet, in log order."""
        if not self.log.exists():
            return []
        with open(self.log, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        found = []
        for text in complete.decode().splitlines():
            parts = text.split(" ")
            if parts[2] == "park" and parts[4] not in self.seen:  # a re-run parks on the same key
                self.seen.add(parts[4])
                found.append((parts[1].split("/", 1)[0], parts[4]))
        return found


async def deliver(engine: Engine, run_id: str, key: str, out: list[str], *, look: bool) -> None:
    """One delivery; with ``look``, first read the run's status (``running``: the key is
    delivered while the run is on its way to parking)."""
    seen = (await engine.get_record(run_id)).status if look else "-"
    before = time.time()
    try:
        delivery = await engine.deliver(key, ToolResult.ok(VALUE), resume=False)
        status = "duplicate" if delivery.duplicate else delivery.status.value
    except CompletionError as exc:
        status = exc.code
    out.append(f"{run_id} {before:.6f} {time.time():.6f} {status} {seen}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("log", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--eager", action="store_true")
    args = parser.parse_args()
    tail = KeyTail(args.log)
    pending: list[tuple[str, str]] = []
    lines: list[str] = []
    gate = asyncio.Semaphore(IN_FLIGHT)
    tasks: list[asyncio.Task[None]] = []

    async def one(run_id: str, key: str) -> None:
        async with gate:
            await deliver(engine, run_id, key, lines, look=args.eager)

    async with Engine(db=args.db) as engine:
        if not args.eager:
            while len(pending) < args.count:
                pending += tail.new_keys()
                await asyncio.sleep(0.05)
            start = time.monotonic()
            for index, (run_id, key) in enumerate(pending):
                await asyncio.sleep(max(0.0, start + index / args.rate - time.monotonic()))
                tasks.append(asyncio.create_task(one(run_id, key)))
        else:
            while len(tasks) < args.count:
                for run_id, key in tail.new_keys():
                    tasks.append(asyncio.create_task(one(run_id, key)))
                await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)
    args.out.write_text("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    asyncio.run(main())
