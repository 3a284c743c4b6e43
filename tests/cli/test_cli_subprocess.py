"""The CLI as users run it: ``python -m lashflow`` in real processes sharing one database.

run -> complete -> resume across processes, --follow woken from another process, Ctrl-C,
a worker stopped by SIGTERM, and the live status on a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
Lfx = Callable[..., Any]


def popen(env: dict[str, str], *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lashflow", *map(str, args)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    file = tmp_path / "gate.lash"
    file.write_text('process gate(who: str) {\n  d = wait_signal("go")\n'
                    '  finish { who: who, said: d }\n}\n')
    return file


def test_run_complete_resume(lfx: Lfx, example: Any) -> None:
    file, data = example("fulfill")
    parked = lfx("run", file, "--input", data)
    assert parked.code == 3, parked
    resolve = parked.out.splitlines()[2].strip()
    assert resolve.startswith("lashflow complete lfk_")
    key = resolve.split()[2]
    run_id = parked.out.split()[1]

    delivered = lfx("complete", key, "--result", '{"approved": true}')
    assert delivered.code == 0
    assert delivered.out.strip() == (f"delivered; run {run_id} is waiting; continue it with "
                                     f"`lashflow resume {run_id}`")
    resumed = lfx("resume", run_id)
    assert resumed.code == 0, resumed
    assert resumed.out.splitlines()[0] == f"run {run_id} finished"
    assert json.loads(resumed.out.splitlines()[1])["charged"] is True
    shown = lfx("show", run_id, "--json").json
    assert [s["tool"] for s in shown["steps"]] == ["tools.quote", "tools.request_approval",
                                                   "tools.charge"]
    assert [s["attempts"] for s in shown["steps"]] == [1, 1, 1]  # quote was not called again


def test_complete_with_resume_json(lfx: Lfx, example: Any) -> None:
    file, data = example("fulfill")
    parked = lfx("run", file, "--input", data, "--json")
    key = parked.json["waiting"][0]["key"]
    done = lfx("complete", key, "--result", '{"approved": false}', "--resume", "--json")
    assert done.code == 1
    assert done.json["status"] == "failed"
    assert "the order was not approved" in done.json["error"]["message"]


def test_follow_is_woken_by_a_signal_from_another_process(lfx: Lfx, gate: Path,
                                                          cli_env: dict[str, str]) -> None:
    follower = popen(cli_env, "run", gate, "--input", '{"who": "ada"}', "--run-id", "f-1",
                     "--follow", "--json")
    try:
        wait_for(lambda: lfx("show", "f-1", "--json").out.find('"waiting"') > 0)
        assert follower.poll() is None  # still following
        sent = lfx("signal", "f-1", "go", "--payload", '"yes"')
        assert sent.code == 0
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert json.loads(out) == {"run_id": "f-1", "status": "finished",
                               "result": {"who": "ada", "said": "yes"}}


def test_follow_picks_up_a_completion_delivered_without_resume(lfx: Lfx, example: Any,
                                                               cli_env: dict[str, str]) -> None:
    file, data = example("fulfill")
    follower = popen(cli_env, "run", file, "--input", data, "--run-id", "f-2", "--follow",
                     "--json")
    try:
        wait_for(lambda: '"key"' in lfx("show", "f-2", "--json").out)
        key = lfx("show", "f-2", "--json").json["waiting"][0]["key"]
        assert lfx("complete", key, "--result", '{"approved": true}').code == 0
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert json.loads(out)["result"]["charged"] is True


def test_ctrl_c_leaves_the_run_resumable(lfx: Lfx, gate: Path, cli_env: dict[str, str]) -> None:
    follower = popen(cli_env, "run", gate, "--input", '{"who": "x"}', "--run-id", "int-1",
                     "--follow")
    try:
        wait_for(lambda: '"waiting"' in lfx("show", "int-1", "--json").out)
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("interrupted: every committed step is kept")
    assert lfx("signal", "int-1", "go", "--json").json["status"] == "finished"


def test_worker_runs_submitted_runs_and_stops_on_sigterm(lfx: Lfx, example: Any,
                                                        cli_env: dict[str, str]) -> None:
    worker = popen(cli_env, "worker", "--poll", "0.1")
    try:
        file, data = example("fanout")
        submitted = lfx("submit", file, "--input", data, "--run-id", "wk-1")
        assert submitted.code == 0, submitted.err
        try:
            wait_for(lambda: lfx("show", "wk-1", "--json").json["status"] == "finished")
        except AssertionError:  # say what the worker and the run were doing
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=60)
            raise AssertionError(f"worker said: {out!r} {err!r}; the run: "
                                 f"{lfx('show', 'wk-1', '--json').out}") from None
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    assert "run wk-1 finished" in out
    assert err.startswith("worker ")


def read_pty(fd: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> str:
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    return b"".join(chunks).decode("utf-8", "replace")


def test_live_status_and_tables_on_a_real_terminal(example: Any, cli_env: dict[str, str]) -> None:
    """On a terminal the run shows a live status line while tools run and sleeps pass,
    then a rich result; `show` draws a table."""
    master, slave = pty.openpty()
    env = dict(cli_env, COLUMNS="150", LINES="40", TERM="xterm-256color")
    env.pop("TTY_COMPATIBLE", None)
    file, data = example("approval")
    proc = subprocess.Popen([sys.executable, "-m", "lashflow", "run", str(file), "--input", data,
                             "--run-id", "tty-1"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=ROOT)
    os.close(slave)
    try:
        screen = read_pty(master, proc)
        proc.wait(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    assert "run approval.lash (run tty-1) sleeping until" in screen  # the live line during the sleep
    assert "step(s) recorded" in screen and "elapsed" in screen
    assert "\x1b[" in screen  # rich styling
    assert "lashflow signal tty-1 decision --payload '<json>'" in screen

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "lashflow", "show", "tty-1"], stdin=slave,
                            stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    try:
        screen = read_pty(master, proc)
        proc.wait(timeout=60)
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert "─" in screen and "tools.file_claim" in screen and "tries" in screen  # the table


def test_cancel_reaches_a_run_driven_by_another_process(lfx: Lfx, tmp_path: Path,
                                                        cli_env: dict[str, str]) -> None:
    (tmp_path / "slow.lash").write_text("process slow() {\n  await tools.nap({})?\n  finish 1\n}\n")
    (tmp_path / "slow.py").write_text(
        "import asyncio\nfrom pathlib import Path\nfrom lashflow import tool, ToolCall\n\n"
        "@tool\nasync def nap(call: ToolCall) -> int:\n"
        "    (Path(__file__).parent / 'napping').write_text('yes')\n"
        "    await asyncio.sleep(60)\n"
        "    (Path(__file__).parent / 'woke').write_text('yes')\n    return 1\n")
    runner = popen(cli_env, "run", tmp_path / "slow.lash", "--run-id", "slow-1", "--json")
    try:
        wait_for(lambda: (tmp_path / "napping").exists())
        asked = lfx("cancel", "slow-1")
        assert asked.code == 0, asked
        assert asked.out.strip() == ("cancel requested: run slow-1 is running; it stops at its "
                                     "next effect")
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    # The in-flight attempt was cancelled at once (not after its 60 s nap) and the run
    # ends cancelled (a cancel wins over what the process does with the cancelled call), even though its `?` saw the cancelled call fail.
    assert runner.returncode == 4, err
    assert json.loads(out)["status"] == "cancelled"
    [step] = lfx("show", "slow-1", "--json").json["steps"]
    assert step["state"] == "cancelled"
    assert not (tmp_path / "woke").exists(), "the attempt waited out its nap, not cancelled"


def test_needs_attention_after_a_kill_then_retry_interrupted(lfx: Lfx, tmp_path: Path,
                                                             cli_env: dict[str, str]) -> None:
    (tmp_path / "pay.lash").write_text("process pay() {\n  r = await tools.charge({})?\n"
                                       "  finish r\n}\n")
    (tmp_path / "pay.py").write_text(
        "import time\nfrom pathlib import Path\nfrom lashflow import tool, ToolCall\n\n"
        "HERE = Path(__file__).parent\n\n"
        "@tool(idempotent=False)\nasync def charge(call: ToolCall) -> dict:\n"
        "    marker = HERE / 'charging'\n"
        "    if not marker.exists():\n"
        "        marker.write_text('1')\n"
        "        time.sleep(600)  # killed here\n"
        "    return {'charged': call.context.attempt}\n")
    worker = popen(cli_env, "run", tmp_path / "pay.lash", "--run-id", "pay-1")
    try:
        wait_for(lambda: (tmp_path / "charging").exists())
    finally:
        worker.kill()
        worker.communicate(timeout=60)
    orphan = lfx("show", "pay-1")  # before anyone recovers it: the owner is known dead
    assert orphan.out.startswith("run pay-1: running (owner gone: lashflow recover)"), orphan.out
    assert " interrupted " in orphan.out  # the attempt the kill cut short, not "started"
    stuck = lfx("resume", "pay-1")
    assert stuck.code == 5, stuck
    assert stuck.out.strip() == "run pay-1 needs_attention"
    assert stuck.err.startswith("error[needs_attention]: ")
    assert "lashflow resume pay-1 --retry-interrupted" in stuck.err
    shown = lfx("show", "pay-1")
    assert " interrupted " in shown.out and "tools.charge" in shown.out
    retried = lfx("resume", "pay-1", "--retry-interrupted", "--json")
    assert retried.code == 0, retried
    assert retried.json["result"] == {"charged": 2}
