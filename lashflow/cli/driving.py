"""Driving one run from a command and reporting how it ended: what `run`, `resume`,
`retry`, `fork` and `complete --resume` share. No typer here: `resume` reaches it
through the lean entry (``lean``) as well as through the typer application."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from .context import Invocation
from .exits import EXIT_BY_STATUS
from .live import LiveStatus
from .sources import read_source
from .output import dumps, stdout
from .render import Display, render_outcome


def finish(display: Display, outcome: Any, started: float | None = None) -> int:
    """Report a run outcome; the exit code follows its status."""
    if display.as_json:
        stdout(dumps(outcome.to_json()))
    else:
        render_outcome(display, outcome, None if started is None else time.monotonic() - started)
    return EXIT_BY_STATUS.get(outcome.status.value, 0)


def live_status(inv: Invocation, label: str, quiet: bool = False) -> LiveStatus:
    """The live status line for a command that drives runs (off with ``--json``)."""
    return LiveStatus.for_command(inv.as_json or quiet, label, inv.when)


def driving(inv: Invocation, db: Optional[str], tools: list[str], label: str,
            max_wait: float, follow: bool, source: Optional[Path],
            act: Callable[[Any], Awaitable[Any]]) -> Callable[[], Awaitable[int]]:
    """A command that drives one run: ``act(engine)`` starts it, then ``Engine.settle``
    keeps it going (short sleeps, ``--follow``) with a live status line, then the report."""
    display = Display.of(inv)
    started = time.monotonic()

    async def go() -> int:
        if source is not None:
            read_source(source)
        async with inv.engine(db, tools) as eng:
            with live_status(inv, label) as live:
                eng.listeners.append(live.on_event)
                outcome = await eng.settle(await act(eng), max_wait=max_wait, follow=follow)
            return finish(display, outcome, started)

    return go


def resume_command(inv: Invocation, run_id: str, source: Optional[Path],
                   retry_interrupted: bool, tools: list[str], db: Optional[str],
                   max_wait: float, follow: bool) -> int:
    """`lashflow resume`, once its arguments are read (by typer or by the lean entry)."""
    from .exits import run_async
    from .sources import source_or_none

    go = driving(inv, db, tools, f"resume {run_id}", max_wait, follow, source,
                 lambda eng: eng.resume(run_id, source, retry_interrupted=retry_interrupted))
    return run_async(inv, go, source_or_none(source), str(source) if source else None, run_id)
