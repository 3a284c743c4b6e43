"""The live status line a command keeps on stderr while the engine drives its runs.

``Engine.settle`` decides what to drive and when; this only shows it, from the engine's
events (``tools``, ``step``, ``run`` and settle's ``phase``).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from ..states import StepStatus
from .context import Invocation
from .output import is_terminal
from .render import seconds, wait_what

if TYPE_CHECKING:
    from ..durable.events import Event, PhaseEvent


class LiveStatus:
    """An engine listener that keeps a one-line rich status on stderr while a command
    drives runs: steps recorded, tools in flight (and for how long), elapsed, waits.

    Disabled (a no-op) unless stderr is a terminal and the output is not ``--json``.
    ``when`` shows a moment (the invocation's ``--utc`` choice)."""

    def __init__(self, enabled: bool, label: str = "",
                 when: Callable[[float | None], str] | None = None) -> None:
        self.enabled = enabled
        self.label = label
        self.when = when or Invocation().when
        self.started = time.monotonic()
        self.steps = 0
        self.runs: dict[str, None] = {}  # in the order first seen
        self.in_flight: dict[str, list[float]] = {}
        self.last = ""
        self.phase = "driving"
        self.until: float | None = None
        self._live: Any = None
        self._spinner: Any = None

    @classmethod
    def for_command(cls, as_json: bool, label: str = "",
                    when: Callable[[float | None], str] | None = None) -> "LiveStatus":
        return cls(not as_json and is_terminal(sys.stderr), label, when)

    # -- engine events ------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        """``Engine`` events: ``tools`` (a batch starts), ``step`` (a step recorded),
        ``run`` (a drive ended), ``phase`` (what ``settle`` is doing)."""
        now = time.monotonic()
        if event.get("run_id"):
            self.runs.setdefault(event["run_id"], None)
        if event["type"] == "tools":
            for name in event["tools"]:
                self.in_flight.setdefault(name, []).append(now)
            self.phase = "driving"
        elif event["type"] == "step":
            tool = event["tool"]
            if event["kind"] == "tool" and tool in self.in_flight and \
                    event["status"] in (StepStatus.DONE, StepStatus.PENDING):
                started = self.in_flight[tool]
                started.pop(0)
                if not started:
                    del self.in_flight[tool]
            if event["status"] == StepStatus.DONE:
                self.steps += 1
            self.last = f"{event['kind']} {tool or ''}".strip() + f" {event['status']}"
        elif event["type"] == "run":
            self.in_flight.clear()
        elif event["type"] == "phase":
            self._on_phase(event)

    def _on_phase(self, event: PhaseEvent) -> None:
        phase = event.get("phase")
        if phase == "sleeping":
            self.set_phase(f"sleeping until {self.when(event['until'])}", until=event["until"])
        elif phase == "following":
            waits = "; ".join(wait_what(w, self.when) for w in event.get("waits", []))
            self.set_phase(f"following: waiting on {waits}")
        elif phase == "elsewhere":
            self.set_phase(f"{event.get('status')} in another worker")
        else:
            self.set_phase("driving")

    def set_phase(self, phase: str, until: float | None = None) -> None:
        self.phase, self.until = phase, until

    # -- rendering ------------------------------------------------------------------------
    def text(self) -> str:
        """The status line (also what tests read)."""
        now = time.monotonic()
        first = next(iter(self.runs), None)  # the run this command drives, once known
        named = f" (run {first})" if first and first not in self.label else ""
        parts = [f"{self.label}{named} {self.phase}".strip(), f"{self.steps} step(s) recorded"]
        if len(self.runs) > 1:
            parts.append(f"{len(self.runs)} runs")
        if self.in_flight:
            flying = ", ".join(f"{name}" + (f" x{len(v)}" if len(v) > 1 else "")
                               + f" ({seconds(now - min(v))})"
                               for name, v in sorted(self.in_flight.items()))
            parts.append(f"in flight: {flying}")
        elif self.last:
            parts.append(f"last: {self.last}")
        if self.until is not None:
            parts.append(f"{seconds(max(0.0, self.until - time.time()))} left")
        parts.append(f"elapsed {seconds(now - self.started)}")
        return " · ".join(parts)

    def __rich__(self) -> Any:
        if self._spinner is None:
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", style="cyan")
        self._spinner.update(text=self.text())
        return self._spinner

    def __enter__(self) -> "LiveStatus":
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self, console=Console(stderr=True), refresh_per_second=8,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
