"""The one seam between the interpreter and the world: the effects a program asks for.

The interpreter is deterministic: everything that is not (tool calls, time, signals,
child runs, observations, the end of the run) is an *effect* value handed to a ``Host``.
The in-memory host (tests) and the durable host (journal, replay, waits) both plug in
here, so the interpreter knows nothing about storage.

Every effect carries its ``step`` key ``<site_id>:<occurrence>`` computed by the
interpreter; batch members are ``<site_id>:<occurrence>:<i>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Union

from ..states import RunStatus

Value = Any  # a Lashlang runtime value (see lashflow.interp.values)


@dataclass(slots=True)
class ToolCall:
    """``module.operation(input)``; the host answers with a result wrapper record
    ``{"ok": True, "value": v}`` or ``{"ok": False, "error": "text"}``."""

    step: str
    module: str
    operation: str
    input: Value  # the JSON object sent to the tool (see ``tool_input``)
    span: tuple[int, int] = (0, 0)
    # A fan-out member: how many calls its batch formed (the journal keeps it, so a replay
    # that forms another number is a mismatch). None for any other call.
    width: int | None = None


@dataclass(slots=True)
class ToolBatch:
    """Several calls dispatched concurrently; answers a list of wrappers in call order."""

    step: str
    calls: list[ToolCall]
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class StartProcess:
    """Register a child run; answers a handle record ``{"__handle__": "process", "id": ...}``."""

    step: str
    process: str
    args: dict[str, Value]
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class AwaitHandle:
    """Join a child run (or any other handle leaf); answers a result wrapper."""

    step: str
    handle: Value
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class AwaitHandles:
    """The handle leaves an ``await`` joins, all at once (a record or list of handles):
    the host joins them together, so a run parked on several children says so; answers
    one result wrapper per leaf, in order."""

    awaits: list[AwaitHandle]


@dataclass(slots=True)
class CancelHandle:
    step: str
    handle: Value
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class Observe:
    """``print`` (main block) or ``yield``/``wake`` (process): answers None."""

    step: str
    kind: str  # "print" | "yield" | "wake"
    value: Value
    text: str
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class SleepEffect:
    step: str
    mode: str  # "for" | "until"
    value: Value
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class WaitSignalEffect:
    """Wait for the ``ordinal``-th (1-based) signal called ``name``; answers its payload."""

    step: str
    name: str
    ordinal: int
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class SignalRunEffect:
    step: str
    handle: Value
    name: str
    payload: Value
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class Finish:
    value: Value
    span: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class Fail:
    value: Value
    span: tuple[int, int] = (0, 0)
    text: str = ""  # the failure's text, from the value before it became JSON (a tuple stays one)


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


@dataclass(slots=True)
class RunResult:
    """How an interpreter run ended (before the host maps it to a run status)."""

    status: RunStatus  # finished or failed
    value: Value = None
    error: Any = None
    prints: list[str] = field(default_factory=list)
