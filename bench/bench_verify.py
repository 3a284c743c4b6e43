"""``verify`` over many parked runs, on SQLite and PostgreSQL, printed as one table.

Each database is filled with N runs parked on a signal after six journaled tool steps
(a call, a batch of two, a fan-out of three): 200 real runs, then copied row for row
under new run ids until there are N. Then a fresh subprocess opens the database
read-only and classifies every run against an edited program (one changed argument
after where the runs stand: every run compatible, so each is replayed to its end):
wall time, the verifying process's CPU time (its share of a loaded machine), runs per
second, the subprocess's peak RSS (memory must stay flat: runs are streamed a page at a
time, each page of runs and their journals read in three statements).

Usage:
    python bench/bench_verify.py                 # 1,000 / 10,000 / 100,000 on both
    python bench/bench_verify.py --sizes 1000    # a quick look
    python bench/bench_verify.py --no-postgres
PostgreSQL: ``$LASHFLOW_BENCH_POSTGRES_URL`` (else ``$LASHFLOW_TEST_POSTGRES_URL``); each
size gets a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from lashflow import Engine, ToolCall, ToolResult, tool

REPO = Path(__file__).resolve().parent.parent
SEED_RUNS = 200
PAGE_TABLES = ("runs", "steps", "attempts", "events")  # copied, each row once per copy
NUMBERED = ("id", "tx")  # columns the database fills in (an event's id and transaction)

SOURCE = """
process order(n: int) {
  a = tools.step({ i: n })?
  b = await [tools.step({ i: n + 1 }), tools.step({ i: n + 2 })]
  c = await [tools.step({ i: k })? for k in range(3)]
  go = wait_signal("go")
  d = tools.step({ i: 99 })?
  finish [a, b, c, d]
}
"""
EDITED = SOURCE.replace("{ i: 99 }", "{ i: 100, rush: true }")  # after where runs stand


@tool
async def step(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"i": call.input["i"]})


async def seed(db: str) -> None:
    async with Engine(db=db, tools=[step]) as engine:
        for n in range(SEED_RUNS):
            outcome = await engine.run(SOURCE, "order", {"n": n})
            assert outcome.status.value == "waiting", outcome


def copy_sqlite(path: str, total: int) -> None:
    """Copy the seeded rows under new run ids until the file holds ``total`` runs."""
    conn = sqlite3.connect(path)
    copies = (total - SEED_RUNS) // SEED_RUNS
    with conn:
        conn.execute("CREATE TEMP TABLE n (i INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(1, copies + 1)])
        for table in PAGE_TABLES:
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")
                       if row[1] not in NUMBERED]
            picked = ", ".join("run_id || '_' || n.i" if c == "run_id" else f"t.{c}"
                               for c in columns)
            conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} "
                         f"FROM {table} t, n")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def copy_postgres(url: str, total: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    copies = (total - SEED_RUNS) // SEED_RUNS
    try:
        async with conn.transaction():
            for table in PAGE_TABLES:
                name = f"lashflow_{table}"
                columns = [r["column_name"] for r in await conn.fetch(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = $1 "
                    "AND table_schema = current_schema() AND is_identity = 'NO' "
                    "ORDER BY ordinal_position", name) if r["column_name"] not in NUMBERED]
                picked = ", ".join("t.run_id || '_' || n.i" if c == "run_id" else f"t.{c}"
                                   for c in columns)
                await conn.execute(f"INSERT INTO {name} ({', '.join(columns)}) SELECT {picked} "
                                   f"FROM {name} t, generate_series(1, {copies}) AS n(i)")
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def measure(params: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process: open read-only, verify every run, count verdicts."""
    counts: dict[str, int] = {}
    start, cpu = time.perf_counter(), time.process_time()
    async with Engine(db=params["db"], tools=[step], create=False, readonly=True) as engine:
        async for verdict in engine.verdicts(EDITED, process="order"):
            counts[verdict.verdict] = counts.get(verdict.verdict, 0) + 1
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "cpu": cpu, "counts": counts, "peak_rss_mb": peak_kb / 1024}


def run_measure(db: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps({"db": db})],
                          capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def postgres_url() -> str | None:
    return os.environ.get("LASHFLOW_BENCH_POSTGRES_URL") or os.environ.get(
        "LASHFLOW_TEST_POSTGRES_URL")


async def postgres_schema(base: str, action: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(base)
    try:
        verb = "CREATE SCHEMA" if action == "create" else "DROP SCHEMA IF EXISTS"
        await conn.execute(f"{verb} {schema}{' CASCADE' if action == 'drop' else ''}")
    finally:
        await conn.close()


def with_search_path(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}search_path={schema}"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def databases(sizes: list[int], base: str | None, seeder: Any,
              what: str) -> Iterator[tuple[str, int, str]]:
    """(database, size, url) of a database filled with ``size`` runs: ``seeder(url)``'s
    ``SEED_RUNS`` copied until there are that many; SQLite, then PostgreSQL (a schema of
    its own) unless ``base`` is None. Each is removed once the caller moves on."""
    folder = tempfile.mkdtemp(prefix="lashflow-bench-")
    try:
        for size in sizes:
            path = os.path.join(folder, f"runs-{size}.db")
            log(f"SQLite: {size:,} {what} runs")
            asyncio.run(seeder(f"sqlite:///{path}"))
            copy_sqlite(path, size)
            yield "SQLite", size, f"sqlite:///{path}"
            os.remove(path)
            if base is None:
                continue
            schema = f"lashflow_bench_{uuid.uuid4().hex[:12]}"
            asyncio.run(postgres_schema(base, "create", schema))
            try:
                url = with_search_path(base, schema)
                log(f"PostgreSQL: {size:,} {what} runs")
                asyncio.run(seeder(url))
                asyncio.run(copy_postgres(url, size))
                yield "PostgreSQL", size, url
            finally:
                asyncio.run(postgres_schema(base, "drop", schema))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="verify over many parked runs")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(measure(json.loads(args.worker)))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    base = None if args.no_postgres else postgres_url()
    rows: list[tuple[str, int, dict[str, Any]]] = []
    for name, size, url in databases(sizes, base, seed, "parked"):
        rows.append((name, size, run_measure(url + ("?mode=ro" if name == "SQLite" else ""))))
    print(f"verify over parked runs (each replayed to its end; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f})")
    header = (f"{'database':<11} {'runs':>8} {'seconds':>8} {'CPU s':>7} {'runs/s':>8} "
              f"{'peak RSS':>9}  verdicts")
    print(header)
    print("-" * len(header))
    for name, size, result in rows:
        verdicts = ", ".join(f"{k} {v:,}" for k, v in sorted(result["counts"].items()))
        print(f"{name:<11} {size:>8,} {result['seconds']:>8.1f} {result['cpu']:>7.1f} "
              f"{size / result['seconds']:>8,.0f} {result['peak_rss_mb']:>6.0f} MB  {verdicts}")


if __name__ == "__main__":
    main()
