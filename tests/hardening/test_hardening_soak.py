"""Soak: many runs through `lashflow worker` processes SIGKILLed at random moments.

Each run calls a slow tool, a flaky tool (retried), a concurrent batch, a durable
sleep, a pending tool resolved by a resolver task in this process (first by key,
while no worker may be alive), a non-idempotent tool, a loop of calls, and starts and
awaits a child run. The soak runs one worker on SQLite killed every 1-2 s; the crash
campaign (slow) runs three workers on SQLite and on PostgreSQL, one of them killed every
0.05-0.15 s, feeding new runs until at least ``LASHFLOW_CAMPAIGN_KILLS`` (200) SIGKILLs
landed. A killed worker is restarted at once; the soak ends when every run is
finished. Killed during the non-idempotent tool, a run stops in needs_attention; the
operator loop (this process) retries it with ``retry_interrupted`` as an operator would
with `lashflow resume RUN --retry-interrupted`.

Then it checks that nothing committed was lost and nothing ran twice:
* ``lashflow.store.check.check_store``: outcomes, attempts 1..n without gaps, at most
  one final attempt, nothing unsettled or written after a run ended;
* ``replay_problems`` for every run: the journal holds exactly the program's effects,
  in effect order, with the same arguments, and replaying it gives the stored result;
* the tools' own execution log (written with O_APPEND by each execution, so it survives
  SIGKILL) against the journal: every executed attempt number is a recorded attempt;
  an attempt runs again only in another process after a SIGKILL; the non-idempotent
  tool runs each attempt at most once; every recorded outcome was produced by exactly
  one execution (its nonce), never twice.

``LASHFLOW_SOAK_RUNS`` sets the number of runs (default 200, for CI);
``LASHFLOW_SOAK_REPORT`` names a JSON file that receives the figures (each test adds its
name to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, AsyncIterator

import asyncpg
import pytest

from hardening_support import ROOT, cli_env, replay_problems
from lashflow import CompletionError, Engine, ToolResult
from lashflow.store import open_store
from lashflow.store.check import check_store
from pg_support import postgres_base_url, with_query

RUNS = int(os.environ.get("LASHFLOW_SOAK_RUNS", "200"))
DEADLINE = 120 + RUNS * 0.6  # seconds; generous, the default takes far less
CAMPAIGN_KILLS = int(os.environ.get("LASHFLOW_CAMPAIGN_KILLS", "200"))
CAMPAIGN_DEADLINE = 600 + CAMPAIGN_KILLS * 2.0

PROCESS = """
process job(n: int) {
  a = await tools.slow({ n: n })?
  f = await tools.flaky({ n: n })
  b = await [tools.slow({ n: n + 1 }), tools.flaky({ n: n + 2 })]
  sleep for "30ms"
  ok = await tools.approve({ n: n })?
  c = await tools.charge({ n: n })?
  total = 0
  for i in range(3) {
    r = await tools.slow({ n: i })?
    total = total + r.n
  }
  h = start kid(n: n)
  k = await h
  finish { n: n, a: a.n, f: f.ok, b: b[0].ok, approved: ok, charged: c.n, total: total,
           kid: k.value }
}

process kid(n: int) {
  r = await tools.slow({ n: n })?
  finish r.n
}
"""

TOOLS = '''
import asyncio, json, os, random, uuid
from lashflow import PendingCompletion, RetryPolicy, ToolCall, ToolResult, tool

LOG = os.environ["SOAK_LOG"]
PROCESS = uuid.uuid4().hex  # this process, unlike its pid, is never reused by another


def executed(call, name):
    """One line per execution, appended atomically (survives SIGKILL of this process)."""
    nonce = uuid.uuid4().hex
    line = json.dumps({"run": call.context.run_id, "step": call.context.step_key,
                       "attempt": call.context.attempt, "tool": name, "pid": os.getpid(),
                       "process": PROCESS, "nonce": nonce}) + "\\n"
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return nonce


@tool
async def slow(call: ToolCall) -> ToolResult:
    nonce = executed(call, "slow")
    await asyncio.sleep(random.uniform(0.0, 0.04))
    return ToolResult.ok({"n": call.input["n"], "nonce": nonce})


@tool(retry=RetryPolicy.safe(max_attempts=4, base_delay=0.01, max_delay=0.05))
async def flaky(call: ToolCall) -> ToolResult:
    nonce = executed(call, "flaky")
    await asyncio.sleep(random.uniform(0.0, 0.01))
    if random.random() < 0.4:
        return ToolResult.retryable_failure(f"upstream 503 ({nonce})")
    return ToolResult.ok({"n": call.input["n"], "nonce": nonce})


@tool
async def approve(call: ToolCall) -> ToolResult:
    executed(call, "approve")
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


@tool(idempotent=False)
async def charge(call: ToolCall) -> ToolResult:
    nonce = executed(call, "charge")
    await asyncio.sleep(random.uniform(0.0, 0.005))
    return ToolResult.ok({"n": call.input["n"], "nonce": nonce})
'''


class Soak:
    """The folder, the database, the worker subprocesses, the runs and the figures.
    ``gap``: seconds between two SIGKILLs (uniform in the range); ``min_kills``: new runs
    are fed in until that many kills landed."""

    def __init__(self, folder: Path, url: str, *, workers: int = 1,
                 gap: tuple[float, float] = (1.0, 2.0), min_kills: int = 0,
                 runs: int = RUNS, deadline: float = DEADLINE) -> None:
        self.folder = folder
        self.url = url
        self.log = folder / "executions.log"
        self.env = cli_env(self.url)
        self.env["SOAK_LOG"] = str(self.log)
        os.environ["SOAK_LOG"] = str(self.log)  # the operator loads the same tools here
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * workers
        self.gap, self.min_kills, self.runs, self.deadline = gap, min_kills, runs, deadline
        self.killed_pids: set[int] = set()
        self.figures: Counter[str] = Counter()
        self._worked: set[int] = set()  # pids of workers that executed a tool
        self._read = 0  # bytes of the executions log read so far

    def has_worked(self, pid: int) -> bool:
        """Whether the worker ``pid`` executed a tool yet (the log is read on from where
        it was left: each line once)."""
        if pid not in self._worked and self.log.exists():
            with self.log.open("rb") as log:
                log.seek(self._read)
                data = log.read()
            complete = data[: data.rfind(b"\n") + 1]
            self._read += len(complete)
            self._worked.update(entry["pid"] for entry in log_entries(complete))
        return pid in self._worked

    def start_worker(self, slot: int) -> None:
        self.workers[slot] = subprocess.Popen(
            [sys.executable, "-m", "lashflow", "worker", "--concurrency", "32", "--poll", "0.05",
             "--lease-ttl", "3", "--tools", str(self.folder / "soak.py")],
            env=self.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.figures["worker_starts"] += 1

    def kill_worker(self, slot: int) -> None:
        worker = self.workers[slot]
        assert worker is not None
        if worker.poll() is not None:  # it died on its own: that is a failure
            err = worker.stderr.read().decode() if worker.stderr else ""
            raise AssertionError(f"a worker exited by itself ({worker.returncode}): {err}")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        if worker.stderr is not None:
            worker.stderr.close()
        self.killed_pids.add(worker.pid)
        self.figures["sigkills"] += 1

    def stop_workers(self) -> None:
        """The end of the soak (not counted as faults)."""
        for slot, worker in enumerate(self.workers):
            if worker is not None and worker.poll() is None:
                self.kill_worker(slot)
                self.figures["sigkills"] -= 1


async def _killer(soak: Soak, done: asyncio.Event) -> None:
    """Kills a random worker at a random moment, once it has executed a tool since it
    started: a gap shorter than a worker's start-up (0.05 s against a second or more on a
    loaded machine) killed every worker before it did anything, and the campaign made
    no progress at all. So each kill lands on a worker at work."""
    rng = random.Random(7)
    for slot in range(len(soak.workers)):
        soak.start_worker(slot)
    while not done.is_set():
        try:
            await asyncio.wait_for(done.wait(), rng.uniform(*soak.gap))
        except asyncio.TimeoutError:
            slot = rng.randrange(len(soak.workers))
            worker = soak.workers[slot]
            if worker is not None and worker.poll() is None and not soak.has_worked(worker.pid):
                soak.figures["kills_deferred"] += 1
                continue
            soak.kill_worker(slot)
            soak.start_worker(slot)


async def _resolver_and_operator(soak: Soak, engine: Engine, done: asyncio.Event) -> None:
    """Resolves every completion key it sees (n * 10), retries runs stopped on an
    interrupted non-idempotent attempt and, until ``min_kills`` SIGKILLs landed, keeps a
    backlog of new runs; ends when every run (and child) is finished."""
    resolved: set[str] = set()
    started = time.monotonic()
    while True:
        runs = await engine.store.list_runs()
        by_status = Counter(r.status for r in runs)
        parents = [r for r in runs if r.parent_run_id is None]
        if soak.figures["sigkills"] < soak.min_kills:
            unfinished = sum(1 for r in parents if r.status != "finished")
            for n in range(soak.runs, soak.runs + max(0, 40 - unfinished)):
                await engine.create(soak.folder / "soak.lash", "job", input={"n": n},
                                    run_id=f"soak-{n:05d}")
                soak.runs += 1
        elif len(parents) == soak.runs and by_status.get("finished", 0) == len(runs):
            done.set()
            return
        assert time.monotonic() - started < soak.deadline, f"not finished in time: {by_status}"
        for run in runs:
            if run.status == "failed":
                raise AssertionError(f"run {run.run_id} failed: {run.error}")
            if run.status == "needs_attention":
                assert run.error is not None and "--retry-interrupted" in run.error["message"], run.error
                try:
                    await engine.resume(run.run_id, retry_interrupted=True)
                    soak.figures["operator_retries"] += 1
                except Exception as exc:  # the worker got there first: next round
                    if getattr(exc, "code", None) != "run_busy":
                        raise
            for wait in run.waiting:
                key = wait.get("key")
                if run.status == "waiting" and key and key not in resolved:
                    try:
                        await engine.complete(key, ToolResult.ok(run.input["n"] * 10), resume=False)
                        soak.figures["keys_resolved"] += 1
                    except CompletionError as exc:
                        assert exc.code == "completion_already_resolved", exc.code
                    resolved.add(key)
        await asyncio.sleep(0.05)


def log_entries(data: bytes) -> list[dict[str, Any]]:
    """The executions log's entries. A tool's line is one ``write``, but a SIGKILL can land
    between the two pages a line crosses, leaving the first part of it glued to the next
    line. That torn part is an execution by a process killed inside its tool (so its step
    was not recorded by it) and is left out; the whole line after it is kept."""
    entries = []
    for line in data.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            entries.append(json.loads(line[line.rindex(b'{"run": '):]))
    return entries


def _executions(soak: Soak) -> dict[tuple[str, str], list[dict[str, Any]]]:
    by_step: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for entry in log_entries(soak.log.read_bytes()):
        by_step[(entry["run"], entry["step"])].append(entry)
    return by_step


async def _check(soak: Soak, engine: Engine) -> list[str]:
    """Everything the module doc promises; returns the problems found."""
    problems = [str(p) for p in await check_store(engine.store)]
    executions = _executions(soak)
    seen_steps: set[tuple[str, str]] = set()
    for run in await engine.store.list_runs():
        n = run.input["n"]
        problems += [str(p) for p in await replay_problems(engine.store, run.run_id)]
        if run.parent_run_id is not None:  # a kid: its slow call's n
            if run.result != n:
                problems.append(f"{run.run_id}: child result {run.result}")
        else:
            expected = {"n": n, "a": n, "approved": n * 10, "charged": n, "total": 3, "kid": n}
            if {k: run.result.get(k) for k in expected} != expected:
                problems.append(f"{run.run_id}: result {run.result}")
        steps, attempts = await engine.store.load_journal(run.run_id)
        recorded: dict[str, list[int]] = defaultdict(list)
        for attempt in attempts:
            recorded[attempt.step_key].append(attempt.attempt)
        for step in steps:
            if step.kind != "tool":
                continue
            seen_steps.add((run.run_id, step.step_key))
            soak.figures["tool_steps"] += 1
            soak.figures["attempts"] += len(recorded[step.step_key])
            runs_of = executions.get((run.run_id, step.step_key), [])
            soak.figures["executions"] += len(runs_of)
            where = f"{run.run_id}/{step.step_key} ({step.tool})"
            numbers = set(recorded[step.step_key])
            per_attempt: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for entry in runs_of:
                per_attempt[entry["attempt"]].append(entry)
            for number, group in per_attempt.items():
                if number not in numbers:
                    problems.append(f"{where}: attempt {number} ran but is not recorded")
                # by process token, not pid: on a busy machine pids wrap around and a
                # later worker may get a killed one's pid
                processes = [e["process"] for e in group]
                pids = [e["pid"] for e in group]
                if len(set(processes)) != len(processes):
                    problems.append(f"{where}: attempt {number} ran twice in one process")
                if any(pid not in soak.killed_pids for pid in pids[:-1]):
                    problems.append(f"{where}: attempt {number} ran again without a crash")
                if len(group) > 1:
                    soak.figures["reexecuted_after_kill"] += len(group) - 1
                if step.tool == "tools.charge" and len(group) > 1:
                    problems.append(f"{where}: the non-idempotent tool ran attempt {number} twice")
            value = (step.outcome or {}).get("value")
            nonce = value.get("nonce") if isinstance(value, dict) else None
            message = (step.outcome or {}).get("message") or ""
            if nonce is None and "(" in message:
                nonce = message.rsplit("(", 1)[1].rstrip(")")
            if step.tool != "tools.approve":
                producers = [e for e in runs_of if e["nonce"] == nonce]
                if len(producers) != 1:
                    problems.append(f"{where}: the recorded outcome came from {len(producers)} "
                                    "executions")
                elif producers[0]["attempt"] != max(numbers, default=0):
                    problems.append(f"{where}: the outcome is not from the last attempt")
    orphans = set(executions) - seen_steps
    if orphans:
        problems.append(f"{len(orphans)} executed steps are missing from the journal: "
                        f"{sorted(orphans)[:3]}")
    return problems


async def _soak(soak: Soak, name: str) -> dict[str, Any]:
    """Create the runs, kill and restart workers until they are all finished, check."""
    (soak.folder / "soak.lash").write_text(PROCESS)
    (soak.folder / "soak.py").write_text(TOOLS)
    started = time.monotonic()
    async with Engine(db=soak.url) as engine:
        for n in range(soak.runs):
            await engine.create(soak.folder / "soak.lash", "job", input={"n": n},
                                run_id=f"soak-{n:05d}")
        done = asyncio.Event()
        killer = asyncio.create_task(_killer(soak, done))
        resolver = asyncio.create_task(_resolver_and_operator(soak, engine, done))
        try:
            # a killer that fails ends the soak now, not at its deadline
            await asyncio.wait([killer, resolver], return_when=asyncio.FIRST_COMPLETED)
            if killer.done() and not resolver.done():
                resolver.cancel()
                killer.result()  # its error
            await resolver
        finally:
            done.set()
            await killer
            soak.stop_workers()
        elapsed = time.monotonic() - started
        problems = await _check(soak, engine)
        runs = await engine.store.list_runs()
    parents = [r for r in runs if r.parent_run_id is None]
    finished = sum(1 for r in parents if r.status == "finished")
    soak.figures.update(runs=len(parents), child_runs=len(runs) - len(parents), finished=finished,
                        lost=len(parents) - finished, workers=len(soak.workers),
                        seconds=round(elapsed))
    figures = dict(soak.figures)
    print(f"\n{name} figures:", json.dumps(figures, sort_keys=True))
    report = os.environ.get("LASHFLOW_SOAK_REPORT")
    if report:
        path = Path(report)
        known = json.loads(path.read_text()) if path.exists() else {}
        known[name] = figures
        path.write_text(json.dumps(known, indent=2, sort_keys=True))
    assert problems == [], problems[:20]
    assert figures["lost"] == 0 and figures["finished"] == soak.runs
    return figures


async def test_soak_with_random_sigkills(tmp_path: Path) -> None:
    figures = await _soak(Soak(tmp_path, f"sqlite:///{tmp_path / 'soak.db'}"), "soak")
    assert figures["sigkills"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_crash_campaign_three_workers(tmp_path: Path, backend: str) -> None:
    """At least CAMPAIGN_KILLS SIGKILLs at random moments among three workers, on both
    backends: nothing recorded runs again, every run finishes with its expected result."""
    async with _database(tmp_path, backend) as url:
        figures = await _soak(Soak(tmp_path, url, workers=3, gap=(0.05, 0.15),
                                   min_kills=CAMPAIGN_KILLS, runs=60,
                                   deadline=CAMPAIGN_DEADLINE), f"campaign-{backend}")
    assert figures["sigkills"] >= CAMPAIGN_KILLS


@contextlib.asynccontextmanager
async def _database(tmp_path: Path, backend: str) -> AsyncIterator[str]:
    """A fresh SQLite file (WAL switched on before the workers start), or a fresh schema on
    the test PostgreSQL server, dropped afterwards."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'campaign.db'}"
        async with open_store(url):
            pass
        yield url
        return
    base = postgres_base_url()
    admin = await asyncpg.connect(base, timeout=10)
    schema = f"lashflow_campaign_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        yield with_query(base, search_path=schema, pool_size="5")
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


BLOCKING = '''
import os, time
from pathlib import Path
from lashflow import ToolCall, ToolResult, tool


@tool(idempotent=False)
async def pay(call: ToolCall) -> ToolResult:
    marker = Path(os.environ["PAY_MARKER"])
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)  # killed here
    return ToolResult.ok(call.context.attempt)
'''


def test_an_interrupted_attempt_is_journaled_as_interrupted(tmp_path: Path) -> None:
    """Found by the soak's checker: after `resume --retry-interrupted` the
    attempt a SIGKILL cut short shows `interrupted`, not `started` forever."""
    (tmp_path / "pay.lash").write_text("x = await tools.pay({})?\nfinish x")
    (tmp_path / "pay.py").write_text(BLOCKING)
    env = cli_env(f"sqlite:///{tmp_path / 'pay.db'}")
    env["PAY_MARKER"] = str(tmp_path / "marker")
    proc = subprocess.Popen([sys.executable, "-m", "lashflow", "run", str(tmp_path / "pay.lash"),
                             "--run-id", "pay"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (tmp_path / "marker").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    run = [sys.executable, "-m", "lashflow", "resume", "pay", "--json"]
    stuck = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert json.loads(stuck.stdout)["status"] == "needs_attention"
    retried = subprocess.run(run + ["--retry-interrupted"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert json.loads(retried.stdout)["result"] == 2, retried.stdout + retried.stderr
    shown = subprocess.run([sys.executable, "-m", "lashflow", "show", "pay", "--json"], env=env,
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    [step] = json.loads(shown.stdout)["steps"]
    assert [a["status"] for a in step["attempt_log"]] == ["interrupted", "ok"], step
