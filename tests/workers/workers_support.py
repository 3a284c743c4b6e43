"""What the worker tests share: worker processes, the side-effect log, database checks.

Workers are real ``python -m lashflow worker`` processes. Each one is started here and
stopped (SIGTERM, then SIGKILL if it hangs) by its own pid only. The tools in
``worker_tools.py`` append one line per call to a log file, and the tests count those
lines against the journal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from lashflow import Engine
from lashflow.store import RunRecord, StepRecord, Store, open_store

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOOLS = HERE / "worker_tools.py"
FIVE = HERE / "five.lash"
PARKED = HERE / "parked.lash"
FANOUT = HERE / "fanout.lash"
GATED = HERE / "gated.lash"
ELSEWHERE = HERE / "elsewhere.py"
COMPLETER = HERE / "completer.py"


@dataclass(frozen=True, slots=True)
class Db:
    """The test's database: ``url`` for workers and clients (lashflow options included),
    ``raw_url`` for a plain driver connection, ``name`` of the backend."""

    name: str
    url: str
    raw_url: str = ""


def scaled(name: str, default: int) -> int:
    """A count the suite may be run with at another size (``LASHFLOW_WORKERS_<NAME>``)."""
    return int(os.environ.get(f"LASHFLOW_WORKERS_{name.upper()}", default))


def child_env(log: Path) -> dict[str, str]:
    """Environment of a lashflow subprocess: this checkout importable, the tools' log."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["LASHFLOW_WORKERS_LOG"] = str(log)
    env["PYTHONUNBUFFERED"] = "1"
    for name in ("LASHFLOW_DB", "LASHFLOW_LEASE_TTL"):
        env.pop(name, None)
    return env


# --------------------------------------------------------------------------- the log


@dataclass(frozen=True, slots=True)
class Line:
    """One tool call as the tool saw it."""

    pid: int
    run_id: str
    step: str
    tag: str
    at: float
    extra: str


def read_log(path: Path) -> list[Line]:
    if not path.exists():
        return []
    lines = []
    for text in path.read_text().splitlines():
        pid, key, tag, at, *extra = text.split(" ")
        run_id, step = key.split("/", 1)
        lines.append(Line(int(pid), run_id, step, tag, float(at), extra[0] if extra else ""))
    return lines


def executions(lines: list[Line]) -> dict[tuple[str, str], list[Line]]:
    """Each (run, step) and the calls that ran it, in log order."""
    found: dict[tuple[str, str], list[Line]] = defaultdict(list)
    for line in lines:
        found[(line.run_id, line.step)].append(line)
    return found


# --------------------------------------------------------------------------- workers


class Fleet:
    """The worker processes of one test. Never stops a process it did not start."""

    def __init__(self, tmp_path: Path, db_url: str, log: Path) -> None:
        self.tmp_path = tmp_path
        self.db_url = db_url
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: dict[int, str] = {}

    def start(self, *, concurrency: int = 32, poll: float = 0.5, lease_ttl: float = 30.0,
              tools: bool = True, host: str | None = None) -> subprocess.Popen[bytes]:
        """``host``: the worker believes it runs on that machine (``elsewhere.py``)."""
        name = f"worker{len(self.procs)}"
        command = [sys.executable, "-m", "lashflow"] if host is None \
            else [sys.executable, str(ELSEWHERE), host]
        args = [*command, "worker", "--db", self.db_url,
                "--concurrency", str(concurrency), "--poll", str(poll),
                "--lease-ttl", str(lease_ttl), *(["--tools", str(TOOLS)] if tools else [])]
        with open(self.tmp_path / f"{name}.out", "wb") as out, \
                open(self.tmp_path / f"{name}.err", "wb") as err:
            proc = subprocess.Popen(args, env=child_env(self.log), stdout=out, stderr=err,
                                    cwd=self.tmp_path)
        self.procs.append(proc)
        self.names[proc.pid] = name
        return proc

    def output(self, proc: subprocess.Popen[bytes]) -> tuple[str, str]:
        name = self.names[proc.pid]
        return ((self.tmp_path / f"{name}.out").read_text(errors="replace"),
                (self.tmp_path / f"{name}.err").read_text(errors="replace"))

    async def ready(self, timeout: float = 60.0) -> None:
        """Until every running worker has printed its banner (opened the store)."""
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            while "polling every" not in self.output(proc)[1]:
                self.check_alive()
                assert time.monotonic() < deadline, f"{self.names[proc.pid]} never got ready"
                await asyncio.sleep(0.05)

    def check_alive(self, *, except_: tuple[subprocess.Popen[bytes], ...] = ()) -> None:
        for proc in self.procs:
            if proc not in except_ and proc.poll() is not None:
                out, err = self.output(proc)
                raise AssertionError(f"{self.names[proc.pid]} exited with {proc.returncode}:\n"
                                     f"{err[-3000:]}")

    def kill(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        os.kill(proc.pid, sig)
        if sig == signal.SIGKILL:
            proc.wait(timeout=10)  # reap it: a zombie pid would still look alive to some

    def stop(self, timeout: float = 30.0) -> dict[str, int]:
        """SIGTERM every live worker (graceful drain), SIGKILL the ones that hang."""
        live = [proc for proc in self.procs if proc.poll() is None]
        for proc in live:
            os.kill(proc.pid, signal.SIGCONT)  # a paused one could not drain
            os.kill(proc.pid, signal.SIGTERM)
        codes = {}
        for proc in live:
            try:
                codes[self.names[proc.pid]] = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                codes[self.names[proc.pid]] = proc.wait(timeout=10)
        return codes


# --------------------------------------------------------------------------- runs


async def create_runs(db_url: str, source: Path, inputs: list[dict[str, Any]],
                      prefix: str, process: str | None = None, tools: Path = TOOLS) -> list[str]:
    """Submit runs (queued) through the Python API, as ``lashflow submit`` does."""
    ids = []
    async with Engine(db=db_url, modules=[str(tools)]) as engine:
        for index, data in enumerate(inputs):
            run = await engine.create(source, process, input=data, run_id=f"{prefix}{index:05d}")
            ids.append(run.run_id)
    return ids


async def wait_for(check: Callable[[], Awaitable[bool]], fleet: Fleet, timeout: float,
                   what: str, *, pause: float = 0.05, dead_ok: tuple[Any, ...] = (),
                   helpers: tuple[subprocess.Popen[bytes], ...] = ()) -> None:
    """Poll ``check`` until true; fail at once if a worker (or a helper process) died."""
    deadline = time.monotonic() + timeout
    while not await check():
        fleet.check_alive(except_=dead_ok)
        for helper in helpers:
            assert helper.poll() in (None, 0), f"helper {helper.args} exited {helper.returncode}"
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        await asyncio.sleep(pause)


async def statuses(store: Store) -> Counter[str]:
    return Counter(run.status for run in await store.list_runs())


async def wait_all(store: Store, fleet: Fleet, count: int, status: str, timeout: float, *,
                   dead_ok: tuple[Any, ...] = (),
                   helpers: tuple[subprocess.Popen[bytes], ...] = ()) -> None:
    last: list[Counter[str]] = [Counter()]

    async def done() -> bool:
        last[0] = await statuses(store)
        return last[0][status] == count
    try:
        await wait_for(done, fleet, timeout, f"{count} runs {status}", pause=0.1,
                       dead_ok=dead_ok, helpers=helpers)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; statuses: {dict(last[0])}") from None


async def journals(db_url: str) -> tuple[dict[str, RunRecord], dict[str, list[StepRecord]],
                                         dict[str, list[Any]]]:
    """Every run with its journal steps and attempts (one store, read after the fact)."""
    async with open_store(db_url) as store:
        runs = {run.run_id: run for run in await store.list_runs()}
        steps, attempts = {}, {}
        for run_id in runs:
            steps[run_id], attempts[run_id] = await store.load_journal(run_id)
    return runs, steps, attempts


def check_journal(steps: list[StepRecord], attempts: list[Any]) -> list[str]:
    """The run's tool step keys, after checking the journal holds each step once, in
    order, done, with exactly one final attempt."""
    keys = [step.step_key for step in steps]
    assert len(keys) == len(set(keys)), f"a step recorded twice: {keys}"
    seqs = [step.seq for step in steps]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"seq not in order: {seqs}"
    tool_keys = [step.step_key for step in steps if step.kind == "tool"]
    assert all(step.status == "done" for step in steps if step.kind == "tool"), steps
    per_step = Counter(attempt.step_key for attempt in attempts)
    for key in tool_keys:
        assert per_step[key] >= 1, f"step {key} has no attempt"
    finals = Counter(attempt.step_key for attempt in attempts if attempt.status == "ok")
    assert all(finals[key] == 1 for key in tool_keys), f"final attempts: {finals}"
    return tool_keys


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    cut = statistics.quantiles(ordered, n=100) if len(ordered) > 1 else ordered * 99
    return {"p50": statistics.median(ordered), "p90": cut[89], "max": ordered[-1]}
