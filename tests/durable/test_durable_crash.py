"""SIGKILL a real worker process at each point where a crash can fall (during an idempotent
or a non-idempotent attempt, after an outcome is recorded, during a retry delay, during a
sleep), then resume in a new process: nothing committed is lost, no recorded outcome runs
again, and an interrupted non-idempotent attempt waits for an operator.

Each scenario writes a .lash file and its tools into a temp folder. Tools count their
calls in files and, at the chosen point, write a marker and block; the test kills the
worker by pid when the marker appears, inspects the journal and resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
import time
from pathlib import Path
from lashflow import tool, ToolResult, RetryPolicy

HERE = Path(__file__).parent

def count(name):
    with open(HERE / f"{name}.calls", "a") as f:
        f.write("x\\n")
    return (HERE / f"{name}.calls").read_text().count("x")

def block_once(point):
    marker = HERE / f"{point}.marker"
    if not marker.exists():
        marker.write_text("here")
        time.sleep(600)  # killed here

@tool
async def first(n: int) -> int:
    count("first")
    block_once("in_first")
    return n + 1

@tool(idempotent=False)
async def charge(n: int) -> dict:
    count("charge")
    block_once("in_charge")
    return {"charged": n}

@tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=300.0, max_delay=0))
async def flaky(call_input: dict = None) -> int:
    calls = count("flaky")
    if calls == 1:
        (HERE / "in_delay.marker").write_text("failing once; the retry delay follows")
        return ToolResult.retryable_failure("upstream 503")
    return calls

@tool
async def last(n: int) -> int:
    count("last")
    return n * 10
'''


def run_cli(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lashflow", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def start_and_kill(env: dict[str, str], folder: Path, source: str, marker: str,
                   run_id: str, input_json: str = "{}", *, ready: Any = None,
                   settle: float = 0.05) -> None:
    """Run the flow in a worker process and SIGKILL it once ``marker`` exists (or
    ``ready()`` is true), after ``settle`` seconds at that point."""
    (folder / "flow.lash").write_text(textwrap.dedent(source))
    (folder / "flow.py").write_text(TOOLS.replace("def flaky(call_input: dict = None)",
                                                  "def flaky(n: int)"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "lashflow", "run", str(folder / "flow.lash"), "--run-id", run_id,
         "--input", input_json, "--json"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reached = ready or (lambda: (folder / marker).exists())
    deadline = time.monotonic() + 60
    while not reached():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.stderr.read().decode()}")
        assert time.monotonic() < deadline, f"the worker never reached {marker}"
        time.sleep(0.01)
    time.sleep(settle)  # let it sit at the point: nothing more may be written
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def calls(folder: Path, name: str) -> int:
    path = folder / f"{name}.calls"
    return path.read_text().count("x") if path.exists() else 0


def steps(env: dict[str, str], run_id: str) -> list[dict]:
    shown = run_cli(env, "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["steps"]


def test_killed_during_an_idempotent_attempt_runs_it_again(tmp_path: Path,
                                                          cli_env: dict[str, str]) -> None:
    source = """
    process p(n: int) {
      a = await tools.first({ n: n })?
      b = await tools.last({ n: a })?
      finish b
    }
    """
    start_and_kill(cli_env, tmp_path, source, "in_first.marker", "idem-1", '{"n": 1}')
    assert steps(cli_env, "idem-1") == []  # nothing recorded: the start is lazy
    resumed = run_cli(cli_env, "resume", "idem-1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == 20
    assert calls(tmp_path, "first") == 2 and calls(tmp_path, "last") == 1


def test_killed_during_a_non_idempotent_attempt_needs_attention(tmp_path: Path,
                                                                cli_env: dict[str, str]) -> None:
    source = """
    process p(n: int) {
      a = await tools.first({ n: n })?
      c = await tools.charge({ n: a })?
      finish c
    }
    """
    (tmp_path / "in_first.marker").write_text("skip")  # first must not block here
    start_and_kill(cli_env, tmp_path, source, "in_charge.marker", "pay-1", '{"n": 1}')
    journal = steps(cli_env, "pay-1")
    assert [(s["tool"], s["status"]) for s in journal] == [("tools.first", "done"),
                                                           ("tools.charge", "started")]
    stuck = run_cli(cli_env, "resume", "pay-1", "--json")
    assert stuck.returncode == 5, stuck.stderr
    data = json.loads(stuck.stdout)
    assert data["status"] == "needs_attention"
    assert "--retry-interrupted" in data["error"]["message"]
    assert calls(tmp_path, "charge") == 1

    retried = run_cli(cli_env, "resume", "pay-1", "--retry-interrupted", "--json")
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["result"] == {"charged": 2}
    assert calls(tmp_path, "first") == 1 and calls(tmp_path, "charge") == 2
    [charge] = [s for s in steps(cli_env, "pay-1") if s["tool"] == "tools.charge"]
    assert charge["attempts"] == 2


def test_killed_after_the_outcome_is_recorded_replays_it(tmp_path: Path,
                                                        cli_env: dict[str, str]) -> None:
    source = """
    process p(n: int) {
      a = await tools.last({ n: n })?
      b = await tools.first({ n: a })?
      finish b
    }
    """
    start_and_kill(cli_env, tmp_path, source, "in_first.marker", "after-1", '{"n": 2}')
    assert [s["tool"] for s in steps(cli_env, "after-1")] == ["tools.last"]
    resumed = run_cli(cli_env, "resume", "after-1", "--json")
    assert json.loads(resumed.stdout)["result"] == 21
    assert calls(tmp_path, "last") == 1


def test_killed_during_a_retry_delay_resumes_with_the_next_attempt(tmp_path: Path,
                                                                  cli_env: dict[str, str]) -> None:
    source = """
    process p(n: int) {
      a = await tools.flaky({ n: n })?
      finish a
    }
    """
    start_and_kill(cli_env, tmp_path, source, "in_delay.marker", "retry-1", '{"n": 0}')
    [flaky] = steps(cli_env, "retry-1")
    assert flaky["status"] == "started" and flaky["attempts"] == 1
    resumed = run_cli(cli_env, "resume", "retry-1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == 2
    assert calls(tmp_path, "flaky") == 2
    [flaky] = steps(cli_env, "retry-1")
    assert flaky["status"] == "done" and flaky["attempts"] == 2


def test_killed_while_waiting_on_a_sleep_resumes_after_it(tmp_path: Path,
                                                        cli_env: dict[str, str]) -> None:
    source = """
    process p(n: int) {
      a = await tools.last({ n: n })?
      sleep for "1500ms"
      b = await tools.first({ n: a })?
      finish b
    }
    """
    (tmp_path / "in_first.marker").write_text("skip")
    # killed inside the sleep: the run is parked, the CLI waits to drive it on
    start_and_kill(cli_env, tmp_path, source, "last.calls", "nap-1", '{"n": 3}',
                   ready=lambda: calls(tmp_path, "last") > 0, settle=0.3)
    # resume waits the rest of the recorded sleep out itself (well within --max-wait)
    resumed = run_cli(cli_env, "resume", "nap-1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == 31
    assert calls(tmp_path, "last") == 1 and calls(tmp_path, "first") == 1


def test_two_processes_resuming_one_run_one_drives_one_is_refused(tmp_path: Path,
                                                                 cli_env: dict[str, str]) -> None:
    source = """
    process p(n: int) {
      a = await tools.last({ n: n })?
      b = await tools.first({ n: a })?
      finish b
    }
    """
    (tmp_path / "flow.lash").write_text(textwrap.dedent(source))
    (tmp_path / "flow.py").write_text(TOOLS)
    submitted = run_cli(cli_env, "submit", str(tmp_path / "flow.lash"), "--run-id", "dup-1",
                        "--input", '{"n": 1}', "--json")
    assert submitted.returncode == 0, submitted.stderr
    procs = [subprocess.Popen([sys.executable, "-m", "lashflow", "resume", "dup-1", "--json"],
                              env=cli_env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    deadline = time.monotonic() + 60
    while not (tmp_path / "in_first.marker").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # one of them is blocked inside `first`: the other is refused and exits
    while not (finished := [p for p in procs if p.poll() is not None]):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(finished) == 1
    out, _ = finished[0].communicate()
    refused = json.loads(out)
    assert finished[0].returncode == 2 and refused["error"]["code"] == "run_busy"
    driver = next(p for p in procs if p is not finished[0])
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)
    driver.stdout.close()
    driver.stderr.close()
    assert calls(tmp_path, "last") == 1 and calls(tmp_path, "first") == 1
    resumed = run_cli(cli_env, "recover", "--json")
    assert resumed.returncode == 0, resumed.stderr
    [outcome] = json.loads(resumed.stdout)["recovered"]
    assert outcome["run_id"] == "dup-1" and outcome["result"] == 11
    assert calls(tmp_path, "last") == 1 and calls(tmp_path, "first") == 2


def test_an_interrupted_charge_that_did_happen_is_resolved_by_hand(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    """The operator checked the bank: the cut-off charge went through. resolve-step
    records it (journaled with who and why), then the run finishes without charging
    again."""
    source = """
    process p(n: int) {
      a = await tools.first({ n: n })?
      c = await tools.charge({ n: a })?
      finish c
    }
    """
    (tmp_path / "in_first.marker").write_text("skip")
    start_and_kill(cli_env, tmp_path, source, "in_charge.marker", "pay-2", '{"n": 1}')
    stuck = run_cli(cli_env, "resume", "pay-2", "--json")
    assert json.loads(stuck.stdout)["status"] == "needs_attention"
    resolved = run_cli(cli_env, "resolve-step", "pay-2", "2", "--result",
                       '{"charged": 2}', "--reason", "bank statement shows it",
                       "--tools", str(tmp_path / "flow.py"), "--json")
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)["status"] == "queued"
    done = run_cli(cli_env, "resume", "pay-2", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"charged": 2}
    assert calls(tmp_path, "charge") == 1  # never charged twice
    [charge] = [s for s in steps(cli_env, "pay-2") if s["tool"] == "tools.charge"]
    last = charge["attempt_log"][-1]
    assert last["status"] == "ok" and "bank statement shows it" in last["message"]
