"""Size benchmark: bytes of journal per step (SQLite, PostgreSQL, and DBOS on SQLite measured
the same way) and a worker's memory with 100,000 parked runs.

Bytes per step: ``--runs`` runs of 1 trivial step and as many of 11, each set in a fresh
database; the difference divided by 10 steps per run is what one more step costs, so a
run's own rows (and the empty tables) drop out. A step is the same everywhere: a tool
that takes ``{i}`` and returns ``i``. Two figures each: as written (SQLite: the file's
pages after a WAL checkpoint; PostgreSQL: every lashflow table with its indexes and TOAST,
``pg_total_relation_size``, dead row versions included) and compacted (after ``VACUUM``,
PostgreSQL ``VACUUM FULL``): the live rows only. DBOS (``bench/dbos_peer.py --size``, in
``bench/.venv-dbos``) writes its own SQLite file, measured the same way.

Parked runs: one ``lashflow worker`` process (SQLite, or PostgreSQL with ``--parked-on
postgres``) drives ``--parked`` runs submitted meanwhile, each of which parks on a
completion key at its first step. Reported: the worker's resident memory (VmRSS) idle
before the runs, once every run is parked, and its peak (VmHWM).

Usage (from the repository root):
    python bench/bench_size.py                  # 200 runs per size, 100,000 parked
    python bench/bench_size.py --parked 0       # bytes per step only
    python bench/bench_size.py --runs 50 --parked 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lashflow import Engine

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
# the bench folder is not a package; noop and approve are this file's tools too (the
# worker is started with --tools bench/bench_size.py)
from bench_durable import STEPS_SOURCE, approve, noop  # noqa: E402
from bench_workers import (  # noqa: E402
    DEFAULT_POSTGRES_URL, Database, load_average, start_worker, wait_ready,
)

DBOS_PYTHON = BENCH / ".venv-dbos" / "bin" / "python"

PARK_SOURCE = """
process parked(n: int) {
  x = await tools.approve({ i: n })?
  finish x
}
"""


# --------------------------------------------------------------------------- sizes


def sqlite_bytes(path: Path) -> tuple[int, int]:
    """(as written, after VACUUM): the file's pages once the WAL is checkpointed."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        def used() -> int:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            return (pages - free) * conn.execute("PRAGMA page_size").fetchone()[0]
        written = used()
        conn.execute("VACUUM")
        return written, used()
    finally:
        conn.close()


async def postgres_bytes(db: Database) -> tuple[int, int]:
    """(as written, after VACUUM FULL): every lashflow table, indexes and TOAST included."""
    import asyncpg

    conn = await asyncpg.connect(db.url)
    try:
        total = ("SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c "
                 "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' "
                 "AND c.relname LIKE 'lashflow\\_%' AND n.nspname = current_schema()")
        written = await conn.fetchval(total)
        await conn.execute("VACUUM FULL")
        return written, await conn.fetchval(total)
    finally:
        await conn.close()


async def lashflow_bytes(backend: str, steps: int, runs: int, folder: Path,
                         server: str) -> tuple[int, int]:
    async with Database(backend, folder, server) as db:
        async with Engine(db=db.url, tools=[noop]) as engine:
            for _ in range(runs):
                outcome = await engine.run(STEPS_SOURCE, input={"n": steps})
                assert outcome.status == "finished", outcome
        if backend == "sqlite":
            return sqlite_bytes(db.path)
        return await postgres_bytes(db)


def dbos_bytes(steps: int, runs: int, folder: Path) -> tuple[int, int] | None:
    if not DBOS_PYTHON.exists():
        return None
    path = folder / f"dbos-{steps}.sqlite"
    subprocess.run([str(DBOS_PYTHON), str(BENCH / "dbos_peer.py"), "--db", str(path), "--wal",
                    "--size", "--runs", str(runs), "--steps", str(steps)],
                   check=True, stdout=subprocess.DEVNULL)
    return sqlite_bytes(path)


async def bytes_per_step(args: argparse.Namespace, folder: Path) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for name in ("lashflow SQLite", "lashflow PostgreSQL", "DBOS 3.4.0 SQLite (WAL)"):
        sizes = {}
        for steps in (1, 11):
            if name.startswith("DBOS"):
                sizes[steps] = dbos_bytes(steps, args.runs, folder)
            else:
                backend = "sqlite" if name.endswith("SQLite") else "postgres"
                sizes[steps] = await lashflow_bytes(backend, steps, args.runs, folder,
                                                    args.postgres)
        if sizes[1] is None or sizes[11] is None:
            rows.append((name, None))
            continue
        added = 10 * args.runs
        rows.append((name, tuple((sizes[11][i] - sizes[1][i]) / added for i in (0, 1))
                     + tuple(sizes[1][i] / args.runs for i in (0, 1))))
        print(f"{name}: {rows[-1][1][0]:,.0f} bytes per step as written", flush=True)
    return rows


# --------------------------------------------------------------------------- memory


def memory_kib(pid: int) -> dict[str, int]:
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


async def parked_memory(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    async with Database(args.parked_on, folder, args.postgres) as db:
        if args.parked_on == "sqlite":
            async with Engine(db=db.url):  # created (WAL on) before the worker opens it
                pass
        log = folder / "parked-worker.err"
        proc = start_worker(db.url, 64, log, tools=__file__)
        try:
            await wait_ready([proc], [log])
            idle = memory_kib(proc.pid)
            started = time.monotonic()
            gate = asyncio.Semaphore(50)
            async with Engine(db=db.url, tools=[approve]) as engine:
                async def one(index: int) -> None:
                    async with gate:
                        await engine.create(PARK_SOURCE, input={"n": index})
                await asyncio.gather(*(one(index) for index in range(args.parked)))
                submitted = time.monotonic() - started
                while await db.count("waiting") < args.parked:
                    if proc.poll() is not None:
                        raise SystemExit(log.read_text(errors="replace")[-2000:])
                    await asyncio.sleep(1.0)
            parked = memory_kib(proc.pid)
            return {"runs": args.parked, "idle": idle, "parked": parked,
                    "seconds": time.monotonic() - started, "submit_seconds": submitted}
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()


# --------------------------------------------------------------------------- report


def print_report(rows: list[tuple[str, Any]], memory: dict[str, Any] | None,
                 args: argparse.Namespace, load: str) -> None:
    print(f"\nJournal size: {args.runs} runs of 1 and of 11 trivial steps; {os.cpu_count()} cores, "
          f"load average {load} (before) .. {load_average()} (after)")
    header = ("journal", "B/step", "B/step vacuumed", "B/run", "B/run vacuumed")
    table = [header]
    for name, values in rows:
        table.append((name, *(("n/a",) * 4 if values is None
                              else tuple(f"{value:,.0f}" for value in values))))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for index, row in enumerate(table):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))
        if index == 0:
            print("  ".join("-" * w for w in widths))
    print("B/run: a 1-step run's bytes, its one step included")
    if memory is not None:
        print(f"\nWorker memory ({args.parked_on}): {memory['runs']:,} runs parked in "
              f"{memory['seconds']:.0f} s (submitted in {memory['submit_seconds']:.0f} s)")
        print(f"  idle before the runs: RSS {memory['idle']['VmRSS'] / 1024:,.1f} MiB")
        print(f"  all runs parked:      RSS {memory['parked']['VmRSS'] / 1024:,.1f} MiB, "
              f"peak {memory['parked']['VmHWM'] / 1024:,.1f} MiB")


async def run(args: argparse.Namespace) -> None:
    load = load_average()
    with tempfile.TemporaryDirectory(prefix="lashflow-bench-size-") as tmp:
        folder = Path(tmp)
        rows = await bytes_per_step(args, folder) if args.runs else []
        memory = await parked_memory(args, folder) if args.parked else None
    print_report(rows, memory, args, load)
    if args.json:
        print(json.dumps({"bytes": rows, "memory": memory}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per size (0: skip)")
    parser.add_argument("--parked", type=int, default=100_000, help="parked runs (0: skip)")
    parser.add_argument("--parked-on", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres", default=os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
                        or DEFAULT_POSTGRES_URL, help="server URL (databases are created there)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
