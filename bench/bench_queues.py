"""Queue dispatch: throughput and claim latency with 10,000 distinct keys, fairness error,
against the unqueued run start rate measured in the same run.

For each backend (SQLite in a temporary folder; PostgreSQL at ``--postgres URL`` or
``$LASHFLOW_TEST_POSTGRES_URL``, in a schema made for the run and dropped after):

1. unqueued: ``--runs`` queued runs of a one-line process, drained by one worker
   (``Engine.work``, 64 slots, in this process): runs started per second, from the
   first claim to the last.
2. queued: the same runs in one queue with ``--concurrency-per-key 1``, each with its
   own key (10,000 distinct keys), drained the same way: runs started per second, and
   the p50/p99 of each claim as the worker made them: a queue's turn
   (``Store.take_queued``: the listing and a batch of gated claims in one transaction;
   each run it claims counts the turn's time) or an unqueued run's ``Store.claim_run``;
   "turn p99" is that of the turns alone.
3. fairness: a ``--fair`` queue with keys weighted 1:2:3, a backlog of 300 runs each,
   8 slots: over the first 300 starts (every key still has runs waiting), each key's
   share against its weight's; the error is the largest relative difference.

Goals (issue 31): queued dispatch at least the unqueued start rate; fairness error under
5%. The machine is shared: quote ratios from one run, with its load.

Run: python bench/bench_queues.py [--runs 10000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import percentile, pg_schemas  # noqa: E402

from lashflow import Engine  # noqa: E402

PROCESS = "process job(n: int) {\n  finish n\n}\n"
SLOTS = 64


async def submit(engine: Engine, source: Path, count: int, queue: str | None,
                 key_of: Any = None) -> None:
    """``count`` runs, 200 at a time (their inserts share commits)."""
    for first in range(0, count, 200):
        await asyncio.gather(*(
            engine.create(source, input={"n": n}, queue=queue,
                          key=None if key_of is None else key_of(n))
            for n in range(first, min(count, first + 200))))


async def drain(engine: Engine, count: int) -> dict[str, Any]:
    """Drive every run with one worker here, timing each claim: a queue's turn
    (``Store.take_queued``, which lists and claims a batch in one transaction: each run
    it claims counts that turn's time) and each claim of one run (``Store.claim_run``)."""
    store = engine.store
    claims: list[tuple[float, float, bool]] = []  # (when, seconds, claimed)
    turns: list[float] = []
    claim_run, take_queued = store.claim_run, store.take_queued

    async def timed_claim(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        found = await claim_run(*args, **kwargs)
        claims.append((began, time.perf_counter() - began, found is not None))
        return found

    async def timed_take(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        found = await take_queued(*args, **kwargs)
        took = time.perf_counter() - began
        turns.append(took)
        claims.extend((began, took, True) for _ in found.claimed)
        return found
    store.claim_run = timed_claim  # type: ignore[method-assign]
    store.take_queued = timed_take  # type: ignore[method-assign]
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.2)
            stats = await store.stats(time.time())
            if stats.runs_by_status.get("finished", 0) >= count:
                stop.set()
    watcher = asyncio.ensure_future(watch())
    await engine.work(SLOTS, stop=stop, poll=0.1, schedules=False)
    watcher.cancel()
    store.claim_run, store.take_queued = claim_run, take_queued  # type: ignore[method-assign]
    won = sorted(when for when, _, ok in claims if ok)
    span = (won[-1] - won[0]) if len(won) > 1 else float("nan")
    return {"started": len(won), "rate": (len(won) - 1) / span if span == span and span else 0.0,
            "claim_p50": percentile([s for _, s, _ in claims], 0.5),
            "claim_p99": percentile([s for _, s, _ in claims], 0.99),
            "refused": sum(1 for _, _, ok in claims if not ok),
            "list_p50": percentile(turns, 0.5), "list_p99": percentile(turns, 0.99)}


async def fairness(db: str, source: Path) -> tuple[float, dict[str, float]]:
    weights = {"w1": 1.0, "w2": 2.0, "w3": 3.0}
    started: list[str] = []
    async with Engine(db=db) as engine:
        await engine.queues.create("fair", concurrency=8, fair=True, weights=weights)
        await submit(engine, source, 900, "fair", lambda n: f"w{n % 3 + 1}")
        take_queued = engine.store.take_queued

        async def noted(*args: Any, **kwargs: Any) -> Any:
            found = await take_queued(*args, **kwargs)
            started.extend(claimed.run.meta["queue"]["key"] for claimed in found.claimed)
            return found
        engine.store.take_queued = noted  # type: ignore[method-assign]
        stop = asyncio.Event()

        async def watch() -> None:
            while len(started) < 300:
                await asyncio.sleep(0.05)
            stop.set()
        watcher = asyncio.ensure_future(watch())
        await engine.work(SLOTS, stop=stop, poll=0.1, schedules=False)
        watcher.cancel()
    counts = Counter(started[:300])
    total = sum(weights.values())
    shares = {key: counts[key] / 300 for key in weights}
    error = max(abs(shares[key] - w / total) / (w / total) for key, w in weights.items())
    return error, shares


async def measure(db_for: Any, count: int, source: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    async with Engine(db=db_for("plain")) as engine:
        await submit(engine, source, count, None)
        result["plain"] = await drain(engine, count)
    async with Engine(db=db_for("queued")) as engine:
        await engine.queues.create("bench", concurrency_per_key=1)
        await submit(engine, source, count, "bench", lambda n: f"key-{n:05d}")
        result["queued"] = await drain(engine, count)
    result["fair_error"], result["fair_shares"] = await fairness(db_for("fair"), source)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--postgres", default=os.environ.get("LASHFLOW_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder, \
            pg_schemas(args.postgres or "", "bench_queue") as schemas:
        source = Path(folder) / "job.lash"
        source.write_text(PROCESS)
        backends: list[tuple[str, Any]] = [
            ("SQLite", lambda part: f"sqlite:///{folder}/{part}.db")]
        if args.postgres:  # the schemas are made before the bench's event loop runs
            urls = {part: schemas.make() for part in ("plain", "queued", "fair")}
            backends.append(("PostgreSQL", urls.__getitem__))
        for name, db_for in backends:
            print(f"{name}: {args.runs:,} runs...", file=sys.stderr)
            rows.append((name, asyncio.run(measure(db_for, args.runs, source))))
    load = os.getloadavg()[0]
    print(f"{args.runs:,} runs, one worker with {SLOTS} slots; queued: one key per run, "
          f"1 per key (load {load:.1f})")
    print(f"{'backend':<11} {'unqueued/s':>10} {'queued/s':>9} {'ratio':>6} "
          f"{'claim p50':>9} {'claim p99':>9} {'turn p99':>9} {'fair err':>8}")
    for name, result in rows:
        plain, queued = result["plain"], result["queued"]
        ratio = queued["rate"] / plain["rate"] if plain["rate"] else float("nan")
        print(f"{name:<11} {plain['rate']:>10.0f} {queued['rate']:>9.0f} {ratio:>5.2f}x "
              f"{queued['claim_p50'] * 1e3:>7.1f}ms {queued['claim_p99'] * 1e3:>7.1f}ms "
              f"{queued['list_p99'] * 1e3:>7.1f}ms {result['fair_error']:>7.1%}")
    for name, result in rows:
        shares = ", ".join(f"{k} {v:.3f}" for k, v in sorted(result["fair_shares"].items()))
        print(f"{name}: unqueued claim p99 {result['plain']['claim_p99'] * 1e3:.1f} ms; "
              f"queued claims refused {result['queued']['refused']}; "
              f"fair shares {shares} (weights 1:2:3)")


if __name__ == "__main__":
    main()
