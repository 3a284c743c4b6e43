"""Fan-out: ``await [tools.f({x: x}) for x in xs]`` is ONE concurrent batch.

Found here: a comprehension of tool calls ran its calls one after another, then the
``await`` walked into the settled results as if they were handles, and every element
came back as ``{"ok": {"ok": false, "error": "expected handle record"}, ...}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.interp.limits import Limits

ROOT = Path(__file__).resolve().parents[2]


async def test_a_hundred_calls_all_start_before_any_is_released(db_url: str) -> None:
    started: list[int] = []
    release = asyncio.Event()

    @tool
    async def hold(call: ToolCall) -> ToolResult:
        started.append(call.input["i"])
        if len(started) == 100:
            release.set()  # only the last call to start lets them all go
        await release.wait()
        return ToolResult.ok(call.input["i"] * 10)

    source = "finish await [tools.hold({ i: i })? for i in range(100)]"
    async with Engine(db=db_url, tools=[hold]) as engine:
        outcome = await asyncio.wait_for(engine.run(source), timeout=60)
    assert outcome.status is RunStatus.FINISHED, outcome.error
    assert outcome.result == [i * 10 for i in range(100)]  # source order, not finish order
    assert sorted(started) == list(range(100))


async def test_members_whose_commit_is_fenced_are_not_taken_as_recorded(db_url: str) -> None:
    """Members do not wait for their shared commit; the batch does. When that commit is
    refused (the lease moved to another worker meanwhile), the drive stops without using
    a single answer and nothing of the batch is in the journal."""
    started: list[int] = []
    release = asyncio.Event()

    @tool
    async def hold(call: ToolCall) -> ToolResult:
        started.append(call.input["i"])
        await release.wait()
        return ToolResult.ok(call.input["i"])

    source = "finish await [tools.hold({ i: i })? for i in range(20)]"
    async with Engine(db=db_url, tools=[hold]) as engine:
        run = await engine.start(source, run_id="fenced")
        while len(started) < 20:
            await asyncio.sleep(0)
        # another worker takes the run over while every member is in flight
        assert await engine.store.claim("fenced", "elsewhere:1:x", 600.0, now=1e12) is not None
        release.set()
        outcome = await asyncio.wait_for(run.result(), timeout=30)
        assert outcome.status is RunStatus.RUNNING  # left to the worker that holds it
        steps, _ = await engine.store.load_journal("fenced")
        assert [s.step_key for s in steps if s.kind == "tool"] == []


async def test_results_keep_source_order_with_filters_and_wrappers(db_url: str) -> None:
    @tool
    async def late(call: ToolCall) -> ToolResult:
        await asyncio.sleep(0.01 * (5 - len(call.input["u"])))  # later ones finish first
        if call.input["u"] == "bad":
            return ToolResult.err("no such page")
        return ToolResult.ok({"u": call.input["u"]})

    source = """
    process fan(urls: list[str]) {
      pages = await [tools.late({ u: u }) for u in urls]
      good = await [tools.late({ u: u })? for u in urls if u != "bad"]
      finish { pages: pages, good: good }
    }
    """
    async with Engine(db=db_url, tools=[late]) as engine:
        outcome = await engine.run(source, process="fan",
                                   input={"urls": ["a", "bad", "ccc", "dd"]})
        steps = await engine.steps(outcome.run_id)
    assert outcome.status is RunStatus.FINISHED, outcome.error
    assert outcome.result["good"] == [{"u": "a"}, {"u": "ccc"}, {"u": "dd"}]
    assert outcome.result["pages"] == [
        {"ok": True, "value": {"u": "a"}}, {"ok": False, "error": "no such page"},
        {"ok": True, "value": {"u": "ccc"}}, {"ok": True, "value": {"u": "dd"}}]
    keys = [s.step_key for s in steps]
    first_site = keys[0].rsplit(":", 1)[0]
    assert sorted(k for k in keys if k.startswith(first_site + ":")) == \
        [f"{first_site}:{i}" for i in range(4)]  # keys fixed by element index


async def test_the_width_limit_ends_the_run(db_url: str) -> None:
    @tool
    async def one(call: ToolCall) -> ToolResult:
        return ToolResult.ok(1)

    async with Engine(db=db_url, tools=[one], limits=Limits(max_batch_width=3)) as engine:
        fits = await engine.run("finish await [tools.one({}) for i in range(3)]")
        over = await engine.run("finish await [tools.one({}) for i in range(4)]")
    assert fits.status is RunStatus.FINISHED
    assert over.status is RunStatus.FAILED and over.error.code == "limit_exceeded"
    assert "formed 4 calls, more than the limit of 3" in over.error.message


@tool
async def park(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


FANNED: list[int] = []


@tool
async def double(call: ToolCall) -> ToolResult:
    FANNED.append(call.input["x"])
    return ToolResult.ok(call.input["x"] * 2)


FLOW = """
xs = [1, 2, 3]
ys = await [tools.double({ x: x })? for x in xs]
gate = await tools.park({})?
finish ys
"""


@pytest.mark.parametrize("edited", ["xs = [1, 2, 3, 4]", "xs = [1, 2]"])
async def test_replay_with_another_number_of_elements_is_a_mismatch(db_url: str, tmp_path: Path,
                                                                    edited: str) -> None:
    FANNED.clear()
    original, changed = tmp_path / "flow.lash", tmp_path / "edited.lash"
    original.write_text(FLOW)
    changed.write_text(FLOW.replace("xs = [1, 2, 3]", edited))
    async with Engine(db=db_url, tools=[double, park]) as engine:
        parked = await engine.run(original)
        assert parked.status is RunStatus.WAITING
        same = await engine.resume(parked.run_id, source=original)
        assert same.status is RunStatus.WAITING  # the recorded batch replays
        moved = await engine.resume(parked.run_id, source=changed)
    assert moved.status is RunStatus.NEEDS_ATTENTION
    assert moved.error.code == "replay_mismatch"
    assert "the journal recorded a fan-out of 3 calls but the code now forms" in \
        moved.error.message
    assert FANNED == [1, 2, 3]  # nothing ran again


CRASH_TOOLS = '''
import asyncio
from pathlib import Path
from lashflow import tool

HERE = Path(__file__).parent

@tool
async def member(i: int) -> int:
    with open(HERE / "calls.txt", "a") as f:
        f.write(f"{i}\\n")
    if i % 2:  # odd members wait for the go file (they are running when the kill comes)
        while not (HERE / "go").exists():
            await asyncio.sleep(0.005)
    return i * i
'''

CRASH_FLOW = "finish await [tools.member({ i: i })? for i in range(50)]\n"


def _recorded(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM steps WHERE status = 'done'").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


def test_a_crash_in_the_middle_of_a_fan_out_runs_only_the_unrecorded_members(
        tmp_path: Path) -> None:
    (tmp_path / "flow.lash").write_text(CRASH_FLOW)
    (tmp_path / "flow.py").write_text(CRASH_TOOLS)
    db = tmp_path / "fan.db"
    env = dict(os.environ, LASHFLOW_DB=f"sqlite:///{db}")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "lashflow", "run", str(tmp_path / "flow.lash"),
                             "--run-id", "fan", "--json"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _recorded(db) < 25:  # the 25 even members are recorded one by one as they end
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the even members were never recorded"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.stderr is not None
    proc.stderr.close()
    assert _recorded(db) == 25
    (tmp_path / "go").write_text("")
    resumed = subprocess.run([sys.executable, "-m", "lashflow", "resume", "fan", "--json"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    calls = [int(line) for line in (tmp_path / "calls.txt").read_text().split()]
    for i in range(50):
        # recorded members are replayed, never run again; the ones the kill cut short run
        # once more after it
        assert calls.count(i) == (1 if i % 2 == 0 else 2), (i, calls.count(i))
    assert json.loads(resumed.stdout)["result"] == [i * i for i in range(50)]
