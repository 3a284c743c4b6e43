"""Webhook completions through a real `lashflow serve`: throughput and latency.

N runs park on a completion key; C concurrent HTTP clients resolve them all. Measured:
completions per second (wall time of the resolving phase) and, per run, the time from
sending the POST to its next step starting (a tool that appends its start time to a
side file), p50 and p99. Goals on the project's 2-core machine: p50 < 20 ms, p99 < 100 ms.
One row per number of clients: with one client the latency is the server's own; with
50 it also holds the time a POST queues behind the others (at a throughput of T per
second, 50 POSTs in flight wait about 50 / T seconds each, by Little's law).

    python bench/bench_http.py [--runs 1000] [--clients 1,50] [--backends sqlite,postgres]

PostgreSQL: $LASHFLOW_TEST_POSTGRES_URL or postgresql://postgres@127.0.0.1:5432/test; a
fresh schema is made and dropped. Only loopback and a temporary folder are touched.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PARK = """process park(n: int) {
  r = await tools.wait_for_it({n: n})?
  s = await tools.stamp({n: n})?
  finish s
}
"""
TOOLS = '''
import os, time
from lashflow import PendingCompletion, ToolCall, ToolResult, tool

@tool
async def wait_for_it(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())

@tool
async def stamp(n: int) -> int:
    fd = os.open(os.environ["LASHFLOW_BENCH_STAMPS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{n} {time.time()}\\n".encode())
    finally:
        os.close(fd)
    return n
'''


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in params]
    return urlunsplit(parts._replace(query=urlencode(query + list(params.items()))))


class Served:
    def __init__(self, folder: Path, db: str, stamps: Path) -> None:
        env = dict(os.environ, LASHFLOW_API_TOKEN=TOKEN, LASHFLOW_BENCH_STAMPS=str(stamps))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lashflow", "serve", "--port", "0", "--db", db,
             "--processes", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env, cwd=folder)
        up = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    self.url = found.group(1)
                    up.set()
        threading.Thread(target=read, daemon=True).start()
        if not up.wait(60):
            self.proc.kill()
            raise SystemExit("lashflow serve did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


async def measure(backend: str, runs: int, clients: int, postgres_url: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "park.lash").write_text(PARK)
        (folder / "park.py").write_text(TOOLS)
        stamps = folder / "stamps.txt"
        schema = f"lashflow_bench_{uuid.uuid4().hex[:12]}"
        conn = None
        if backend == "postgres":
            import asyncpg

            conn = await asyncpg.connect(postgres_url, timeout=10)
            await conn.execute(f"CREATE SCHEMA {schema}")
            db = with_query(postgres_url, search_path=schema)
        else:
            db = f"sqlite:///{folder / 'bench.db'}"
        served = Served(folder, db, stamps)
        try:
            limits = httpx.Limits(max_connections=clients)
            async with httpx.AsyncClient(base_url=served.url, timeout=60, limits=limits) as client:
                gate = asyncio.Semaphore(clients)

                async def start(n: int) -> None:
                    async with gate:
                        reply = await client.post("/v1/runs", headers=AUTH, json={
                            "file": "park.lash", "input": {"n": n}, "run_id": f"r{n}"})
                        reply.raise_for_status()
                await asyncio.gather(*(start(n) for n in range(runs)))
                keys: dict[int, str] = {}
                deadline = time.monotonic() + 120
                while len(keys) < runs:
                    waits = (await client.get("/v1/waiting", headers=AUTH)).json()["waiting"]
                    keys = {int(w["run_id"][1:]): w["key"] for w in waits if w.get("key")}
                    if time.monotonic() > deadline:
                        raise SystemExit(f"only {len(keys)} of {runs} runs parked")
                    await asyncio.sleep(0.05)
                sent: dict[int, float] = {}

                async def resolve(n: int) -> None:
                    async with gate:
                        sent[n] = time.time()
                        reply = await client.post(f"/v1/completions/{keys[n]}",
                                                  json={"result": n})
                        reply.raise_for_status()
                began, cpu = time.perf_counter(), _cpu(served.proc.pid)
                await asyncio.gather(*(resolve(n) for n in range(runs)))
                wall = time.perf_counter() - began
                server_cpu = _cpu(served.proc.pid) - cpu
            deadline = time.monotonic() + 120
            while not stamps.exists() or len(stamps.read_text().splitlines()) < runs:
                if time.monotonic() > deadline:
                    raise SystemExit("not every run reached its next step")
                await asyncio.sleep(0.05)
        finally:
            served.stop()
            if conn is not None:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                await conn.close()
        started = {int(n): float(at) for n, at in
                   (line.split() for line in stamps.read_text().splitlines())}
        latencies = sorted((started[n] - sent[n]) * 1000 for n in sent)
        return {"per_s": runs / wall, "cpu_ms": server_cpu / runs * 1000, "p50": statistics.median(latencies),
                "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
                "max": latencies[-1]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--clients", default="1,50",
                        help="comma-separated: one row per number of concurrent clients")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    postgres_url = (os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
                    or "postgresql://postgres@127.0.0.1:5432/test")
    print(f"{args.runs} parked runs resolved over HTTP, per number of concurrent clients")
    print(f"{'backend':<10} {'clients':>8} {'completions/s':>14} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'server CPU ms/completion':>25}")
    for backend in args.backends.split(","):
        for clients in (int(c) for c in args.clients.split(",")):
            row = await measure(backend, args.runs, clients, postgres_url)
            print(f"{backend:<10} {clients:>8} {row['per_s']:>14.0f} {row['p50']:>8.1f} "
                  f"{row['p99']:>8.1f} {row['max']:>8.1f} {row['cpu_ms']:>25.2f}")


if __name__ == "__main__":
    asyncio.run(main())
