"""`lashflow verify`, `diff` and `export` as a user runs them: real subprocesses, a real
terminal (a pseudo-terminal 80 columns wide), the documented exit codes."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from lashflow import Engine
from lashflow.testing import Replayer
from test_cli_subprocess import read_pty

ROOT = Path(__file__).resolve().parents[2]

FLOW = """process fulfill(order: any) {
  q = tools.quote({ sku: order.sku })?
  ok = wait_signal("go")
  c = tools.charge({ amount: q.total })?
  finish c
}
"""
TOOLS = """from lashflow import ToolCall, ToolResult, tool


@tool
async def quote(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"total": 10})


@tool
async def charge(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"paid": True})
"""
LONG_SKU = "an-unusually-long-stock-keeping-unit-name-that-will-not-fit-in-one-line-" * 2


def lashflow(env: dict[str, str], *args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lashflow", *map(str, args)], cwd=ROOT,
                          env=dict(env, TTY_COMPATIBLE="0"), capture_output=True, text=True,
                          timeout=120)


async def parked(tmp_path: Path, cli_env: dict[str, str]) -> tuple[Path, list[str]]:
    flow = tmp_path / "flow.lash"
    flow.write_text(FLOW)
    (tmp_path / "flow.py").write_text(TOOLS)
    async with Engine(db=cli_env["LASHFLOW_DB"], modules=[str(tmp_path / "flow.py")]) as engine:
        ids = [(await engine.run(flow, "fulfill", {"order": {"sku": sku}})).run_id
               for sku in ("a", LONG_SKU)]
    return flow, ids


async def test_verify_exits_1_on_an_incompatible_edit_and_reads_at_80_columns(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    flow, ids = await parked(tmp_path, cli_env)
    same = lashflow(cli_env, "verify", flow, "--json")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["counts"] == {"compatible": 2, "incompatible": 0, "unknown": 0}

    edited = tmp_path / "edited.lash"
    edited.write_text(FLOW.replace("{ sku: order.sku }", "{ sku: order.sku, rush: true }"))
    (tmp_path / "edited.py").write_text(TOOLS)
    master, slave = pty.openpty()
    env = dict(cli_env, COLUMNS="80", LINES="40", TERM="xterm-256color")
    env.pop("TTY_COMPATIBLE", None)
    proc = subprocess.Popen([sys.executable, "-m", "lashflow", "verify", str(edited)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    try:
        screen = read_pty(master, proc)
        proc.wait(timeout=120)
    finally:
        os.close(master)
    assert proc.returncode == 1, screen
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen).replace("\r", "").splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = "\n".join(lines)
    assert "incompatible        2" in text and ids[1] in text and "$.rush" in text
    assert "at 2:7" in text  # the line and column in the edited file

    as_json = json.loads(lashflow(cli_env, "verify", edited, "--json").stdout)
    verdict = as_json["runs"][0]
    assert (verdict["verdict"], verdict["line"], verdict["paths"]) == ("incompatible", 2, ["$.rush"])


async def test_export_replays_in_a_test_and_diff_names_the_change(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    flow, ids = await parked(tmp_path, cli_env)
    exported = lashflow(cli_env, "export", *ids)
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)
    assert document["format"] == "lashflow-runs" and len(document["runs"]) == 2
    assert [v.verdict for v in Replayer(flow).replay(document)] == ["compatible"] * 2

    unknown = lashflow(cli_env, "export", "run_nope")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error[unknown_run]")

    edited = tmp_path / "edited.lash"
    edited.write_text(FLOW.replace("  q = tools.quote", '  log = tools.charge({ amount: 0 })?\n'
                                                         "  q = tools.quote"))
    diffed = lashflow(cli_env, "diff", flow, edited, "--json")
    assert diffed.returncode == 0, diffed.stderr
    changes = json.loads(diffed.stdout)["changes"]
    assert [c["change"] for c in changes].count("added") == 1
    assert {c["change"] for c in changes} <= {"added", "moved", "changed"}
    assert json.loads(diffed.stdout)["unreachable"]  # the shifted calls' recorded steps
