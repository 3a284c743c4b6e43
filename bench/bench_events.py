"""Live events (ADR 0033): how soon a subscriber of ``GET /v1/runs/{id}/events`` hears of
a journal write, with one subscriber and with 1,000 on one run, printed as one table.

A real ``lashflow serve`` (``--no-worker``) runs in a subprocess on loopback; this
process writes the run's journal directly through the store (one step per commit,
spaced so each is measured alone, not as a queue) and holds the subscribers, each an
SSE stream over HTTP. Latency: from the write's commit returning here to the event's
frame being read by a subscriber (one clock: both ends are this process). With 1,000
subscribers, "to all" is the time until the last of them has the event. The subscribers'
own parsing shares this process's CPU with the writer, so the 1,000-subscriber figures
include the client's cost too.

Usage:
    python bench/bench_events.py            # SQLite (and PostgreSQL if
                                            # LASHFLOW_TEST_POSTGRES_URL is set)
    python bench/bench_events.py --quick    # fewer events
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the tests' `lashflow serve` runner

from serve_support import TOKEN, Server  # noqa: E402

from lashflow.store import Commit, RunRecord, StepRecord, open_store  # noqa: E402
GOAL_P99_MS = 20.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def subscriber(url: str, run_id: str, seen: dict[int, list[float]],
                     ready: asyncio.Event, want: int) -> None:
    """One SSE stream read off a plain socket (an HTTP client library would cost this
    process more than the server spends): lines that start with ``id:``."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: {host}\r\n"
                 f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
                 .encode())
    await writer.drain()
    ready.set()
    try:
        while True:
            line = await reader.readline()
            if not line:
                raise SystemExit("a stream ended early")
            if line.startswith(b"id: "):
                seq = int(line[4:])
                seen.setdefault(seq, []).append(time.time())
                if seq >= want:
                    return
    finally:
        writer.close()


async def measure(db: str, folder: Path, subscribers: int, events: int,
                  gap: float) -> dict[str, float]:
    (folder / "processes").mkdir(exist_ok=True)
    serve = Server(folder, db, "--no-worker", "--max-connections", "1200")
    serve.start()
    store = open_store(db)
    await store.open()
    run_id = f"bench-{subscribers}-{time.time_ns()}"
    try:
        await store.create_run(RunRecord(run_id, "src", "bench", {}, "in", created_at=time.time(),
                                         updated_at=time.time()))
        seen: dict[int, list[float]] = {}
        readies = [asyncio.Event() for _ in range(subscribers)]
        tasks = [asyncio.create_task(subscriber(serve.url, run_id, seen, ready, events + 1))
                 for ready in readies]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 120)
        while len(seen.get(1, [])) < subscribers:  # every stream has caught up
            await asyncio.sleep(0.01)
        committed: dict[int, float] = {}
        for i in range(events):
            now = time.time()
            await store.commit(Commit(run_id, None, steps=[StepRecord(
                run_id, f"s{i}:1", "tool", "tools.t", status="done",
                outcome={"status": "ok", "value": i}, seq=i + 1, created_at=now,
                updated_at=now)]))
            committed[i + 2] = time.time()
            await asyncio.sleep(gap)
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
    finally:
        await store.close()
        serve.stop()
    first = [(min(seen[seq]) - at) * 1000 for seq, at in committed.items()]
    every = [(t - at) * 1000 for seq, at in committed.items() for t in seen[seq]]
    last = [(max(seen[seq]) - at) * 1000 for seq, at in committed.items()]
    return {"p50": pct(every, 0.5), "p99": pct(every, 0.99), "first_p50": pct(first, 0.5),
            "all_p50": pct(last, 0.5), "all_p99": pct(last, 0.99), "n": len(every)}


PG_SCHEMA = "lashflow_bench_events"


async def pg_schema(url: str, *, create: bool) -> str:
    """Make (or drop) the bench's own schema; the URL that uses it."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")
        if create:
            await conn.execute(f"CREATE SCHEMA {PG_SCHEMA}")
    finally:
        await conn.close()
    return url + ("&" if "?" in url else "?") + f"search_path={PG_SCHEMA}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer events")
    args = parser.parse_args()
    events = 100 if args.quick else 400
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        backends = [("SQLite", f"sqlite:///{folder / 'events.db'}")]
        pg = os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
        if pg:  # a schema of its own, dropped at the end: nothing shared is touched
            backends.append(("PostgreSQL", asyncio.run(pg_schema(pg, create=True))))
        for name, db in backends:
            one = asyncio.run(measure(db, folder, 1, events, 0.02))
            verdict = "pass" if one["p99"] < GOAL_P99_MS else "FAIL"
            rows.append((f"{name}: 1 subscriber, write -> event (ms)",
                         f"{one['p50']:.1f} / {one['p99']:.1f}", f"p99 < {GOAL_P99_MS:.0f}",
                         verdict))
            many = asyncio.run(measure(db, folder, 1000, events // 4, 0.25))
            rows.append((f"{name}: 1,000 subscribers, each (ms)",
                         f"{many['p50']:.1f} / {many['p99']:.1f}", "", ""))
            rows.append((f"{name}: 1,000 subscribers, the last of them (ms)",
                         f"{many['all_p50']:.1f} / {many['all_p99']:.1f}", "", ""))
        if pg:
            asyncio.run(pg_schema(pg, create=False))
    load = os.getloadavg()[0]
    width = max(len(r[0]) for r in rows)
    print(f"{'metric':<{width}}  {'p50 / p99':>13}  {'goal':<9}  result")
    print(f"{'-' * width}  {'-' * 13}  {'-' * 9}  ------")
    for metric, value, goal, verdict in rows:
        print(f"{metric:<{width}}  {value:>13}  {goal:<9}  {verdict}")
    print(f"(load average at the end: {load:.1f}; {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
