"""A real crash: SIGKILL a worker during a retry delay (or inside an attempt) and resume.

The worker is a subprocess with a small SQLite-backed AttemptJournal; the test kills it
by pid when it writes a marker file, then runs it again: the attempt number comes from
the journal, so the re-run continues with the next attempt instead of starting over.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent('''
    import asyncio, json, os, sqlite3, sys

    from lashflow.tools import CallEnv, RetryPolicy, ToolCall, ToolOutcome, ToolRegistry, ToolResult, tool
    from lashflow.tools import run_attempts
    from lashflow.tools.clock import RealClock

    DB, MARKER, LOG, MODE = sys.argv[1:5]


    class SqliteJournal:
        """One row per (step, attempt); autocommit, so every write is durable on return."""

        def __init__(self, path):
            self.db = sqlite3.connect(path, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("CREATE TABLE IF NOT EXISTS attempts (step TEXT, attempt INTEGER, started REAL,"
                            " durable INTEGER, outcome TEXT, PRIMARY KEY (step, attempt))")

        async def attempt_started(self, step_key, attempt, at, *, durable):
            self.db.execute("INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, NULL)",
                            (step_key, attempt, at, int(durable)))

        async def attempt_finished(self, step_key, attempt, outcome):
            self.db.execute(
                "INSERT INTO attempts (step, attempt, outcome) VALUES (?, ?, ?) "
                "ON CONFLICT (step, attempt) DO UPDATE SET outcome = excluded.outcome",
                (step_key, attempt, json.dumps(outcome.to_json())))

        def last(self, step_key):
            return self.db.execute("SELECT attempt, outcome FROM attempts WHERE step = ? ORDER BY attempt DESC"
                                   " LIMIT 1", (step_key,)).fetchone()


    class MarkerClock(RealClock):
        async def sleep(self, seconds):
            if MODE == "delay":
                with open(MARKER, "w") as f:
                    f.write(str(seconds))
            await asyncio.sleep(seconds)


    @tool(retry=RetryPolicy.safe(max_attempts=5, base_delay=30.0, max_delay=60.0))
    async def fragile(call: ToolCall) -> ToolResult:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {call.context.attempt}\\n")
        if call.context.attempt == 1:
            if MODE == "attempt":
                with open(MARKER, "w") as f:
                    f.write("in attempt")
                await asyncio.sleep(3600)
            return ToolResult.retryable_failure("first attempt fails")
        return ToolResult.ok({"attempt": call.context.attempt, "key": call.context.idempotency_key})


    async def main():
        journal = SqliteJournal(DB)
        last = journal.last("s:0")
        if last is not None and last[1] is not None and ToolOutcome.from_json(json.loads(last[1])).final:
            print(last[1])  # recorded: replay, never call the tool again
            return
        first = 1 if last is None else last[0] + 1
        entry = ToolRegistry([fragile]).get("tools", "fragile")
        outcome = await run_attempts(entry, {}, CallEnv("run-1", "s:0"), journal, MarkerClock(), first_attempt=first)
        print(json.dumps(outcome.to_json()))

    asyncio.run(main())
''')


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.parametrize("mode", ["delay", "attempt"])
def test_sigkill_then_resume_with_next_attempt(tmp_path: Path, mode: str):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    db, marker, log = tmp_path / "journal.db", tmp_path / "marker", tmp_path / "calls.log"
    argv = [sys.executable, str(script), str(db), str(marker), str(log), mode]

    proc = subprocess.Popen(argv, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        give_up = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < give_up, "worker never reached the crash point"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT attempt, outcome FROM attempts WHERE step = 's:0'").fetchall()
    assert [r[0] for r in rows] == [1]
    if mode == "delay":
        recorded = json.loads(rows[0][1])
        assert recorded["status"] == "failed" and recorded["retry_after"] == 30.0  # durable before the delay
    else:
        assert rows[0][1] is None  # started, never finished: interrupted

    began = time.monotonic()
    rerun = subprocess.run(argv, env=worker_env(), capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    assert time.monotonic() - began < 25  # the lost 30 s delay is not waited again
    outcome = json.loads(rerun.stdout)
    assert outcome["status"] == "ok" and outcome["attempts"] == 2
    assert outcome["value"] == {"attempt": 2, "key": "run-1/s:0"}

    calls = [line.split() for line in log.read_text().splitlines()]
    assert [c[1] for c in calls] == ["1", "2"] and calls[0][0] != calls[1][0]  # two processes
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT attempt FROM attempts ORDER BY attempt")] == [1, 2]

    # a third run replays the recorded outcome: the tool is not called again
    replay = subprocess.run(argv, env=worker_env(), capture_output=True, text=True, timeout=60)
    assert json.loads(replay.stdout)["value"] == {"attempt": 2, "key": "run-1/s:0"}
    assert len(log.read_text().splitlines()) == 2
