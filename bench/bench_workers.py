"""Worker scale-out benchmark: 1, 2 and 4 ``lashflow worker`` processes on one PostgreSQL,
printed as one table per shape, and where the ceiling is.

Shapes (each with every worker count):
- ``seq``: each worker drives one run at a time (``--concurrency 1``);
- ``50``: each worker drives 50 runs at once;
- ``seq, 10k queued`` and ``50, 10k queued``: the same with 10,000 runs in the queue, the
  clock stopped once as many runs finished as in the shape without the backlog;
- ``start``: one-step runs, 50 at once per worker: the run start rate (runs/s) that
  queues and schedules feed on.

Each measurement gets a fresh PostgreSQL database (created, then dropped), so the
server's counters are the workers' alone. The workers are started first and, once each
has opened the store, paused (SIGSTOP, by pid). Then the runs are submitted (queued, as
``lashflow submit`` does) and every worker is resumed at the same instant (SIGCONT); the
clock runs until the target count of runs finished, when the workers are paused again.
Steps are counted in the journal afterwards. Process start-up is not measured.

Per measurement: steps/s (runs/s for ``start``); transactions per step (the database's
``xact_commit`` over the window, the benchmark's own queries taken out; read-only
statements count too); the CPU per step of the worker processes and of the server
processes serving them (from /proc, the server on this machine); the share of samples in
which a server process waited on a lock (``pg_stat_activity``, every 20 ms). Also measured
in the same run: this server's own commit rate (8 connections inserting one row per
transaction), which bounds the writing transactions a fleet can make.

Usage (from the repository root, PostgreSQL at $LASHFLOW_TEST_POSTGRES_URL or
postgresql://postgres@127.0.0.1:5432/test, with the right to create databases):
    python bench/bench_workers.py                # every shape, 1, 2 and 4 workers
    python bench/bench_workers.py --quick        # fewer runs, no 10k backlog
    python bench/bench_workers.py --shapes 50,start --workers 1,2
    python bench/bench_workers.py --sqlite       # also the ``50`` shape on SQLite
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
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from lashflow import tool

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKLOG = 10_000
POLL = 0.02  # seconds between the benchmark's looks at the database

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


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    concurrency: int  # per worker
    backlog: bool  # 10,000 runs queued, the clock stopped after ``runs`` finished
    one_step: bool  # runs of one step: the start rate


SHAPES = {
    "seq": Shape("seq", 1, False, False),
    "50": Shape("50", 50, False, False),
    "seq+10k": Shape("seq+10k", 1, True, False),
    "50+10k": Shape("50+10k", 50, True, False),
    "start": Shape("start", 50, False, True),
}


@dataclass(slots=True)
class Result:
    backend: str
    shape: Shape
    workers: int
    runs: int  # finished in the window
    steps: int  # recorded in the window
    seconds: float
    worker_cpu: float
    server_cpu: float | None
    transactions: int | None
    lock_share: float | None
    submitted_per_s: float

    @property
    def rate(self) -> float:
        """steps/s, or runs/s for the start rate"""
        return (self.runs if self.shape.one_step else self.steps) / self.seconds

    def per_step_us(self, seconds: float | None) -> str:
        return "n/a" if seconds is None else f"{seconds / self.steps * 1e6:,.0f}"


def database_url(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU of each live process (children it waited for included)."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(") ", 1)[1].split()
        except OSError:
            continue  # ended
        found[pid] = sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return found


class Database:
    """A fresh database for one measurement, and the benchmark's looks at it."""

    def __init__(self, backend: str, folder: Path, server: str) -> None:
        self.backend = backend
        self.server = server
        self.name = f"lashflow_bench_{uuid.uuid4().hex[:12]}"
        self.path = folder / f"{self.name}.db"
        self.url = (database_url(server, self.name) if backend == "postgres"
                    else f"sqlite:///{self.path}")
        self.queries = 0  # our own transactions in the database
        self._admin: Any = None
        self._conn: Any = None

    async def __aenter__(self) -> "Database":
        if self.backend == "postgres":
            import asyncpg

            self._admin = await asyncpg.connect(self.server, timeout=10)
            await self._admin.execute(f"CREATE DATABASE {self.name}")
            self._conn = await asyncpg.connect(self.url, timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None:
            await self._conn.close()
        if self._admin is not None:
            await self._admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
            await self._admin.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    async def look(self) -> tuple[int, list[int], bool]:
        """(finished runs, the server processes serving the workers, one waiting on a lock)"""
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                return conn.execute("SELECT count(*) FROM runs WHERE status = 'finished'"
                                    ).fetchone()[0], [], False
            finally:
                conn.close()
        self.queries += 1
        row = await self._conn.fetchrow(
            "SELECT (SELECT count(*) FROM lashflow_runs WHERE status = 'finished'), "
            "array_agg(pid), coalesce(bool_or(wait_event_type = 'Lock'), false) "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()")
        return row[0], list(row[1] or []), row[2]

    async def count(self, status: str) -> int:
        """Runs with this status."""
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                return conn.execute("SELECT count(*) FROM runs WHERE status = ?",
                                    (status,)).fetchone()[0]
            finally:
                conn.close()
        self.queries += 1
        return await self._conn.fetchval(
            "SELECT count(*) FROM lashflow_runs WHERE status = $1", status)

    async def steps(self) -> int:
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                return conn.execute("SELECT count(*) FROM steps").fetchone()[0]
            finally:
                conn.close()
        self.queries += 1
        return await self._conn.fetchval("SELECT count(*) FROM lashflow_steps")

    async def sessions(self) -> int:
        self.queries += 1
        return await self._conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()")

    async def commits(self, sessions: int = 0) -> int:
        """The database's committed transactions, once the other sessions are down to
        ``sessions`` (the paused workers'): a session's counts arrive when it ends. (A
        paused worker's few transactions from before the pause arrive when it ends, so
        they count in the window: a handful per worker.)"""
        while await self.sessions() > sessions:
            await asyncio.sleep(POLL)
        self.queries += 2
        await self._conn.execute("SELECT pg_stat_force_next_flush()")
        await self._conn.execute("SELECT pg_stat_clear_snapshot()")
        self.queries += 1
        return await self._conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")


def start_worker(url: str, concurrency: int, log: Path,
                 tools: str = __file__) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LASHFLOW_DB", None)
    with open(log, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "lashflow", "worker", "--db", url, "--tools", tools,
             "--concurrency", str(concurrency), "--poll", "0.2"],
            env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)


async def wait_ready(procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    deadline = time.monotonic() + 120
    for proc, log in zip(procs, logs):
        while "polling every" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"a worker did not start:\n{log.read_text(errors='replace')}")
            await asyncio.sleep(0.05)


async def submit(url: str, count: int, steps: int) -> float:
    """Queue ``count`` runs, 50 submissions at once; returns runs submitted per second."""
    from lashflow import Engine

    gate = asyncio.Semaphore(50)
    async with Engine(db=url, tools=[bench_step]) as engine:
        async def one() -> None:
            async with gate:
                await engine.create(SOURCE, input={"n": steps})
        started = time.monotonic()
        await asyncio.gather(*(one() for _ in range(count)))
        return count / (time.monotonic() - started)


async def measure(backend: str, shape: Shape, workers: int, target: int, steps: int,
                  folder: Path, server: str) -> Result:
    async with Database(backend, folder, server) as db:
        logs = [folder / f"worker{n}.err" for n in range(workers)]
        procs = [start_worker(db.url, shape.concurrency, log) for log in logs]
        pids = [proc.pid for proc in procs]
        try:
            await wait_ready(procs, logs)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            paused = await db.sessions() if backend == "postgres" else 0
            per_run = 1 if shape.one_step else steps
            submitted = await submit(db.url, BACKLOG if shape.backlog else target, per_run)
            steps_before = await db.steps()
            commits_before = await db.commits(paused) if backend == "postgres" else 0
            queries_before = db.queries
            _, server_pids, _ = await db.look()
            worker_before = cpu_seconds(pids)
            server_before = cpu_seconds(server_pids)
            seen_server = set(server_pids)
            looks = waits = 0
            started = time.monotonic()
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            while True:
                finished, server_pids, waiting = await db.look()
                looks += 1
                waits += waiting
                seen_server.update(server_pids)
                if finished >= target:
                    break
                if any(proc.poll() is not None for proc in procs):
                    raise SystemExit("a worker died:\n" + "\n".join(
                        log.read_text(errors="replace")[-2000:] for log in logs))
                await asyncio.sleep(POLL)
            seconds = time.monotonic() - started
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            worker_cpu = sum(cpu_seconds(pids).values()) - sum(worker_before.values())
            server_after = cpu_seconds(sorted(seen_server))
            server_cpu = sum(server_after.values()) - sum(
                server_before.get(pid, 0.0) for pid in server_after)
            recorded = await db.steps() - steps_before
            for pid in pids:  # paused: they can neither drain nor flush, so kill them
                os.kill(pid, signal.SIGKILL)
            for proc in procs:
                proc.wait()
            transactions = None
            if backend == "postgres":
                commits_after = await db.commits()
                # ours since the first count was read (its own commit included)
                transactions = commits_after - commits_before - (db.queries - queries_before)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
    return Result(backend, shape, workers, finished, recorded, seconds, worker_cpu,
                  server_cpu if backend == "postgres" else None, transactions,
                  waits / looks if backend == "postgres" else None, submitted)


async def commit_rate(folder: Path, server: str, seconds: float = 3.0,
                      clients: int = 8) -> float:
    """This server's commits/s: ``clients`` connections each inserting one row per
    transaction, as fast as they can."""
    import asyncpg

    async with Database("postgres", folder, server) as db:
        conns = [await asyncpg.connect(db.url) for _ in range(clients)]
        try:
            await conns[0].execute("CREATE TABLE t (id bigserial PRIMARY KEY, at float8)")
            done = 0
            stop = time.monotonic() + seconds

            async def loop(conn: Any) -> None:
                nonlocal done
                while time.monotonic() < stop:
                    await conn.execute("INSERT INTO t (at) VALUES (1)")
                    done += 1
            started = time.monotonic()
            await asyncio.gather(*(loop(conn) for conn in conns))
            return done / (time.monotonic() - started)
        finally:
            for conn in conns:
                await conn.close()


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def print_table(results: list[Result], args: argparse.Namespace, commits_per_s: float,
                load: str) -> None:
    print(f"\nlashflow workers on one PostgreSQL: {args.steps}-step runs (1 for start), "
          f"{os.cpu_count()} cores; load average {load} (before) .. {load_average()} (after)")
    print(f"this server's commit rate: {commits_per_s:,.0f} commits/s "
          "(8 connections, one-row inserts)")
    header = ("shape", "workers", "steps/s", "txn/step", "worker us", "server us", "lock",
              "submit/s")
    rows = []
    for r in results:
        rows.append((r.shape.name if r.backend == "postgres" else f"{r.shape.name} SQLite",
                     str(r.workers), f"{r.rate:,.0f}",
                     "n/a" if r.transactions is None else f"{r.transactions / r.steps:.2f}",
                     r.per_step_us(r.worker_cpu), r.per_step_us(r.server_cpu),
                     "n/a" if r.lock_share is None else f"{r.lock_share:.0%}",
                     f"{r.submitted_per_s:,.0f}"))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                    for i, (h, w) in enumerate(zip(header, widths))))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))
    print("steps/s: runs/s for start (one-step runs); seq: 1 run at a time per worker, 50: 50;\n"
          "+10k: 10,000 runs queued; txn/step: transactions the server committed per step\n"
          "(reads too); worker us, server us: CPU per step of the worker processes and of\n"
          "the server processes serving them; lock: share of samples with one waiting on a\n"
          "lock; submit/s: runs submitted per second, 50 at once, workers paused")


async def run(args: argparse.Namespace) -> None:
    load = load_average()
    results = []
    with tempfile.TemporaryDirectory(prefix="lashflow-bench-workers-") as tmp:
        folder = Path(tmp)
        commits_per_s = await commit_rate(folder, args.postgres)
        plan = [("postgres", SHAPES[name]) for name in args.shapes]
        if args.sqlite:
            plan.append(("sqlite", SHAPES["50"]))
        for backend, shape in plan:
            for workers in args.workers:
                target = (args.start_runs if shape.one_step
                          else args.runs if shape.concurrency > 1 else args.seq_runs)
                result = await measure(backend, shape, workers, target, args.steps, folder,
                                       args.postgres)
                print(f"{backend:8} {shape.name:22} {workers} worker(s): {result.rate:8,.0f}/s "
                      f"({result.seconds:.2f} s, load {load_average()})", flush=True)
                results.append(result)
    print_table(results, args, commits_per_s, load)


def main() -> None:
    parser = argparse.ArgumentParser(description="1, 2 and 4 worker processes on one "
                                                 "PostgreSQL: steps/s, transactions and CPU "
                                                 "per step, the run start rate")
    parser.add_argument("--runs", type=int, default=400, help="runs per 50-at-once window")
    parser.add_argument("--seq-runs", type=int, default=60, help="runs per sequential window")
    parser.add_argument("--start-runs", type=int, default=1000, help="one-step runs")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"of {', '.join(SHAPES)}")
    parser.add_argument("--sqlite", action="store_true", help="also the 50 shape on SQLite")
    parser.add_argument("--postgres", default=os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
                        or DEFAULT_POSTGRES_URL, help="server URL (databases are created there)")
    parser.add_argument("--quick", action="store_true", help="fewer runs, no 10k backlog")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.seq_runs, args.start_runs, args.steps = 100, 20, 200, 5
        args.shapes = ",".join(name for name in args.shapes.split(",") if "10k" not in name)
    args.workers = [int(n) for n in args.workers.split(",")]
    args.shapes = [name for name in args.shapes.split(",") if name]
    unknown = set(args.shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(sorted(unknown))}: use {', '.join(SHAPES)}")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
