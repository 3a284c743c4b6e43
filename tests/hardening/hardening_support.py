"""Shared helpers of the hardening tests: stub tools, CLI runs, and the replay checker.

``replay_problems`` re-runs a finished run's program against its own journal through the
engine's replay machine, running no tool: every effect the program asks for must be
recorded and done, with the same kind, tool and arguments, no recorded step may be left
over, and the program must finish with the result stored on the run. It is the check
that "every finished run's steps match the program's effects".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lashflow import RetryPolicy, ToolCall, ToolResult, tool
from lashflow.durable.programs import Programs
from lashflow.durable.verify import COMPATIBLE, verify_run
from lashflow.lang import Catalog, ast as A, parse
from lashflow.lang.record import fields_of
from lashflow.interp.limits import Limits
from lashflow.store import Store
from lashflow.store.check import Problem

ROOT = Path(__file__).resolve().parents[2]

# Limits small enough that a generated endless loop or value bomb ends in milliseconds.
SMALL_LIMITS = Limits(max_steps=20_000, max_value_bytes=1 << 20, max_effects=200,
                      max_range_items=1_000)


# --------------------------------------------------------------------------- stub tools


@tool
async def echo(call: ToolCall) -> ToolResult:
    """Answers the input's ``v`` (or the whole input)."""
    data = call.input
    return ToolResult.ok(data.get("v") if isinstance(data, dict) and "v" in data else data)


@tool
async def boom(call: ToolCall) -> ToolResult:
    """Always declines."""
    return ToolResult.err("boom")


@tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=0.0))
async def flaky(call: ToolCall) -> ToolResult:
    """Fails its first attempt (retryable), then echoes."""
    if call.context.attempt == 1:
        return ToolResult.retryable_failure("upstream 503")
    data = call.input
    return ToolResult.ok(data.get("v") if isinstance(data, dict) and "v" in data else data)


ENGINE_TOOLS = [echo, boom, flaky]


def memory_tools() -> dict[str, Any]:
    """The same three tools for ``MemoryHost`` (``flaky`` answers at once there)."""
    def answer(data: Any) -> Any:
        return data.get("v") if isinstance(data, dict) and "v" in data else data

    def refuse(data: Any) -> Any:
        raise ValueError("boom")

    return {"echo": answer, "boom": refuse, "flaky": answer}


TOOLS_PY = '''
from lashflow import RetryPolicy, ToolCall, ToolResult, tool


def _answer(data):
    return data.get("v") if isinstance(data, dict) and "v" in data else data


@tool
async def echo(call: ToolCall) -> ToolResult:
    return ToolResult.ok(_answer(call.input))


@tool
async def boom(call: ToolCall) -> ToolResult:
    return ToolResult.err("boom")


@tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=0.0))
async def flaky(call: ToolCall) -> ToolResult:
    if call.context.attempt == 1:
        return ToolResult.retryable_failure("upstream 503")
    return ToolResult.ok(_answer(call.input))
'''


# --------------------------------------------------------------------------- CLI


def cli_env(db_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["LASHFLOW_DB"] = db_url
    env.pop("LASHFLOW_DEBUG", None)
    return env


def run_cli(env: dict[str, str], *args: str, timeout: float = 60,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lashflow", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=cwd or ROOT)


def assert_clean_cli(result: subprocess.CompletedProcess[str], *, as_json: bool) -> dict | None:
    """A documented exit code, never a traceback or an internal error; with
    ``--json`` exactly one JSON object on stdout."""
    assert result.returncode in (0, 1, 2, 3, 4, 5), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr
    assert "internal_error" not in result.stderr + result.stdout, result.stderr
    if not as_json:
        if result.returncode == 2:
            assert result.stderr.startswith("error["), result.stderr
        return None
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


# --------------------------------------------------------------------------- replay check


def _operations(module: A.Module) -> dict[str, list[str]]:
    """Module path -> operations the program calls (for a permissive catalog)."""
    found: dict[str, set[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, A.ReceiverCall):
            path = []
            receiver = node.receiver
            while isinstance(receiver, A.Field):
                path.append(receiver.name)
                receiver = receiver.obj
            if isinstance(receiver, A.Name):
                found.setdefault(".".join([receiver.name, *reversed(path)]), set()).add(node.operation)
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, tuple):
            for item in node:
                walk(item)
        else:
            for name in fields_of(node):
                walk(getattr(node, name))

    walk(module.processes)
    walk(module.main)
    return {k: sorted(v) for k, v in found.items()}


async def replay_problems(store: Store, run_id: str, catalog: Catalog | None = None) -> list[Problem]:
    """Replay a finished run's program against its journal through the engine's own replay
    machine (``verify_run``: no tool runs, nothing is written); see the module doc."""
    run = await store.get_run(run_id)
    assert run is not None and run.status == "finished", run
    source = await store.get_source(run.source_hash)
    assert source is not None
    module = parse(source)
    catalog = catalog or Catalog.permissive(_operations(module))
    compiled = Programs(lambda: catalog).compile(source)
    steps, attempts = await store.load_journal(run_id)
    verdict = verify_run(run, steps, attempts, compiled, schemas=lambda module, op: None,
                         locate=lambda key: None, limits=Limits(), now=time.time())
    if verdict.verdict != COMPATIBLE:
        return [Problem(run_id, verdict.step, verdict.verdict, verdict.reason)]
    if verdict.ended is None:  # it would run something the journal does not hold
        return [Problem(run_id, verdict.step, "missing_step", verdict.reason)]
    if verdict.ended != ("finished", run.result):
        return [Problem(run_id, None, "result", f"replay gives {verdict.ended!r:.80}, the run "
                        f"holds {run.result!r:.80}")]
    return []
