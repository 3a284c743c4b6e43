"""Webhook completions through a real `lashflow serve`: throughput and latency.

N runs park on a completion key; concurrent HTTP clients resolve them all over
keep-alive connections. Measured: completions per second (from the first POST until
every run has reached its next step), the server's and the client's CPU per completion,
and per run the time from its POST to its next step starting (a tool that appends its
start time to a side file), p50/p99/max. Goal on the project's 2-core machine, 50
concurrent clients: p50 < 20 ms, p99 < 100 ms.

Two kinds of load, a row each:
- closed loop (`--clients`): each client sends its next POST as soon as the last one is
  answered: the row measures the most the server takes. Its latency is queueing by
  construction: with 50 POSTs always in flight at a throughput of T per second, each
  waits about 50 / T seconds (Little's law), whatever the server does.
- open loop (`--rates`): 50 clients, POSTs due at a fixed rate, as webhooks arrive from
  the world; latency counts from each POST's due time even when every client was busy.
  This is the row the latency goal is about.

    python bench/bench_http.py [--runs 1000] [--clients 1,50] [--rates 100,200,300]
                               [--backends sqlite,postgres]

PostgreSQL: $LASHFLOW_TEST_POSTGRES_URL or postgresql://postgres@127.0.0.1:5432/test; a
fresh schema is made and dropped. Only loopback and a temporary folder are touched.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

TOKEN = "bench-token-0123456789"
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
    """A `lashflow serve` process; its output goes to a file, so a busy benchmark never
    slows the server down by reading a pipe late."""

    def __init__(self, folder: Path, db: str, stamps: Path) -> None:
        env = dict(os.environ, LASHFLOW_API_TOKEN=TOKEN, LASHFLOW_BENCH_STAMPS=str(stamps))
        self.log = folder / "serve.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lashflow", "serve", "--port", "0", "--db", db,
                 "--processes", str(folder)], stdout=out, stderr=subprocess.STDOUT,
                text=True, env=env, cwd=folder)
        deadline = time.monotonic() + 60
        while True:
            found = re.search(r"listening on (http://\S+)", self.log.read_text())
            if found:
                self.url = found.group(1)
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit("lashflow serve did not start:\n" + self.log.read_text())
            time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


class KeepAlive:
    """One HTTP/1.1 keep-alive connection that POSTs JSON and reads the answer.

    The load generator must cost far less than the server it loads (both share this
    2-core machine): httpx spends ~3 ms of CPU per request with 50 connections, as much
    as the server; this spends a few tens of microseconds."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, url: str) -> KeepAlive:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        return cls(reader, writer, parts.netloc)

    async def post(self, path: str, body: bytes) -> int:
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        if length is None:
            raise SystemExit("the server answered without a Content-Length")
        await self.reader.readexactly(int(length.group(1)))
        return status

    def close(self) -> None:
        self.writer.close()


async def resolve_all(url: str, keys: dict[int, str], clients: int,
                      rate: float | None) -> dict[int, float]:
    """POST every key's completion over ``clients`` connections; returns each one's send
    time. ``rate`` None: closed loop (each client sends its next POST when the last one
    is answered). A rate: open loop, the n-th POST is due at start + n / rate and its
    latency counts from that moment even if every client was still busy (no coordinated
    omission: a slow server is not excused by the client waiting for it)."""
    order = sorted(keys)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in order:
        queue.put_nowait(n)
    sent: dict[int, float] = {}
    began = time.time()
    due = {n: began + i / rate for i, n in enumerate(order)} if rate else {}

    async def client() -> None:
        conn = await KeepAlive.open(url)
        try:
            while not queue.empty():
                n = queue.get_nowait()
                if rate:
                    pause = due[n] - time.time()
                    if pause > 0:
                        await asyncio.sleep(pause)
                    sent[n] = due[n]
                else:
                    sent[n] = time.time()
                status = await conn.post(f"/v1/completions/{keys[n]}",
                                         json.dumps({"result": n}).encode())
                if status != 200:
                    raise SystemExit(f"completion POST answered {status}")
        finally:
            conn.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return sent


async def measure(backend: str, runs: int, clients: int, rate: float | None,
                  postgres_url: str) -> dict[str, float]:
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
            limits = httpx.Limits(max_connections=50)
            async with httpx.AsyncClient(base_url=served.url, timeout=60, limits=limits) as client:
                gate = asyncio.Semaphore(50)

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
            began, cpu, own = time.perf_counter(), _cpu(served.proc.pid), time.process_time()
            sent = await resolve_all(served.url, keys, clients, rate)
            client_cpu = time.process_time() - own
            deadline = time.monotonic() + 120
            while not stamps.exists() or len(stamps.read_text().splitlines()) < runs:
                if time.monotonic() > deadline:
                    raise SystemExit("not every run reached its next step")
                await asyncio.sleep(0.002)
            # until every run reached its next step: the drives a closed loop leaves
            # behind are part of the work
            wall = time.perf_counter() - began
            server_cpu = _cpu(served.proc.pid) - cpu
        finally:
            served.stop()
            if conn is not None:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                await conn.close()
        started = {int(n): float(at) for n, at in
                   (line.split() for line in stamps.read_text().splitlines())}
        latencies = sorted((started[n] - sent[n]) * 1000 for n in sent)
        return {"per_s": runs / wall, "cpu_ms": server_cpu / runs * 1000,
                "client_ms": client_cpu / runs * 1000, "p50": statistics.median(latencies),
                "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
                "max": latencies[-1]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--clients", default="1,50",
                        help="comma-separated: a closed-loop row per number of clients")
    parser.add_argument("--rates", default="100,200,300",
                        help="comma-separated: an open-loop row (50 clients) per offered "
                             "rate of completions per second")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    postgres_url = (os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
                    or "postgresql://postgres@127.0.0.1:5432/test")
    loads: list[tuple[int, float | None]] = [(int(c), None) for c in args.clients.split(",") if c]
    loads += [(50, float(r)) for r in args.rates.split(",") if r]
    print(f"{args.runs} parked runs resolved over HTTP; latency from a POST's send (or due) "
          "time to the run's next step starting")
    print(f"{'backend':<10} {'load':<22} {'completions/s':>14} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'server CPU ms':>14} {'client CPU ms':>14}")
    for backend in args.backends.split(","):
        for clients, rate in loads:
            row = await measure(backend, args.runs, clients, rate, postgres_url)
            load = (f"{clients} clients, closed" if rate is None
                    else f"50 clients, {rate:.0f}/s open")
            print(f"{backend:<10} {load:<22} {row['per_s']:>14.0f} {row['p50']:>8.1f} "
                  f"{row['p99']:>8.1f} {row['max']:>8.1f} {row['cpu_ms']:>14.2f} "
                  f"{row['client_ms']:>14.2f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
