"""Commands that repair runs by hand: pause and unpause (ADR 0032)."""

from __future__ import annotations

from shlex import quote
from typing import Optional

import typer

from .context import Invocation
from .exits import run_async
from .options import DbOption, JsonOption, no_run
from .output import dumps, stdout
from .render import Display, paused_text


def pause(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to pause.",
                                 show_default=False),
    reason: Optional[str] = typer.Option(None, "--reason", metavar="TEXT",
                                         help="Why: kept on the run and shown."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Pause a queued, running or waiting run: no worker takes it until `unpause`. An
    attempt in flight finishes and is recorded; waits keep their deadlines (one that
    passes meanwhile is met on unpause). Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            await eng.pause(run_id, reason)
            outcome = await eng.get(run_id)
        if as_json:
            stdout(dumps(outcome.to_json()))
        elif outcome.paused is not None:
            display.line(f"run {run_id} {paused_text(outcome.paused, display.when)}; "
                         f"`lashflow unpause {quote(run_id)}` continues it")
        return 0

    raise typer.Exit(run_async(inv, go, run_id=run_id))


def unpause(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., metavar="RUN", help="The paused run.",
                                 show_default=False),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Put a paused run back in the queue: a worker replays it to where it stood (a
    deadline that passed while it was paused is met then). Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            status = await eng.unpause(run_id)
            outcome = await eng.get(run_id)
        if as_json:
            stdout(dumps(outcome.to_json()))
        else:
            display.line(f"run {run_id} is {status.value}: a worker takes it "
                         f"(or `lashflow resume {quote(run_id)}` drives it here)")
        return 0

    raise typer.Exit(run_async(inv, go, run_id=run_id))


__all__ = ["pause", "unpause"]
