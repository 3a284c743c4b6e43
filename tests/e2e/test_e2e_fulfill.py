"""The walking skeleton end to end: fulfill.lash parks on approval, is completed, finishes;
and a real SIGKILL after a recorded step does not run that step again on resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


from lashflow import Engine, RunStatus, ToolResult
from lashflow.lang import parse

ROOT = Path(__file__).resolve().parents[2]
FULFILL = ROOT / "processes" / "fulfill.lash"
INPUT = ROOT / "processes" / "fulfill.input.json"

SPEC_PROCESS = """
type Order = { id: str, items: list[dict], total: float }

process fulfill(order: Order) {
  quoted   = await tools.quote({ order: order })?
  approved = await tools.request_approval({ quote: quoted })?
  receipt  = await tools.charge({ approval: approved })?
  finish receipt
}
"""


def cli(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lashflow", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def test_grammar_parses_the_spec_fulfill_process() -> None:
    module = parse(SPEC_PROCESS)
    assert [t.name for t in module.types] == ["Order"]
    process = module.process("fulfill")
    assert process is not None
    assert [p.name for p in process.params] == ["order"]
    assert len(process.body.body) == 4
    assert module.main == []


def test_fulfill_waits_then_completes_through_the_cli(cli_env: dict[str, str]) -> None:
    started = cli(cli_env, "run", str(FULFILL), "--input", f"@{INPUT}", "--json")
    assert started.returncode == 3, started.stderr
    outcome = json.loads(started.stdout)
    assert outcome["status"] == "waiting"
    [wait] = outcome["waiting"]
    assert wait["kind"] == "completion" and wait["tool"] == "tools.request_approval"
    key = wait["key"]
    assert key.startswith("lfk_") and key in wait["resolve"]

    done = cli(cli_env, "complete", key, "--result", '{"approved": true}', "--resume", "--json")
    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout)
    assert final["status"] == "finished"
    assert final["result"]["charged"] is True
    assert final["result"]["receipt"].startswith("rcpt_")

    again = cli(cli_env, "complete", key, "--result", '{"approved": false}', "--json")
    assert again.returncode == 2
    assert json.loads(again.stdout)["error"]["code"] == "completion_already_resolved"


async def test_fulfill_through_the_python_api(db_url: str) -> None:
    order = json.loads(INPUT.read_text())
    async with Engine(db=db_url) as engine:
        outcome = await engine.run(FULFILL, input=order)
        assert outcome.status is RunStatus.WAITING
        key = outcome.waiting[0].key
        status = await engine.complete(key, ToolResult.ok({"approved": False}))
        assert status is RunStatus.FAILED
        final = await engine.get(outcome.run_id)
        assert final.error is not None
        assert "the order was not approved" in final.error.message


FLOW = """
process flow(n: int) {
  q = await tools.quote({ n: n })?
  s = await tools.slow({ q: q })?
  finish { q: q, s: s }
}
"""

FLOW_TOOLS = """
import os, time
from pathlib import Path
from lashflow import tool

HERE = Path(__file__).parent

@tool
async def quote(n: int) -> dict:
    with open(HERE / "quote.calls", "a") as f:
        f.write("call\\n")
    return {"price": n * 10}

@tool
async def slow(q: dict) -> dict:
    marker = HERE / "slow.marker"
    if not marker.exists():
        marker.write_text("reached")
        time.sleep(600)  # the test kills us here
    return {"paid": q["price"]}
"""


def test_sigkill_after_a_recorded_step_does_not_repeat_it(tmp_path: Path,
                                                           cli_env: dict[str, str]) -> None:
    (tmp_path / "flow.lash").write_text(FLOW)
    (tmp_path / "flow.py").write_text(textwrap.dedent(FLOW_TOOLS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "lashflow", "run", str(tmp_path / "flow.lash"), "--input",
         '{"n": 4}', "--run-id", "crash-1", "--json"],
        env=cli_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "slow.marker").exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the worker never reached the slow step"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / "quote.calls").read_text().count("call") == 1

    shown = cli(cli_env, "show", "crash-1", "--json")
    steps = json.loads(shown.stdout)["steps"]
    assert [s["tool"] for s in steps if s["status"] == "done"] == ["tools.quote"]

    resumed = cli(cli_env, "resume", "crash-1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == {"q": {"price": 40}, "s": {"paid": 40}}
    assert (tmp_path / "quote.calls").read_text().count("call") == 1
