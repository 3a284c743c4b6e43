"""Progress events for live displays (the CLI's status line, tests)."""

from __future__ import annotations

from typing import Any, Callable

Listener = Callable[[dict[str, Any]], None]


class Events:
    """``notify`` hands each event to every listener, in order, on the engine's loop.

    Events: ``tools`` (calls now in flight: ``tools``, their names), ``step`` (a step
    recorded: ``step``, ``kind``, ``tool``, ``status``), ``run`` (a drive ended:
    ``status``); each carries ``run_id``. Listeners must be quick."""

    __slots__ = ("listeners",)

    def __init__(self) -> None:
        self.listeners: list[Listener] = []

    def __bool__(self) -> bool:
        return bool(self.listeners)

    def notify(self, event: dict[str, Any]) -> None:
        for listener in self.listeners:
            listener(event)


__all__ = ["Events", "Listener"]
