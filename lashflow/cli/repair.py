"""Commands that repair runs by hand: pause and unpause, one run or by query (ADR 0032)."""

from __future__ import annotations

from shlex import quote
from typing import Any, Optional

import typer

from .bulk import BulkDryRunOption, ReasonOption, RunArgument, WhereOption, on_the_run, the_run
from .context import Invocation
from .exits import run_async
from .options import DbOption, RunIdArgument, ErrorOption, JsonOption, ResultOption, ToolsOption, no_run, result_of
from .output import dumps, stdout
from .render import Display, paused_text


def pause(
    ctx: typer.Context,
    run_id: Optional[str] = RunArgument("The run to pause."),
    reason: Optional[str] = ReasonOption("Why: kept on the run and shown."),
    where: Optional[str] = WhereOption,
    dry_run: bool = BulkDryRunOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Pause a queued, running or waiting run: no worker takes it until `unpause`. An
    attempt in flight finishes and is recorded; waits keep their deadlines (one that
    passes meanwhile is met on unpause). Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    run = the_run(inv, db, "pause", run_id, where, dry_run, reason)

    def say(_: Any, outcome: Any) -> None:
        if as_json:
            stdout(dumps(outcome.to_json()))
        elif outcome.paused is not None:
            display.line(f"run {run} {paused_text(outcome.paused, display.when)}; "
                         f"`lashflow unpause {quote(run)}` continues it")

    on_the_run(inv, db, run, lambda eng: eng.pause(run, reason), say)


def unpause(
    ctx: typer.Context,
    run_id: Optional[str] = RunArgument("The paused run."),
    where: Optional[str] = WhereOption,
    dry_run: bool = BulkDryRunOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Put a paused run back in the queue: a worker replays it to where it stood (a
    deadline that passed while it was paused is met then). Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    run = the_run(inv, db, "unpause", run_id, where, dry_run)

    def say(status: Any, outcome: Any) -> None:
        if as_json:
            stdout(dumps(outcome.to_json()))
        else:
            display.line(f"run {run} is {status.value}: a worker takes it "
                         f"(or `lashflow resume {quote(run)}` drives it here)")

    on_the_run(inv, db, run, lambda eng: eng.unpause(run), say)


def resolve_step(
    ctx: typer.Context,
    run_id: str = RunIdArgument,
    step: str = typer.Argument(..., metavar="STEP",
                               help="The step: its key, or the row number `show` prints.",
                               show_default=False),
    result: Optional[str] = ResultOption("What the tool returned, as JSON (checked against "
                                         "its output schema)."),
    error: Optional[str] = ErrorOption("Record a tool error instead (the process sees "
                                       "{ok: false, error})."),
    reason: Optional[str] = typer.Option(None, "--reason", metavar="TEXT",
                                         help="Why: journaled with who and when."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Record by hand the outcome of an interrupted, failed or pending tool step (a
    non-idempotent call that did happen, an effect made by other means), journaled as an
    operator action; then the run goes on: a stopped run is queued for the workers (or
    `lashflow resume RUN`), a waiting one is made due. Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        from ..durable.resolve import MISSING

        value = result_of(result, error)
        value = MISSING if error is not None else value
        async with inv.engine(db, tools, create=False, absent=no_run(run_id)) as eng:
            view = await eng.resolve_step(run_id, step, result=value, error=error,
                                          reason=reason)
            outcome = await eng.get(run_id)
        if as_json:
            stdout(dumps({"run_id": run_id, "step": view.step_key, "tool": view.tool,
                          "outcome": view.outcome, "status": outcome.status.value}))
            return 0
        display.line(f"step {view.step_key} ({view.tool}) of run {run_id} resolved by hand; "
                     f"the run is {outcome.status.value}: a worker takes it "
                     f"(or `lashflow resume {quote(run_id)}` drives it here)")
        return 0

    raise typer.Exit(run_async(inv, go, run_id=run_id))


__all__ = ["pause", "resolve_step", "unpause"]
