"""Durable-run benchmarks (sequential steps/s, concurrent runs, kill -> resume), printed as one table.

What is measured (each figure in a fresh subprocess with a fresh SQLite file under one
temporary folder, so no measurement inherits another's memory, caches or WAL):

1. Journaled steps: 200 runs x 10 trivial tool steps, sequential and 50 at once, on
   SQLite with lashflow's defaults (WAL, synchronous=FULL). The peer is DBOS Transact on
   SQLite (``bench/dbos_peer.py``, run with the python of ``bench/.venv-dbos``), printed
   as shipped and with WAL set on its file first. The floor is the raw aiosqlite commit
   rate: one INSERT + COMMIT per await, WAL, synchronous=FULL.
2. One run of 10,000 steps against one of 1,000 (time per step: a quadratic path shows
   as a ratio above 1.1); resume of the recorded 10,000-step run (replay only: the run
   is parked on a signal after its last step, so resuming replays every step and parks
   again); kill -> first resumed step (``lashflow run`` in a subprocess, SIGKILL by pid,
   ``lashflow resume`` in a new one, timed to the first line its tool appends; both on
   one machine, so the resume finds the tree the run parsed in the parse cache); the
   import time of ``lashflow``.
4. 10,000 runs parked on completion keys: the worker's RSS once they are all parked
   (after ``gc.collect()``), and ``engine.complete(key, ok)`` -> the run's next step
   recorded (p50 over sequential completions of random keys).

Throughput figures are the best of ``--repeat`` repetitions for lashflow and DBOS alike
(the machine is shared: the best repetition is the least disturbed one).

Usage:
    python bench/bench_durable.py            # full run, a few minutes
    python bench/bench_durable.py --quick    # scaled down, about a minute
    python bench/bench_durable.py --no-dbos  # skip the peer (no virtualenv needed)
The DBOS virtualenv is created on first use (needs PyPI):
    python -m venv bench/.venv-dbos && bench/.venv-dbos/bin/pip install dbos==3.4.0
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from _common import writer_cpu
from lashflow import PendingCompletion, ToolCall, ToolResult, tool

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DBOS_VENV = BENCH / ".venv-dbos"
DBOS_VERSION = "3.4.0"

STEPS_SOURCE = """
process steps(n: int) {
  i = 0
  while i < n { x = await tools.noop({ i: i })? ; i = i + 1 }
  finish i
}
"""

# Parks on a signal after its last step: resuming it replays every step, runs nothing.
LONG_SOURCE = """
process long(n: int) signals { go: any } {
  i = 0
  while i < n { x = await tools.noop({ i: i })? ; i = i + 1 }
  g = wait_signal("go")
  finish i
}
"""

PARKED_SOURCE = """
process approval(i: int) {
  decision = await tools.approve({ i: i })?
  x = await tools.noop({ i: i })?
  finish x
}
"""

TICK_SOURCE = """
process ticking(n: int) {
  i = 0
  while i < n { x = await tools.tick({ i: i })? ; i = i + 1 }
  finish i
}
"""

# The tool module beside ticking.lash (loaded by the CLI on run and on resume): one
# appended line per executed step, with the writer's pid, the wall-clock time and the
# CPU time its process has used so far (start-up included: what a loaded machine does
# not stretch).
TICK_TOOLS = '''
import os
import time

from lashflow import tool


@tool
async def tick(i: int) -> int:
    line = f"{os.getpid()} {i} {time.time():.6f} {sum(os.times()[:2]):.3f}\\n".encode()
    fd = os.open(os.environ["LASHFLOW_BENCH_TICKS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return i
'''


# ----------------------------------------------------------------------------- workers
# Each worker runs in its own subprocess (``--worker NAME --params JSON``) and prints
# one JSON object as its last line of stdout.


def _db_url(folder: str, name: str) -> str:
    return "sqlite:///" + os.path.join(folder, name)


@tool
async def noop(i: int) -> int:
    """The trivial step."""
    return i


@tool
async def approve(call: ToolCall, i: int) -> ToolResult:
    """Parks its run: out-of-band work (here: the benchmark) resolves the key later."""
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


def _tools() -> list[Any]:
    return [noop, approve]


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def worker_floor(p: dict[str, Any]) -> dict[str, Any]:
    """Raw aiosqlite: one INSERT + COMMIT per await (autocommit), WAL, synchronous=FULL."""
    import aiosqlite

    db = await aiosqlite.connect(os.path.join(p["dir"], "floor.db"), isolation_level=None)
    try:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        for _ in range(50):  # warm-up
            await db.execute("INSERT INTO t (v) VALUES (?)", ("warm",))
        n = p["commits"]
        started = time.perf_counter()
        for i in range(n):
            await db.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
        elapsed = time.perf_counter() - started
    finally:
        await db.close()
    return {"commits_per_s": n / elapsed}


async def worker_throughput(p: dict[str, Any]) -> dict[str, Any]:
    """lashflow: ``runs`` runs of ``steps`` steps, one after another, then ``concurrency``
    at once (each on its own fresh database file)."""
    from lashflow import Engine

    runs, steps, concurrency = p["runs"], p["steps"], p["concurrency"]
    out: dict[str, Any] = {}
    for shape, width in (("sequential", 1), ("concurrent", concurrency)):
        async with Engine(db=_db_url(p["dir"], f"{shape}.db"), tools=_tools()) as engine:
            warm = await engine.run(STEPS_SOURCE, input={"n": steps})  # compile, first use
            assert warm.status == "finished" and warm.result == steps, warm
            if width > 1:  # a long-lived engine's writer process (ADR 0050), started once
                await engine.store.start_process_writer()
            counts = _count_store_calls(engine.store)
            gate = asyncio.Semaphore(width)
            results: list[Any] = []

            async def one() -> None:
                async with gate:
                    outcome = await engine.run(STEPS_SOURCE, input={"n": steps})
                    results.append(outcome.result)

            started = time.perf_counter()
            cpu, loop_cpu = time.process_time(), time.thread_time()
            cpu += writer_cpu(engine.store)  # its writer process's work is the runs'
            if width == 1:
                for _ in range(runs):
                    await one()
            else:
                await asyncio.gather(*(one() for _ in range(runs)))
            elapsed = time.perf_counter() - started
            cpu = time.process_time() + writer_cpu(engine.store) - cpu
            loop_cpu = time.thread_time() - loop_cpu
            assert results == [steps] * runs, results[:5]
        out[shape] = {"steps_per_s": runs * steps / elapsed,
                      "cpu_us_per_step": cpu / (runs * steps) * 1e6,
                      # the event loop's thread alone (the rest is SQLite's writer: its
                      # thread, or its process once runs write at once, ADR 0050)
                      "loop_cpu_us_per_step": loop_cpu / (runs * steps) * 1e6,
                      "loop_busy": loop_cpu / elapsed,
                      "transactions_per_step": counts["transactions"] / (runs * steps),
                      "round_trips_per_step": _round_trips(counts) / (runs * steps)}
    return out


def _count_store_calls(store: Any) -> dict[str, int]:
    """Diagnostic only: count the SQLite store's transactions (each one fsync, as the
    store reports each, ``on_commit``) and its writer round trips: hops to the
    connection's thread plus groups written by the writer process (ADR 0050), which are
    the transactions that neither an inline commit nor the thread wrote (``_apply``).
    Round trips stay zero if a store has no such funnels."""
    counts = {"round_trips": 0, "transactions": 0, "applied": 0}
    told = store.on_commit

    def counting_commit(seconds: float, writes: int) -> None:  # every group, every path
        counts["transactions"] += 1
        if told is not None:
            told(seconds, writes)

    store.on_commit = counting_commit
    backend = getattr(store, "backend", store)  # the funnels are the backend's (ADR 0024)
    call, apply = getattr(backend, "_call", None), getattr(backend, "_apply", None)
    if call is None or apply is None:
        return counts

    async def counting_call(fn: Any, *args: Any) -> Any:
        counts["round_trips"] += 1
        return await call(fn, *args)

    def counting_apply(*args: Any, **options: Any) -> Any:
        counts["applied"] += 1
        return apply(*args, **options)

    backend._call, backend._apply = counting_call, counting_apply
    return counts


def _round_trips(counts: dict[str, int]) -> int:
    """Thread hops, plus the groups the writer process wrote."""
    return counts["round_trips"] + counts["transactions"] - counts["applied"]


async def worker_long(p: dict[str, Any]) -> dict[str, Any]:
    """One run of ``short`` steps and one of ``long`` steps (per-step time of each), then
    the long run resumed by a fresh engine: pure replay, it parks again on its signal."""
    from lashflow import Engine

    url = _db_url(p["dir"], "long.db")
    out: dict[str, Any] = {}
    async with Engine(db=url, tools=_tools()) as engine:
        warm = await engine.run(LONG_SOURCE, input={"n": 10})
        assert warm.status == "waiting", warm
        for label, n in (("short", p["short"]), ("long", p["long"])):
            started = time.perf_counter()
            outcome = await engine.run(LONG_SOURCE, input={"n": n}, run_id=f"long-{n}")
            elapsed = time.perf_counter() - started
            assert outcome.status == "waiting", outcome
            out[label] = {"steps": n, "seconds": elapsed, "us_per_step": elapsed / n * 1e6}
    async with Engine(db=url, tools=_tools()) as engine:
        started = time.perf_counter()
        outcome = await engine.resume(f"long-{p['long']}")
        out["resume_seconds"] = time.perf_counter() - started
        assert outcome.status == "waiting", outcome
        recorded = await engine.steps(f"long-{p['long']}")
        assert len(recorded) == p["long"], len(recorded)  # nothing ran again
    return out


async def worker_parked(p: dict[str, Any]) -> dict[str, Any]:
    """Park ``runs`` runs on completion keys, measure RSS, then complete a sample of keys
    one at a time and time each ``complete`` until the run has moved on."""
    from lashflow import Engine, RunStatus, ToolResult

    runs, concurrency = p["runs"], p["concurrency"]
    out: dict[str, Any] = {}
    async with Engine(db=_db_url(p["dir"], "parked.db"), tools=_tools()) as engine:
        warm = await engine.run(PARKED_SOURCE, input={"i": -1})
        assert warm.status == "waiting", warm
        gc.collect()
        out["rss_before_mib"] = _rss_mib()
        gate = asyncio.Semaphore(concurrency)
        keys: list[str] = []

        async def park(i: int) -> None:
            async with gate:
                outcome = await engine.run(PARKED_SOURCE, input={"i": i})
                assert outcome.status == "waiting", outcome
                keys.append(outcome.waiting[0].key)

        started = time.perf_counter()
        await asyncio.gather(*(park(i) for i in range(runs)))
        out["park_seconds"] = time.perf_counter() - started
        gc.collect()
        out["rss_parked_mib"] = _rss_mib()
        out["parked"] = len(keys)
        sample = random.Random(6).sample(keys, min(p["completions"], len(keys)))
        latencies = []
        for key in sample:
            started = time.perf_counter()
            status = await engine.complete(key, ToolResult.ok(True))
            latencies.append(time.perf_counter() - started)
            assert status is RunStatus.FINISHED, status
        out["complete_p50_ms"] = statistics.median(latencies) * 1e3
        out["complete_p90_ms"] = statistics.quantiles(latencies, n=10)[-1] * 1e3
        out["completions"] = len(latencies)
    return out


IMPORTS = ("import lashflow", "from lashflow import Engine, tool", "import lashflow.cli")

WORKERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "floor": worker_floor, "throughput": worker_throughput, "long": worker_long,
    "parked": worker_parked,
}


def run_worker(name: str, params: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """Run one worker in a fresh interpreter; its last stdout line is its JSON result."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--params",
         json.dumps(params)], capture_output=True, text=True, timeout=timeout, cwd=params["dir"])
    if done.returncode != 0:
        raise RuntimeError(f"worker {name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- in the parent


def bytecode_env(folder: str) -> dict[str, str]:
    """The environment for timed interpreter starts: bytecode cached (in the temp folder),
    as in any pip-installed package, and the parse cache there too (ADR 0040). Without it
    every start recompiles lashflow's ~60 modules from source (about 0.1 s), e.g. under
    ``PYTHONDONTWRITEBYTECODE=1``."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(folder, "pycache"),
               LASHFLOW_CACHE_DIR=os.path.join(folder, "parse-cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_time(statement: str, env: dict[str, str], trials: int) -> float:
    """Best wall time of ``statement`` in a fresh interpreter (interpreter start excluded)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    best = float("inf")
    for _ in range(trials + 1):  # the first one also writes the bytecode cache
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env=env)
        best = min(best, float(done.stdout.strip()))
    return best


def _read_ticks(path: Path) -> list[tuple[int, int, float, float]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4:
            rows.append((int(parts[0]), int(parts[1]), float(parts[2]), float(parts[3])))
    return rows


def kill_to_resume(folder: str, trial: int, kill_after: int,
                   base_env: dict[str, str]) -> tuple[float, float]:
    """``lashflow run`` a long process, SIGKILL it by pid once ``kill_after`` steps ran,
    ``lashflow resume`` it in a new process: seconds from the kill to the first step the
    resumed process executes (the first line its tool appends), and the CPU seconds the
    resumed process had used by then (user + system, in 10 ms ticks)."""
    work = Path(tempfile.mkdtemp(prefix=f"kill{trial}-", dir=folder))
    (work / "ticking.lash").write_text(TICK_SOURCE)
    (work / "ticking.py").write_text(TICK_TOOLS)
    ticks = work / "ticks.txt"
    env = dict(base_env, LASHFLOW_BENCH_TICKS=str(ticks))
    db = _db_url(str(work), "kill.db")
    run_id = f"kill-{trial}"
    cli = [sys.executable, "-m", "lashflow"]
    worker = subprocess.Popen(
        cli + ["run", str(work / "ticking.lash"), "--input", '{"n": 50000}', "--db", db,
               "--run-id", run_id], cwd=work, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    resumed: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 120
        while len(_read_ticks(ticks)) < kill_after:
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited early: {worker.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("worker made no progress")
            time.sleep(0.01)
        os.kill(worker.pid, signal.SIGKILL)
        killed_at = time.time()
        worker.wait()  # reaped: its pid is gone, so the lease is free at once
        resumed = subprocess.Popen(cli + ["resume", run_id, "--db", db], cwd=work, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            mine = [row for row in _read_ticks(ticks) if row[0] == resumed.pid]
            if mine:
                return mine[0][2] - killed_at, mine[0][3]
            if resumed.poll() is not None:
                raise RuntimeError(f"resume exited: {resumed.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the resumed run executed no step")
            time.sleep(0.0005)
    finally:
        for proc in (worker, resumed):
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def ensure_dbos_venv() -> Path:
    """The peer's own virtualenv (git-ignored); created with pip on first use."""
    python = DBOS_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {DBOS_VENV.relative_to(REPO)} with dbos=={DBOS_VERSION} ...",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(DBOS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"dbos=={DBOS_VERSION}"],
                       check=True)
    return python


def run_dbos(python: Path, folder: str, wal: bool, runs: int, steps: int,
             concurrency: int) -> dict[str, Any]:
    """One DBOS measurement in its own interpreter and on its own fresh SQLite file."""
    work = tempfile.mkdtemp(prefix="dbos-", dir=folder)
    command = [str(python), str(BENCH / "dbos_peer.py"), "--db", os.path.join(work, "dbos.sqlite"),
               "--runs", str(runs), "--steps", str(steps), "--concurrency", str(concurrency)]
    if wal:
        command.append("--wal")
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=work)
    if done.returncode != 0:
        raise RuntimeError(f"dbos_peer failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the table


@dataclass
class Row:
    metric: str
    ours: str
    peer: str = ""
    ratio: str = ""
    bar: str = ""
    verdict: str = ""


def check(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def print_table(rows: list[Row]) -> None:
    headers = Row("metric", "lashflow", "peer", "ratio", "bar", "pass/fail")
    table = [headers] + rows
    widths = [max(len(getattr(r, f)) for r in table)
              for f in ("metric", "ours", "peer", "ratio", "bar", "verdict")]

    def line(r: Row) -> str:
        cells = (r.metric, r.ours, r.peer, r.ratio, r.bar, r.verdict)
        return "  ".join(c.ljust(w) if i in (0, 4, 5) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def main() -> None:
    parser = argparse.ArgumentParser(description="Durable-run benchmarks.")
    parser.add_argument("--quick", action="store_true", help="scaled down (about a minute)")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS peer")
    parser.add_argument("--repeat", type=int, help="repetitions of each throughput figure")
    parser.add_argument("--json", metavar="FILE", help="also write every raw figure to FILE")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = asyncio.run(WORKERS[args.worker](json.loads(args.params)))
        print(json.dumps(result))
        return

    q = args.quick
    runs, steps, width = (50 if q else 200), 10, 50
    repeat = args.repeat or (1 if q else 3)
    short, long_ = (200, 2_000) if q else (1_000, 10_000)
    parked, completions = (1_000, 100) if q else (10_000, 500)
    kill_trials = 3
    dbos_python = None if args.no_dbos else ensure_dbos_venv()

    folder = tempfile.mkdtemp(prefix="lashflow-bench-")
    raw: dict[str, Any] = {"quick": q, "repeat": repeat, "load": os.getloadavg()}
    try:
        def sub(name: str) -> str:
            path = tempfile.mkdtemp(prefix=name + "-", dir=folder)
            return path

        def log(message: str) -> None:
            print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

        floors, ours, shipped, wal = [], [], [], []
        for rep in range(repeat):
            log(f"throughput, repetition {rep + 1}/{repeat}")
            floors.append(run_worker("floor", {"dir": sub("floor"), "commits": 2_000}))
            ours.append(run_worker("throughput", {"dir": sub("lashflow"), "runs": runs,
                                                  "steps": steps, "concurrency": width}))
            if dbos_python is not None:
                shipped.append(run_dbos(dbos_python, folder, False, runs, steps, width))
                wal.append(run_dbos(dbos_python, folder, True, runs, steps, width))
        raw.update(floor=floors, lashflow=ours, dbos_shipped=shipped, dbos_wal=wal)
        log(f"one run of {short:,} steps, one of {long_:,}, resume")
        long_run = run_worker("long", {"dir": sub("long"), "short": short, "long": long_})
        raw["long"] = long_run
        log("kill -> first resumed step")
        env = bytecode_env(folder)
        pairs = [kill_to_resume(folder, t, 300, env) for t in range(kill_trials)]
        kills = [wall for wall, _ in pairs]
        raw["kill_to_resume_s"] = kills
        raw["kill_to_resume_cpu_s"] = [cpu for _, cpu in pairs]
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):  # how this environment runs by default
            no_pyc = dict(os.environ,
                          LASHFLOW_CACHE_DIR=os.path.join(folder, "parse-cache-no-pyc"))
            pairs = [kill_to_resume(folder, 99 - t, 300, no_pyc) for t in range(kill_trials)]
            raw["kill_to_resume_no_pyc_s"] = [wall for wall, _ in pairs]
            raw["kill_to_resume_no_pyc_cpu_s"] = [cpu for _, cpu in pairs]
        raw["import_s"] = {s: import_time(s, env, 5) for s in IMPORTS}
        log(f"{parked:,} runs parked on completion keys")
        park = run_worker("parked", {"dir": sub("parked"), "runs": parked, "concurrency": width,
                                     "completions": completions}, timeout=900)
        raw["parked"] = park
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def best(items: list[dict[str, Any]], *path: str) -> float:
        values = []
        for item in items:
            for key in path:
                item = item[key]
            values.append(item)
        return max(values)  # type: ignore[type-var]

    seq = best(ours, "sequential", "steps_per_s")
    conc = best(ours, "concurrent", "steps_per_s")
    rows = [Row("floor: raw aiosqlite commits/s (1 INSERT+COMMIT per await, WAL, FULL)",
                f"{best(floors, 'commits_per_s'):,.0f}")]
    if wal:
        w_seq, w_conc = best(wal, "sequential", "steps_per_s"), best(wal, "concurrent", "steps_per_s")
        s_seq = best(shipped, "sequential", "steps_per_s")
        s_conc = best(shipped, "concurrent", "steps_per_s")
        rows += [
            Row(f"{runs} runs x {steps} steps, sequential: steps/s (peer DBOS+WAL)",
                f"{seq:,.0f}", f"{w_seq:,.0f}", f"{seq / w_seq:.1f}x", ">= 4x",
                check(seq >= 4 * w_seq)),
            Row("  same, peer DBOS as shipped (rollback journal)", f"{seq:,.0f}",
                f"{s_seq:,.0f}", f"{seq / s_seq:.1f}x"),
            Row(f"{runs} runs x {steps} steps, {width} at once: steps/s (peer DBOS+WAL)",
                f"{conc:,.0f}", f"{w_conc:,.0f}", f"{conc / w_conc:.1f}x", ">= 30x",
                check(conc >= 30 * w_conc)),
            Row("  same, peer DBOS as shipped (rollback journal)", f"{conc:,.0f}",
                f"{s_conc:,.0f}", f"{conc / s_conc:.1f}x"),
        ]
    else:
        rows += [Row(f"{runs} runs x {steps} steps, sequential: steps/s", f"{seq:,.0f}"),
                 Row(f"{runs} runs x {steps} steps, {width} at once: steps/s", f"{conc:,.0f}")]
    rows.append(Row(f"{width} at once vs lashflow sequential", f"{conc:,.0f}", f"{seq:,.0f}",
                    f"{conc / seq:.1f}x", "> 1x", check(conc > seq)))
    rows.append(Row(f"{width} at once: steps/s", f"{conc:,.0f}", bar=">= 15,000",
                    verdict=check(conc >= 15_000)))
    rows.append(Row(f"CPU per step, sequential / {width} at once (us, with the writer's)",
                    f"{min(o['sequential']['cpu_us_per_step'] for o in ours):.0f} / "
                    f"{min(o['concurrent']['cpu_us_per_step'] for o in ours):.0f}"))
    fastest = max(ours, key=lambda o: o["concurrent"]["steps_per_s"])["concurrent"]
    rows.append(Row(f"  {width} at once: the loop's thread / the writer (us per step)",
                    f"{fastest['loop_cpu_us_per_step']:.0f} / "
                    f"{fastest['cpu_us_per_step'] - fastest['loop_cpu_us_per_step']:.0f}"))
    rows.append(Row(f"  {width} at once: the loop's thread busy (% of the wall time)",
                    f"{fastest['loop_busy'] * 100:.0f}%"))
    rows.append(Row(f"fsync'd transactions per step, sequential / {width} at once",
                    f"{ours[0]['sequential']['transactions_per_step']:.2f} / "
                    f"{ours[0]['concurrent']['transactions_per_step']:.2f}"))
    rows.append(Row(f"writer round trips per step, sequential / {width} at once",
                    f"{ours[0]['sequential']['round_trips_per_step']:.2f} / "
                    f"{ours[0]['concurrent']['round_trips_per_step']:.2f}"))
    per_short, per_long = long_run["short"]["us_per_step"], long_run["long"]["us_per_step"]
    rows += [
        Row(f"time per step: {long_:,}-step run vs {short:,}-step run (us)",
            f"{per_long:.0f}", f"{per_short:.0f}", f"{per_long / per_short:.2f}x", "<= 1.1x",
            check(per_long <= 1.1 * per_short)),
        Row(f"resume of the recorded {long_:,}-step run, replay only (s)",
            f"{long_run['resume_seconds']:.3f}", bar="< 1 s",
            verdict=check(long_run["resume_seconds"] < 1.0)),
        Row(f"kill -> first resumed step (s, median of {len(kills)})",
            f"{statistics.median(kills):.3f}", bar="< 0.15 s",
            verdict=check(statistics.median(kills) < 0.15)),
        Row("  CPU of the resumed process by then (s, median)",
            f"{statistics.median(raw['kill_to_resume_cpu_s']):.2f}"),
        *[Row(f"`{statement}` (ms, best of 5)", f"{seconds * 1e3:.1f}")
          for statement, seconds in raw["import_s"].items()],
        Row(f"{park['parked']:,} runs parked on keys: worker RSS (MiB)",
            f"{park['rss_parked_mib']:.0f}", bar="< 100 MiB",
            verdict=check(park["rss_parked_mib"] < 100)),
        Row(f"complete -> run moves on: p50 over {park['completions']} (ms)",
            f"{park['complete_p50_ms']:.1f}", bar="p50 < 50 ms",
            verdict=check(park["complete_p50_ms"] < 50)),
        Row("  p90 (ms)", f"{park['complete_p90_ms']:.1f}"),
    ]
    print(f"lashflow durable benchmarks{' (--quick: scaled down)' if q else ''}; "
          f"best of {repeat} for throughput; SQLite WAL, synchronous=FULL; load average "
          f"{raw['load'][0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
          f"{os.cpu_count()} cores")
    print_table(rows)
    if wal:
        print(f"DBOS {wal[0]['dbos_version']}: faster API per shape -- sequential "
              f"{max(wal, key=lambda r: r['sequential']['steps_per_s'])['sequential']['api']}, "
              f"concurrent {max(wal, key=lambda r: r['concurrent']['steps_per_s'])['concurrent']['api']}")
    if "kill_to_resume_no_pyc_s" in raw:
        print(f"kill -> first resumed step without a bytecode cache (PYTHONDONTWRITEBYTECODE=1, "
              f"as this environment sets it), median of {kill_trials}: "
              f"{statistics.median(raw['kill_to_resume_no_pyc_s']):.3f} s (CPU "
              f"{statistics.median(raw['kill_to_resume_no_pyc_cpu_s']):.2f} s; goal < 0.25 s)")
    print(f"parking {park['parked']:,} runs took {park['park_seconds']:.1f} s; "
          f"RSS before parking {park['rss_before_mib']:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
