"""``lashflow watch RUN``: a run's events as they are written (ADR 0033).

On a terminal a rich live view redraws in place: the run's status, its steps as they are
recorded (tool, state, tries, time taken), what it waits on, the last ``yield`` and the
result. Elsewhere each event is one line (``--json``: the event as JSON). The view ends
when the run settles; the exit code is ``run``'s for that status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import typer

from ..states import SETTLED, RunStatus
from .context import Invocation
from .exits import EXIT_BY_STATUS, run_async
from .options import DbOption, JsonOption, no_run
from .output import dumps, stdout
from .output import printable
from .render import Display, seconds

SHOWN_STEPS = 12  # the latest steps the live view keeps on screen
_STATUS_STYLE: dict[str, str] = {RunStatus.FINISHED: "green", RunStatus.FAILED: "red",
                                 RunStatus.WAITING: "yellow"}


@dataclass
class _Step:
    index: int
    name: str
    state: str
    tries: int = 0
    took: float | None = None


@dataclass
class WatchState:
    """What the events have said so far about one run."""

    run_id: str
    status: str = "?"
    process: str | None = None
    steps: dict[str, _Step] = field(default_factory=dict)
    waiting: list[dict[str, Any]] = field(default_factory=list)
    last_yield: Any = None
    prints: list[str] = field(default_factory=list)
    result: Any = None
    error: dict[str, Any] | None = None
    seen: int = 0

    def apply(self, event: Any) -> None:
        data, kind = event.data, event.kind
        self.seen = event.seq
        if kind == "run":
            self.status = data.get("status", self.status)
            self.process = data.get("process", self.process)
            self.waiting = data.get("waiting", [])
            self.error = data.get("error")
            self.result = data.get("result")
        elif kind == "yield":
            self.last_yield = data.get("value")
        elif kind == "print":
            self.prints = (self.prints + [str(data.get("text", ""))])[-3:]
        elif kind in ("step", "attempt"):
            self._step(kind, data)

    def _step(self, kind: str, data: dict[str, Any]) -> None:
        key = data.get("step", "")
        row = self.steps.get(key)
        if row is None:
            name = data.get("tool") or data.get("step_kind") or "step"
            if data.get("step_kind") == "wait_signal":
                name = f"signal {name}"
            row = self.steps[key] = _Step(len(self.steps) + 1, name, "")
        attempts = data.get("attempts", [data] if kind == "attempt" else [])
        for attempt in attempts:
            row.tries = max(row.tries, int(attempt.get("attempt", 1)))
            start, end = attempt.get("started_at"), attempt.get("finished_at")
            if start is not None and end is not None:
                row.took = (row.took or 0.0) + (end - start)
        if kind == "step":
            row.state = data.get("outcome") or data.get("status", "")
        elif attempts and row.state not in ("ok", "err", "done"):
            row.state = f"try {row.tries}: {attempts[-1].get('status')}"

    def line(self, event: Any) -> str:
        """One plain line for an event."""
        data = event.data
        what = {"run": lambda: data.get("status", ""),
                "yield": lambda: dumps(data.get("value")),
                "print": lambda: str(data.get("text", ""))}.get(event.kind)
        if what is not None:
            return printable(f"{event.seq:>5} {event.kind:<7} {what()}")
        name = data.get("tool") or data.get("step_kind") or ""
        state = data.get("outcome") or data.get("status", "")
        return printable(f"{event.seq:>5} {event.kind:<7} {name} {state} {data.get('step', '')}")


def _view(state: WatchState, when: Any) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text()
    head.append(f"run {state.run_id}", style="bold")
    head.append(f"  {state.process or 'main'}  ", style="dim")
    head.append(state.status, style=_STATUS_STYLE.get(state.status, "cyan"))
    head.append(f"  {len(state.steps)} steps · event {state.seen}", style="dim")
    table = Table(box=None, pad_edge=False, expand=False, show_edge=False)
    table.add_column("#", justify="right", no_wrap=True, min_width=3)
    table.add_column("step", overflow="ellipsis", no_wrap=True, ratio=1, max_width=40)
    table.add_column("state", no_wrap=True, min_width=8)
    table.add_column("tries", justify="right", no_wrap=True)
    table.add_column("took", justify="right", no_wrap=True, min_width=7)
    rows = list(state.steps.values())[-SHOWN_STEPS:]
    for row in rows:
        style = {"ok": "green", "done": "green", "err": "red", "failed": "red",
                 "pending": "yellow", "started": "cyan"}.get(row.state, "")
        table.add_row(str(row.index), printable(row.name), Text(row.state, style=style),
                      str(row.tries or ""), seconds(row.took) if row.took is not None else "")
    parts: list[Any] = [head, table]
    for wait in state.waiting:
        what = wait.get("tool") or wait.get("signal") or wait.get("child_run_id") or ""
        until = f" until {when(wait['until'])}" if wait.get("until") else ""
        parts.append(Text(printable(f"waiting on {wait.get('kind')} {what}{until}"),
                          style="yellow", overflow="ellipsis", no_wrap=True))
    if state.last_yield is not None:
        parts.append(Text(printable(f"yield {dumps(state.last_yield)}"), overflow="ellipsis",
                          no_wrap=True))
    for text in state.prints:
        parts.append(Text(printable(text), style="dim", overflow="ellipsis", no_wrap=True))
    if state.status == RunStatus.FINISHED:
        parts.append(Text(printable(f"result {dumps(state.result)}"), style="green",
                          overflow="ellipsis", no_wrap=True))
    if state.error:
        parts.append(Text(printable(f"error[{state.error.get('code')}]: "
                                    f"{state.error.get('message')}"), style="red",
                          overflow="ellipsis", no_wrap=True))
    return Group(*parts)


def watch(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to watch.",
                                 show_default=False),
    after: int = typer.Option(0, "--after", metavar="N", min=0,
                              help="Start after event N (what an earlier watch saw last)."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A run live: its steps as they are recorded, its waits, yields and result, until it
    settles (from its journal, so it can be watched from any machine sharing the
    database). Exit code as `run`'s for the status it settled in.

    With --json: one event per line, {"run_id", "seq", "kind", "at", ...}."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            state = WatchState(run_id)
            events = await eng.subscribe(run_id, after)
            live = None
            if display.rich:
                from rich.live import Live

                live = Live(_view(state, inv.when), console=display.console,
                            auto_refresh=False, transient=False)
                live.start()
            try:
                async for event in events:
                    if event is None:  # a quiet while
                        continue
                    state.apply(event)
                    if live is not None:
                        live.update(_view(state, inv.when), refresh=True)
                    else:
                        stdout(dumps(event.to_json()) if as_json else state.line(event))
                    if event.kind == "run" and state.status in SETTLED and \
                            (await eng.get_record(run_id)).status in SETTLED:
                        break
            finally:
                if live is not None:
                    live.stop()
                await events.aclose()
        return EXIT_BY_STATUS.get(state.status, 0)

    raise typer.Exit(run_async(inv, go, run_id=run_id))


__all__ = ["WatchState", "watch"]
