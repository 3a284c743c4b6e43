"""Tools for the worker tests, loaded by worker processes with ``--tools PATH``.

Every call appends one line ``pid run_id/step_key tag time [extra]`` to the file named by
``$LASHFLOW_WORKERS_LOG``: the side effects the tests count. One ``os.write`` of a short
line on an ``O_APPEND`` file, so lines from concurrent processes never interleave.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time

from lashflow import ToolCall, ToolResult, tool


def record(call: ToolCall, tag: str, extra: str = "") -> None:
    line = f"{os.getpid()} {call.context.idempotency_key} {tag} {time.time():.6f} {extra}".rstrip()
    fd = os.open(os.environ["LASHFLOW_WORKERS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@tool
async def step(call: ToolCall) -> ToolResult:
    """One unit of work: ``{i, ms}`` -> ``i + 1`` after ``ms`` milliseconds."""
    record(call, "step")
    if call.input.get("ms"):
        await asyncio.sleep(call.input["ms"] / 1000)
    return ToolResult.ok(call.input["i"] + 1)


@tool
async def park(call: ToolCall) -> ToolResult:
    """Waits for the outside world: the completion key goes to the log."""
    key = await call.context.completion_key()
    record(call, "park", key)
    return ToolResult.pending()


@tool
async def after(call: ToolCall) -> ToolResult:
    """The step right after a completion: its log time measures the wake-up latency."""
    record(call, "after")
    return ToolResult.ok(call.input["i"] + 1)


def _hold_count(key: str, delta: int) -> tuple[int, int]:
    """Runs of ``key`` inside ``held`` now, across every worker process, and the most
    ever seen at once: a file per key under the log's folder, changed under ``flock``."""
    folder = os.path.join(os.path.dirname(os.environ["LASHFLOW_WORKERS_LOG"]), "held")
    os.makedirs(folder, exist_ok=True)
    fd = os.open(os.path.join(folder, key or "_"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        now, peak = (int(n) for n in (os.read(fd, 64).decode() or "0 0").split())
        now += delta
        peak = max(peak, now)
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{now} {peak}".encode())
        return now, peak
    finally:
        os.close(fd)


@tool
async def held(call: ToolCall) -> ToolResult:
    """A queued run's work: ``{key, ms}``. Counts itself in and out of its key (the
    peak per key is what the queue tests check) and logs its start."""
    key = call.input["key"]
    _hold_count(key, +1)
    record(call, "held", key or "_")
    try:
        await asyncio.sleep(call.input["ms"] / 1000)
    finally:
        _hold_count(key, -1)
    return ToolResult.ok(call.input["ms"])


@tool
async def gate(call: ToolCall) -> ToolResult:
    """Held in flight until the file ``$LASHFLOW_WORKERS_GATE`` exists: the test decides
    when it may end (a worker killed meanwhile leaves it in flight), not a duration."""
    record(call, "gate")
    path = os.environ["LASHFLOW_WORKERS_GATE"]
    while not os.path.exists(path):
        await asyncio.sleep(0.01)
    return ToolResult.ok(call.input["i"] + 1)


@tool(rate="20/s")
async def rated(call: ToolCall) -> ToolResult:
    """Rate-limited to 20 calls a second across every worker: logs its start and the
    rate slot the store gave it."""
    record(call, "rated", f"{call.context.rate_slot:.6f}")
    return ToolResult.ok(call.input["i"] + 1)


@tool(rate_limit="payments")
async def settle_payment(call: ToolCall) -> ToolResult:
    """One of two tools sharing the named limit ``payments``."""
    record(call, "payments", f"settle_payment,{call.context.rate_slot:.6f}")
    return ToolResult.ok(call.input["i"] + 1)


@tool(rate_limit="payments")
async def refund(call: ToolCall) -> ToolResult:
    """The other tool of the named limit ``payments``."""
    record(call, "payments", f"refund,{call.context.rate_slot:.6f}")
    return ToolResult.ok(call.input["i"] + 1)


@tool(global_concurrency=2)
async def exclusive(call: ToolCall) -> ToolResult:
    """At most two in flight across every worker: counts itself in and out (its peak is
    what the test checks) and holds until ``$LASHFLOW_WORKERS_GATE`` exists when
    ``gate`` is set, else for ``ms``."""
    _hold_count("exclusive", +1)
    record(call, "exclusive")
    try:
        if call.input.get("gate"):
            path = os.environ["LASHFLOW_WORKERS_GATE"]
            while not os.path.exists(path):
                await asyncio.sleep(0.01)
        else:
            await asyncio.sleep(call.input["ms"] / 1000)
    finally:
        _hold_count("exclusive", -1)
    return ToolResult.ok(call.input["i"] + 1)
