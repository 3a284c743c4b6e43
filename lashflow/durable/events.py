"""Progress events for live displays (the CLI's status line, the worker's log, tests).

Each event is a plain dict (what listeners have always been handed, at no cost per step);
its shape is one of the ``TypedDict``s below, told apart by ``type``, so mypy checks what
the engine sends and what a listener reads."""

from __future__ import annotations

from typing import Any, Callable, Literal, TypedDict, Union

from ..states import RunStatus, StepStatus


class DriveEvent(TypedDict):
    """A drive started (``resumed``: the run had been driven before)."""

    type: Literal["drive"]
    run_id: str
    process: str | None
    resumed: bool


class ToolsEvent(TypedDict):
    """A batch of tool calls is now in flight: their names."""

    type: Literal["tools"]
    run_id: str
    tools: list[str]


class StepEvent(TypedDict):
    """A step recorded (or parked, or started)."""

    type: Literal["step"]
    run_id: str
    step: str
    kind: str
    tool: str | None
    status: StepStatus


class _RunEnded(TypedDict):
    type: Literal["run"]
    run_id: str
    status: RunStatus
    error: str | None


class RunEndedEvent(_RunEnded, total=False):
    """A drive ended: the run's new status, what it parked on ((kind, step) pairs), the
    error's code."""

    waiting: list[tuple[str, str]]


class PhaseEvent(TypedDict, total=False):
    """What ``Engine.settle`` is doing: ``phase`` and, by phase, ``until`` (sleeping),
    ``waits`` (following) or ``status`` (elsewhere)."""

    type: Literal["phase"]
    run_id: str
    phase: str
    until: float
    waits: list[Any]
    status: str


Event = Union[DriveEvent, ToolsEvent, StepEvent, RunEndedEvent, PhaseEvent]
Listener = Callable[[Event], None]


class Events:
    """``notify`` hands each event to every listener, in order, on the engine's loop.
    Listeners must be quick."""

    __slots__ = ("listeners",)

    def __init__(self) -> None:
        self.listeners: list[Listener] = []

    def __bool__(self) -> bool:  # the per-step path reads ``listeners`` (no call)
        return bool(self.listeners)

    def notify(self, event: Event) -> None:
        for listener in self.listeners:
            listener(event)


__all__ = ["DriveEvent", "Event", "Events", "Listener", "PhaseEvent", "RunEndedEvent",
           "StepEvent", "ToolsEvent"]
