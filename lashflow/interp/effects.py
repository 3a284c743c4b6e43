"""The one seam between the interpreter and the world: the effects a program asks for.

The interpreter is deterministic: everything that is not (tool calls, time, signals,
child runs, observations, the end of the run) is an *effect* value handed to a ``Host``.
The in-memory host (tests) and the durable host (journal, replay, waits) both plug in
here, so the interpreter knows nothing about storage.

Every effect carries its ``step`` key ``<site_id>:<occurrence>`` computed by the
interpreter; batch members are ``<site_id>:<occurrence>:<i>``.
"""

from __future__ import annotations

from typing import Any, Protocol, Union

from ..slotted import Slotted
from ..states import RunStatus

Value = Any  # a Lashlang runtime value (see lashflow.interp.values)


class ToolCall(Slotted):
    """``module.operation(input)``; the host answers with a result wrapper record
    ``{"ok": True, "value": v}`` or ``{"ok": False, "error": "text"}``."""

    __slots__ = ("step", "module", "operation", "input", "span", "width")

    def __init__(
            self,
            step: str,
            module: str,
            operation: str,
            input: Value,  # the JSON object sent to the tool (see ``tool_input``)
            span: tuple[int, int] = (0, 0),
            # A fan-out member: how many calls its batch formed (the journal keeps it, so a replay
            # that forms another number is a mismatch). None for any other call.
            width: int | None = None,
    ) -> None:
        self.step = step
        self.module = module
        self.operation = operation
        self.input = input
        self.span = span
        self.width = width


class ToolBatch(Slotted):
    """Several calls dispatched concurrently; answers a list of wrappers in call order."""

    __slots__ = ("step", "calls", "span")

    def __init__(self, step: str, calls: list[ToolCall], span: tuple[int, int] = (0, 0)) -> None:
        self.step = step
        self.calls = calls
        self.span = span


class StartProcess(Slotted):
    """Register a child run; answers a handle record ``{"__handle__": "process", "id": ...}``."""

    __slots__ = ("step", "process", "args", "span")

    def __init__(
            self,
            step: str,
            process: str,
            args: dict[str, Value],
            span: tuple[int, int] = (0, 0),
    ) -> None:
        self.step = step
        self.process = process
        self.args = args
        self.span = span


class AwaitHandle(Slotted):
    """Join a child run (or any other handle leaf); answers a result wrapper."""

    __slots__ = ("step", "handle", "span")

    def __init__(self, step: str, handle: Value, span: tuple[int, int] = (0, 0)) -> None:
        self.step = step
        self.handle = handle
        self.span = span


class AwaitHandles(Slotted):
    """The handle leaves an ``await`` joins, all at once (a record or list of handles):
    the host joins them together, so a run parked on several children says so; answers
    one result wrapper per leaf, in order."""

    __slots__ = ("awaits",)

    def __init__(self, awaits: list[AwaitHandle]) -> None:
        self.awaits = awaits


class CancelHandle(Slotted):
    __slots__ = ("step", "handle", "span")

    def __init__(self, step: str, handle: Value, span: tuple[int, int] = (0, 0)) -> None:
        self.step = step
        self.handle = handle
        self.span = span


class Observe(Slotted):
    """``print`` (main block) or ``yield``/``wake`` (process): answers None."""

    __slots__ = ("step", "kind", "value", "text", "span")

    def __init__(
            self,
            step: str,
            kind: str,  # "print" | "yield" | "wake"
            value: Value,
            text: str,
            span: tuple[int, int] = (0, 0),
    ) -> None:
        self.step = step
        self.kind = kind
        self.value = value
        self.text = text
        self.span = span


class SleepEffect(Slotted):
    __slots__ = ("step", "mode", "value", "span")

    def __init__(
            self,
            step: str,
            mode: str,  # "for" | "until"
            value: Value,
            span: tuple[int, int] = (0, 0),
    ) -> None:
        self.step = step
        self.mode = mode
        self.value = value
        self.span = span


class WaitSignalEffect(Slotted):
    """Wait for the ``ordinal``-th (1-based) signal called ``name``; answers its payload."""

    __slots__ = ("step", "name", "ordinal", "span")

    def __init__(self, step: str, name: str, ordinal: int, span: tuple[int, int] = (0, 0)) -> None:
        self.step = step
        self.name = name
        self.ordinal = ordinal
        self.span = span


class SignalRunEffect(Slotted):
    __slots__ = ("step", "handle", "name", "payload", "span")

    def __init__(
            self,
            step: str,
            handle: Value,
            name: str,
            payload: Value,
            span: tuple[int, int] = (0, 0),
    ) -> None:
        self.step = step
        self.handle = handle
        self.name = name
        self.payload = payload
        self.span = span


class Finish(Slotted):
    __slots__ = ("value", "span")

    def __init__(self, value: Value, span: tuple[int, int] = (0, 0)) -> None:
        self.value = value
        self.span = span


class Fail(Slotted):
    __slots__ = ("value", "span", "text")

    def __init__(
            self,
            value: Value,
            span: tuple[int, int] = (0, 0),
            text: str = "",  # the failure's text, from the value before it became JSON (a tuple stays one)
    ) -> None:
        self.value = value
        self.span = span
        self.text = text


Effect = Union[
    ToolCall, ToolBatch, StartProcess, AwaitHandles, CancelHandle, Observe, SleepEffect,
    WaitSignalEffect, SignalRunEffect, Finish, Fail,
]


class Host(Protocol):
    """Performs effects for one run. ``perform`` may raise ``Parked`` (durable hosts) to
    stop the run where it stands; the run is resumed later by replay."""

    async def perform(self, effect: Effect) -> Value: ...


class Parked(Exception):
    """Raised by a durable host when the run must wait (key, timer, signal, child)."""

    def __init__(self, waits: list[Any] | None = None) -> None:
        super().__init__("run parked")
        self.waits = waits or []


class RunResult(Slotted):
    """How an interpreter run ended (before the host maps it to a run status)."""

    __slots__ = ("status", "value", "error", "prints")

    def __init__(
            self,
            status: RunStatus,  # finished or failed
            value: Value = None,
            error: Any = None,
            prints: list[str] | None = None,
    ) -> None:
        self.status = status
        self.value = value
        self.error = error
        self.prints = [] if prints is None else prints
