"""An in-memory ``Host`` for tests: stub tools, inline child runs, queued signals.

Nothing is journaled and sleeps are instant. Stub tools are
written as: ``{"ok": V}``, ``{"error": "m"}``, ``"echo"``, ``{"seq": [...]}``,
``{"by": {"field", "cases", "default"}}``, or any callable taking the tool's input
object (sync or async; an exception becomes ``{ok: false, error: str(exc)}``).
Child processes run as asyncio tasks of the same program; ``await`` joins them.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

from lashflow.errors import LimitExceeded
from lashflow.interp import effects as fx
from lashflow.states import RunStatus
from lashflow.interp.compiler import Program
from lashflow.interp.errors import LashRuntimeError
from lashflow.interp.limits import Limits, too_deep
from lashflow.interp.values import failure_text
from lashflow.interp.vm import execute

CANCELLED = "lashlang process was cancelled"


@dataclass
class _World:
    """What all runs of one test share: tools, signal queues, runs, records."""

    tools: dict[str, Any]
    signals: dict[str, list[Any]]
    limits: Limits | None
    signal_timeout: float
    runs: dict[str, "MemoryHost"] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    seq_positions: dict[str, int] = field(default_factory=dict)


class MemoryHost:
    """Performs effects in memory; ``await host.run()`` executes the program."""

    def __init__(self, program: Program | None = None, tools: dict[str, Any] | None = None,
                 signals: dict[str, list[Any]] | None = None, *, run_id: str = "run",
                 limits: Limits | None = None, signal_timeout: float = 2.0,
                 _world: _World | None = None, _depth: int = 0) -> None:
        self.program = program
        self.run_id = run_id
        self.depth = _depth  # runs nested by `start` above this one, as the engine counts
        self.world = _world or _World(dict(tools or {}), {k: list(v) for k, v in (signals or {}).items()},
                                      limits, signal_timeout)
        self.world.runs[run_id] = self
        self.prints: list[str] = []
        self.inbox: dict[str, list[Any]] = {}
        self.arrived = asyncio.Event()
        self.outcome: dict[str, Any] | None = None
        self.task: asyncio.Task | None = None
        self.waiting = False  # blocked in wait_signal

    # -- public helpers -------------------------------------------------------------------------
    @property
    def events(self) -> list[dict[str, Any]]:
        return self.world.events

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self.world.calls

    def events_of(self, run_id: str) -> list[dict[str, Any]]:
        return [e for e in self.world.events if e["run"] == run_id]

    async def run(self, process: str | None = None, args: dict[str, Any] | None = None) -> fx.RunResult:
        """Execute the program's main block (or ``process``) on this host; the root run
        also lets its children finish (those waiting for a signal nobody sends are
        cancelled)."""
        assert self.program is not None, "MemoryHost needs the program to run it"
        try:
            return await execute(self.program, self, process, args, self.world.limits,
                                 ordered_args=self.depth > 0)
        finally:
            if self.task is None:
                await self._settle_children()

    async def _settle_children(self) -> None:
        while True:
            pending = [(h, h.task) for h in self.world.runs.values()
                       if h.task is not None and not h.task.done()]
            if not pending:
                return
            for child, task in pending:
                if child.waiting:
                    task.cancel()
            await asyncio.wait([task for _, task in pending], timeout=self.world.signal_timeout)

    # -- the seam -----------------------------------------------------------------------------
    async def perform(self, effect: fx.Effect) -> Any:
        # the effect limit is the interpreter's, counted as it yields each effect
        handler = getattr(self, "_" + type(effect).__name__)
        return await handler(effect)

    def _event(self, kind: str, **data: Any) -> None:
        self.world.events.append({"run": self.run_id, "kind": kind, **data})

    async def _ToolCall(self, call: fx.ToolCall) -> dict[str, Any]:
        name = f"{call.module}.{call.operation}"
        self.world.calls.append({"run": self.run_id, "step": call.step, "tool": name,
                                 "input": call.input})
        spec = self.world.tools.get(name, self.world.tools.get(call.operation))
        if spec is None:
            return {"ok": False, "error": f"unknown tool `{name}`"}
        return await self._stub(name, spec, call.input)

    async def _stub(self, name: str, spec: Any, payload: Any) -> dict[str, Any]:
        if callable(spec):
            try:
                result = spec(payload)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:  # a failing stub is a failed tool result
                return {"ok": False, "error": str(exc)}
            return {"ok": True, "value": result}
        if spec == "echo" or (isinstance(spec, dict) and "echo" in spec):
            return {"ok": True, "value": _first_argument(payload)}
        if isinstance(spec, dict) and "ok" in spec:
            return {"ok": True, "value": spec["ok"]}
        if isinstance(spec, dict) and "error" in spec:
            return {"ok": False, "error": failure_text(spec["error"])}
        if isinstance(spec, dict) and "seq" in spec:
            i = self.world.seq_positions.get(name, 0)
            self.world.seq_positions[name] = i + 1
            if i >= len(spec["seq"]):
                return {"ok": False, "error": f"stub `{name}` has no answer left"}
            return await self._stub(name, spec["seq"][i], payload)
        if isinstance(spec, dict) and "by" in spec:
            rule = spec["by"]
            arg = _first_argument(payload)
            key = arg.get(rule["field"]) if isinstance(arg, dict) else None
            case = rule.get("cases", {}).get(key if isinstance(key, str) else str(key))
            if case is None:
                case = rule.get("default", {"error": f"no stub case for {key!r}"})
            return await self._stub(name, case, payload)
        raise ValueError(f"bad stub spec for `{name}`: {spec!r}")

    async def _ToolBatch(self, batch: fx.ToolBatch) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(self._ToolCall(c) for c in batch.calls)))

    async def _StartProcess(self, effect: fx.StartProcess) -> dict[str, Any]:
        limits = self.world.limits or Limits()
        if self.depth + 1 > limits.max_child_depth:
            raise too_deep(limits)
        child_id = f"{self.run_id}/{effect.step}"
        child = MemoryHost(self.program, run_id=child_id, _world=self.world, _depth=self.depth + 1)
        self._event("start", process=effect.process, args=effect.args, child=child_id)
        child.task = asyncio.create_task(child._drive(effect.process, effect.args))
        return {"__handle__": "process", "id": child_id}

    async def _drive(self, process: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await self.run(process, args)
            if result.status == RunStatus.FINISHED:
                self.outcome = {"ok": True, "value": result.value}
            else:
                self.outcome = {"ok": False, "error": result.error.message}
        except (LashRuntimeError, LimitExceeded) as exc:
            self.outcome = {"ok": False, "error": exc.message}
        except asyncio.CancelledError:
            self.outcome = {"ok": False, "error": CANCELLED}
        return self.outcome

    def _child(self, handle: Any) -> "MemoryHost | None":
        if isinstance(handle, dict) and isinstance(handle.get("id"), str):
            return self.world.runs.get(handle["id"])
        return None

    async def _AwaitHandles(self, effect: fx.AwaitHandles) -> list[dict[str, Any]]:
        return [await self._await_one(one) for one in effect.awaits]

    async def _await_one(self, effect: fx.AwaitHandle) -> dict[str, Any]:
        child = self._child(effect.handle)
        if child is None or child.task is None:
            return {"ok": False, "error": "expected handle record"}
        try:
            return await asyncio.shield(child.task)
        except asyncio.CancelledError:
            return {"ok": False, "error": CANCELLED}

    async def _CancelHandle(self, effect: fx.CancelHandle) -> None:
        child = self._child(effect.handle)
        if child is None:
            raise LashRuntimeError("ValueError", "cancel failed: expected a process handle", effect.span)
        self._event("cancel", child=child.run_id)
        if child.task is not None and not child.task.done():
            child.task.cancel()
        return None

    async def _Observe(self, effect: fx.Observe) -> None:
        if effect.kind == "print":
            self.prints.append(effect.text)
        self._event(effect.kind, value=effect.value, text=effect.text)
        return None

    async def _SleepEffect(self, effect: fx.SleepEffect) -> None:
        from lashflow.interp.timeparse import sleep_deadline

        sleep_deadline(effect.mode, effect.value, 0.0, effect.span)  # validates; time is instant
        self._event("sleep", mode=effect.mode, value=effect.value)
        return None

    async def _WaitSignalEffect(self, effect: fx.WaitSignalEffect) -> Any:
        self._event("wait_signal", name=effect.name, ordinal=effect.ordinal)
        while True:
            for queue in (self.inbox.get(effect.name), self.world.signals.get(effect.name)):
                if queue:
                    return queue.pop(0)
            self.arrived.clear()
            self.waiting = True
            try:
                await asyncio.wait_for(self.arrived.wait(), self.world.signal_timeout)
            except asyncio.TimeoutError:
                raise LashRuntimeError(
                    "ValueError", f"wait_signal failed: no `{effect.name}` signal arrived",
                    effect.span) from None
            finally:
                self.waiting = False

    async def _SignalRunEffect(self, effect: fx.SignalRunEffect) -> None:
        target = self._child(effect.handle)
        if target is None:
            raise LashRuntimeError("ValueError", "signal_run failed: unknown run", effect.span)
        self._event("signal_run", target=target.run_id, name=effect.name, payload=effect.payload)
        target.inbox.setdefault(effect.name, []).append(effect.payload)
        target.arrived.set()
        return None

    async def _Finish(self, effect: fx.Finish) -> None:
        self._event("finish", value=effect.value)
        return None

    async def _Fail(self, effect: fx.Fail) -> None:
        self._event("fail", value=effect.value)
        return None


def _first_argument(payload: Any) -> Any:
    """The first positional argument: the record itself, or ``args[0]``."""
    if isinstance(payload, dict) and set(payload) == {"args"} and isinstance(payload["args"], list):
        return payload["args"][0] if payload["args"] else None
    return payload


__all__ = ["MemoryHost", "CANCELLED"]
