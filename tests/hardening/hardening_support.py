"""Shared helpers of the hardening tests: stub tools, CLI runs, and the replay checker.

``replay_problems`` re-runs a finished run's program against its own journal, without
running any tool: every effect the program asks for must be recorded, done, with the
same kind, tool and argument hash, in the order the effects were made (batch members
may be recorded in any order among themselves), no recorded step may be left over,
and the program must finish with the result stored on the run. It is the check that
"every finished run's steps match the program's effect order".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lashflow import RetryPolicy, ToolCall, ToolResult, tool
from lashflow.lang import Catalog, ast as A, link, parse
from lashflow.interp import effects as fx
from lashflow.durable.canonical import digest
from lashflow.interp.compiler import compile_module
from lashflow.interp.limits import Limits
from lashflow.interp.values import to_json
from lashflow.interp.vm import execute
from lashflow.store import Store
from lashflow.store.check import Problem
from lashflow.tools.outcome import ToolOutcome

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
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                walk(getattr(node, name))

    walk(module.processes)
    walk(module.main)
    return {k: sorted(v) for k, v in found.items()}


class _JournalHost:
    """Answers every effect from the journal; records what does not match."""

    def __init__(self, run_id: str, steps: list[Any]) -> None:
        self.run_id = run_id
        self.steps = {s.step_key: s for s in steps}
        self.used: set[str] = set()
        self.last_seq = 0
        self.problems: list[Problem] = []

    def _take(self, key: str, kind: str, tool_name: str | None, args: Any) -> Any:
        record = self.steps.get(key)
        if record is None:
            self.problems.append(Problem(self.run_id, key, "missing_step",
                                         f"the program makes {kind} {tool_name or ''} here but "
                                         "the journal has no such step"))
            raise _Stop()
        self.used.add(key)
        if record.status != "done":
            self.problems.append(Problem(self.run_id, key, "unsettled_step",
                                         f"step is {record.status} in a finished run"))
        if record.kind != kind or record.tool != tool_name:
            self.problems.append(Problem(self.run_id, key, "wrong_effect",
                                         f"journal has {record.kind} {record.tool}, the program "
                                         f"asks {kind} {tool_name}"))
        if args is not None and record.args_hash != digest(args):
            self.problems.append(Problem(self.run_id, key, "wrong_args",
                                         "argument hash differs from the program's"))
        return record

    def _order(self, records: list[Any]) -> None:
        seqs = [r.seq for r in records]
        if min(seqs) <= self.last_seq:
            self.problems.append(Problem(self.run_id, records[0].step_key, "order",
                                         f"recorded at seq {min(seqs)}, before an earlier effect "
                                         f"(seq {self.last_seq})"))
        self.last_seq = max(seqs)

    async def perform(self, effect: Any) -> Any:
        kind = type(effect)
        if kind is fx.Finish or kind is fx.Fail:
            return effect.value
        if kind is fx.ToolCall or kind is fx.ToolBatch:
            calls = [effect] if kind is fx.ToolCall else effect.calls
            records = [self._take(c.step, "tool", f"{c.module}.{c.operation}", to_json(c.input))
                       for c in calls]
            self._order(records)
            answers = [ToolOutcome.from_json(r.outcome).to_wrapper() for r in records]
            return answers[0] if kind is fx.ToolCall else answers
        if kind is fx.Observe:
            self._order([self._take(effect.step, effect.kind, None, None)])
            return None
        if kind is fx.SleepEffect:
            self._order([self._take(effect.step, "sleep", None, None)])
            return None
        if kind is fx.StartProcess:
            record = self._take(effect.step, "start", effect.process,
                                {"process": effect.process, "args": to_json(effect.args)})
            self._order([record])
            return record.outcome
        if kind is fx.AwaitHandle or kind is fx.AwaitHandles:
            joins = [effect] if kind is fx.AwaitHandle else effect.awaits
            records = [self._take(one.step, "await", None, {
                "handle": one.handle.get("id") if isinstance(one.handle, dict) else None})
                for one in joins]
            self._order(records)
            outcomes = [record.outcome for record in records]
            return outcomes[0] if kind is fx.AwaitHandle else outcomes
        if kind is fx.WaitSignalEffect:
            record = self._take(effect.step, "wait_signal", effect.name, None)
            self._order([record])
            return record.outcome
        names = {fx.CancelHandle: "cancel", fx.SignalRunEffect: "signal_run"}
        self._order([self._take(effect.step, names[kind], getattr(effect, "name", None), None)])
        return None


class _Stop(Exception):
    pass


async def replay_problems(store: Store, run_id: str, catalog: Catalog | None = None) -> list[Problem]:
    """Replay a finished run's program against its journal (see the module doc)."""
    run = await store.get_run(run_id)
    assert run is not None and run.status == "finished", run
    source = await store.get_source(run.source_hash)
    assert source is not None
    module = parse(source)
    catalog = catalog or Catalog.permissive(_operations(module))
    program = compile_module(link(module, catalog), catalog)
    steps, _ = await store.load_journal(run_id)
    host = _JournalHost(run_id, steps)
    try:
        result = await execute(program, host, process=run.process, args=run.input,
                               limits=Limits())
    except _Stop:
        return host.problems
    if result.status != "finished" or to_json(result.value) != run.result:
        host.problems.append(Problem(run_id, None, "result",
                                     f"replay gives {result.status} {to_json(result.value)!r:.80}, "
                                     f"the run holds {run.result!r:.80}"))
    left = sorted(set(host.steps) - host.used)
    if left:
        host.problems.append(Problem(run_id, left[0], "extra_steps",
                                     f"{len(left)} recorded steps the program never asks for"))
    return host.problems
