"""`lashflow list` at scale: pages of 50 runs out of 1,000,000, on SQLite and PostgreSQL.

The runs are written straight into the runs table (a day of runs, 5 processes, every
status), then the read API is timed as `lashflow list` uses it: the first page, a page
deep down (following cursors is the same query with another key), filtered by status,
by process, by status and process, and several statuses at once. Each figure is the
best of 5 (the machine is shared). Goal: every page well under 100 ms.

    python bench/bench_list.py [--runs 1000000] [--backends sqlite,postgres]

PostgreSQL: $LASHFLOW_TEST_POSTGRES_URL or postgresql://postgres@127.0.0.1:5432/test; a
fresh schema is made and dropped. Only loopback and a temporary folder are touched.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lashflow import Engine
from lashflow.store.rows import RUN_COLUMNS

STATUSES = ["finished"] * 6 + ["failed", "waiting", "cancelled", "queued"]
PROCESSES = ["fulfill", "refund", "onboard", "report", "sync"]


def rows(count: int) -> list[tuple[Any, ...]]:
    start = time.time() - 86_400
    out = []
    for i in range(count):
        created = start + i * 86_400 / count
        out.append((f"run_{i:08d}", None, PROCESSES[i % 5], "sha256:x", "{}", "h",
                    STATUSES[i % len(STATUSES)], "null", "null", "[]", created, created,
                    None, 0.0, 0, 0, None, "{}"))
    return out


async def timed(label: str, read: Callable[[], Awaitable[Any]]) -> tuple[str, float]:
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        page = await read()
        best = min(best, time.perf_counter() - began)
    assert page.runs, label
    return label, best * 1000


async def measure(engine: Engine) -> list[tuple[str, float]]:
    first = await engine.runs(limit=50)
    deep = first
    for _ in range(20):  # a cursor 1,000 runs down
        deep = await engine.runs(limit=50, cursor=deep.next_cursor)
    return [
        await timed("first page", lambda: engine.runs(limit=50)),
        await timed("page 21 (by cursor)", lambda: engine.runs(limit=50, cursor=deep.next_cursor)),
        await timed("--status failed", lambda: engine.runs(status="failed", limit=50)),
        await timed("--process refund", lambda: engine.runs(process="refund", limit=50)),
        await timed("--status waiting --process onboard",
                    lambda: engine.runs(status="waiting", process="onboard", limit=50)),
        await timed("--status failed,cancelled,waiting",
                    lambda: engine.runs(status=["failed", "cancelled", "waiting"], limit=50)),
    ]


async def sqlite_rows(count: int, folder: Path) -> list[tuple[str, float]]:
    db = folder / "list.db"
    async with Engine(db=f"sqlite:///{db}"):
        pass  # the schema
    conn = sqlite3.connect(db)
    conn.executemany(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 18)})",
                     rows(count))
    conn.commit()
    conn.close()
    async with Engine(db=f"sqlite:///{db}") as engine:
        return await measure(engine)


async def postgres_rows(count: int, base: str) -> list[tuple[str, float]]:
    import asyncpg

    schema = f"lashflow_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(base, timeout=10)
    parts = urlsplit(base)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "search_path"]
    url = urlunsplit(parts._replace(query=urlencode(query + [("search_path", schema)])))
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        async with Engine(db=url):
            pass
        await admin.copy_records_to_table("lashflow_runs", schema_name=schema,
                                          columns=[c.strip() for c in RUN_COLUMNS.split(",")],
                                          records=[(*r[:15], bool(r[15]), *r[16:])
                                                   for r in rows(count)])
        await admin.execute(f"ANALYZE {schema}.lashflow_runs")
        async with Engine(db=url) as engine:
            return await measure(engine)
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    base = os.environ.get("LASHFLOW_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
    results: dict[str, list[tuple[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            began = time.perf_counter()
            results[backend] = (await sqlite_rows(args.runs, Path(tmp)) if backend == "sqlite"
                                else await postgres_rows(args.runs, base))
            print(f"[{backend}: {args.runs:,} runs written and read in "
                  f"{time.perf_counter() - began:.0f} s]")
    backends = list(results)
    print(f"pages of 50 runs out of {args.runs:,} (ms, best of 5)")
    print(f"{'query':<36}" + "".join(f"{b:>12}" for b in backends))
    for i, (label, _) in enumerate(results[backends[0]]):
        print(f"{label:<36}" + "".join(f"{results[b][i][1]:>12.2f}" for b in backends))


if __name__ == "__main__":
    asyncio.run(main())
