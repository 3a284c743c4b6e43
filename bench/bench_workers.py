"""Worker scale-out benchmark: steps/s with 1, 2 and 4 ``lashflow worker`` processes on
PostgreSQL next to SQLite, printed as one table.

Each measurement gets a fresh database (a new PostgreSQL schema, dropped afterwards, or
a new SQLite file in a temporary folder). The worker processes are started first and,
once each has opened the store, paused (SIGSTOP, by pid). Then every run is submitted
up front (``Engine.create``: queued, as ``lashflow submit`` does), and all workers are
resumed at the same instant (SIGCONT): the clock runs from there until the last run is
finished. So every worker starts on the same full queue and process start-up is not
measured. Runs are ``--steps`` trivial tool steps each (the tool returns at once).

Also reported: the workers' CPU per step (user + system of the worker processes only,
from /proc; the database server's CPU is not in it). On a machine with 2 cores the
workers, the server and the neighbours share them, so adding workers beyond the cores
cannot add throughput: the figure shows what a worker costs, the scaling shows what the
store lets through.

Usage (from the repository root, PostgreSQL at $LASHFLOW_TEST_POSTGRES_URL or
postgresql://postgres@127.0.0.1:5432/test, with the right to create schemas):
    python bench/bench_workers.py                # 400 runs x 10 steps, best of 2
    python bench/bench_workers.py --quick        # 100 runs x 5 steps, once
    python bench/bench_workers.py --workers 1,2,4,8 --runs 1000 --repeat 3
This file is also the workers' tool module (``--tools bench/bench_workers.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lashflow import tool

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

SOURCE = """
process steps(n: int) {
  i = 0
  while i < n { i = await tools.bench_step({ i: i })? }
  finish i
}
"""


@tool
async def bench_step(i: int) -> int:
    """The trivial step: all its cost is the engine's and the store's."""
    return i + 1


@dataclass(slots=True)
class Result:
    backend: str
    workers: int
    steps: int
    seconds: float
    cpu_seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds

    @property
    def cpu_us_per_step(self) -> float:
        return self.cpu_seconds / self.steps * 1e6


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    return urlunsplit(parts._replace(query=urlencode(query + list(params.items()))))


class Database:
    """A fresh database for one measurement, and how to count its finished runs."""

    def __init__(self, backend: str, folder: Path, postgres_url: str) -> None:
        self.backend = backend
        self.folder = folder
        self.postgres_url = postgres_url
        self.schema = f"lashflow_bench_{uuid.uuid4().hex[:12]}"
        self.path = folder / f"{self.schema}.db"
        self.url = (with_query(postgres_url, search_path=self.schema) if backend == "postgres"
                    else f"sqlite:///{self.path}")
        self._conn = None

    async def __aenter__(self) -> "Database":
        if self.backend == "postgres":
            import asyncpg

            self._conn = await asyncpg.connect(self.postgres_url, timeout=10)
            await self._conn.execute(f"CREATE SCHEMA {self.schema}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None:
            await self._conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
            await self._conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    async def finished(self) -> int:
        if self._conn is not None:
            return await self._conn.fetchval(
                f"SELECT count(*) FROM {self.schema}.lashflow_runs WHERE status = 'finished'")
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            return conn.execute("SELECT count(*) FROM runs WHERE status = 'finished'").fetchone()[0]
        finally:
            conn.close()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of live processes (children they waited for included)."""
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(") ", 1)[1].split()
        ticks += sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def start_worker(url: str, concurrency: int, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LASHFLOW_DB", None)
    with open(log, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "lashflow", "worker", "--db", url, "--tools", __file__,
             "--concurrency", str(concurrency), "--poll", "0.2"],
            env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)


async def wait_ready(procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    deadline = time.monotonic() + 120
    for proc, log in zip(procs, logs):
        while "polling every" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a worker did not start:\n{log.read_text(errors='replace')}")
            await asyncio.sleep(0.05)


async def measure(backend: str, workers: int, args: argparse.Namespace, folder: Path) -> Result:
    from lashflow import Engine

    async with Database(backend, folder, args.postgres) as db:
        logs = [folder / f"worker{n}.err" for n in range(workers)]
        procs = [start_worker(db.url, args.concurrency, log) for log in logs]
        try:
            await wait_ready(procs, logs)
            for proc in procs:
                os.kill(proc.pid, signal.SIGSTOP)
            async with Engine(db=db.url, tools=[bench_step]) as engine:
                for _ in range(args.runs):
                    await engine.create(SOURCE, input={"n": args.steps})
            pids = [proc.pid for proc in procs]
            cpu_before = cpu_seconds(pids)
            started = time.monotonic()
            for proc in procs:
                os.kill(proc.pid, signal.SIGCONT)
            while await db.finished() < args.runs:
                if any(proc.poll() is not None for proc in procs):
                    raise SystemExit("a worker died:\n" + "\n".join(
                        log.read_text(errors="replace")[-2000:] for log in logs))
                await asyncio.sleep(0.02)
            seconds = time.monotonic() - started
            cpu = cpu_seconds(pids) - cpu_before
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)
                    os.kill(proc.pid, signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
    return Result(backend, workers, args.runs * args.steps, seconds, cpu)


def print_table(results: dict[tuple[str, int], Result], args: argparse.Namespace) -> None:
    print(f"\nlashflow workers: {args.runs} runs x {args.steps} trivial steps submitted up front, "
          f"--concurrency {args.concurrency} per worker, best of {args.repeat}; "
          f"{os.cpu_count()} cores")
    header = ("workers", "PostgreSQL steps/s", "SQLite steps/s", "PG / SQLite",
              "PG worker CPU/step", "SQLite worker CPU/step")
    rows = []
    for workers in args.workers:
        pg, lite = results[("postgres", workers)], results[("sqlite", workers)]
        rows.append((str(workers), f"{pg.steps_per_s:,.0f}", f"{lite.steps_per_s:,.0f}",
                     f"{pg.steps_per_s / lite.steps_per_s:.2f}x", f"{pg.cpu_us_per_step:,.0f} us",
                     f"{lite.cpu_us_per_step:,.0f} us"))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))


async def run(args: argparse.Namespace) -> None:
    results: dict[tuple[str, int], Result] = {}
    with tempfile.TemporaryDirectory(prefix="lashflow-bench-workers-") as tmp:
        for _ in range(args.repeat):
            for workers in args.workers:
                for backend in ("postgres", "sqlite"):
                    result = await measure(backend, workers, args, Path(tmp))
                    print(f"{backend:8} {workers} worker(s): {result.steps_per_s:8,.0f} steps/s "
                          f"({result.seconds:.2f} s, worker CPU {result.cpu_us_per_step:,.0f} us/step)",
                          flush=True)
                    best = results.get((backend, workers))
                    if best is None or result.steps_per_s > best.steps_per_s:
                        results[(backend, workers)] = result
    print_table(results, args)


def main() -> None:
    parser = argparse.ArgumentParser(description="steps/s with 1, 2 and 4 worker processes, "
                                                 "PostgreSQL next to SQLite")
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--concurrency", type=int, default=64, help="runs at once per worker")
    parser.add_argument("--repeat", type=int, default=2, help="best of this many")
    parser.add_argument("--postgres", default=os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
                        or DEFAULT_POSTGRES_URL, help="server URL (a schema is created there)")
    parser.add_argument("--quick", action="store_true", help="100 runs x 5 steps, once")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.steps, args.repeat = 100, 5, 1
    args.workers = [int(n) for n in args.workers.split(",")]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
