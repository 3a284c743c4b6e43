"""Commands that act on runs from outside: complete, signal, cancel, and gc (retention)."""

from __future__ import annotations

import time
from shlex import quote
from typing import Any, Optional

import typer

from ..errors import UsageError
from ..states import RunStatus
from .bulk import (
    BulkDryRunOption, ReasonOption, RunArgument, WhereOption, bulk_command, on_the_run, the_run,
)
from .context import Invocation
from .exits import reject, run_async
from .options import (DbOption, ErrorOption, JsonOption, MaxWaitOption, ResultOption, no_key,
                      no_run, parse_age, parse_json_option, result_of)
from .output import dumps, stdout
from .render import Display, render_outcome
from .driving import finish, live_status


def complete(
    ctx: typer.Context,
    key: str = typer.Argument(..., metavar="KEY",
                              help="The completion key (lfk_...), as printed by `run` "
                                        "or `waiting`.", show_default=False),
    result: Optional[str] = ResultOption("The tool's result, as JSON."),
    error: Optional[str] = ErrorOption("Resolve as a tool error with this message (the "
                                       "process sees {ok: false, error})."),
    resume_run: bool = typer.Option(False, "--resume",
                                    help="Drive the run on after delivery (exit codes then as "
                                         "`run`)."),
    max_wait: float = MaxWaitOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Resolve a completion key: the first writer wins (a later different result gets
    completion_already_resolved, the same result again is a duplicate and exits 0, a
    forged or unknown key gets unknown_completion_key)."""
    from ..tools import ToolResult

    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    started = time.monotonic()

    async def go() -> int:
        value = result_of(result, error)
        value = ToolResult.err(error) if error is not None else ToolResult.ok(value)
        async with inv.engine(db, create=False, absent=no_key) as eng:
            with live_status(inv, "complete", quiet=not resume_run) as live:
                eng.listeners.append(live.on_event)
                delivery = await eng.deliver(key, value, resume=resume_run)
                run_id = delivery.run_id
                outcome = await eng.get(run_id)
                if not resume_run:
                    return _delivered(display, run_id, outcome.status.value, delivery.duplicate)
                if delivery.duplicate and not as_json:
                    display.line("this very result was delivered before: nothing changed")
                outcome = await eng.settle(outcome, max_wait=max_wait)
            return finish(display, outcome, started)

    raise typer.Exit(run_async(inv, go))


def _delivered(display: Display, run_id: str, status: str, duplicate: bool) -> int:
    """The answer of `complete` without --resume; a repeat of the result the key already
    holds is answered as HTTP answers it (``duplicate``), not as an error."""
    if display.as_json:
        stdout(dumps({"run_id": run_id, "status": status, "delivered": not duplicate,
                      "duplicate": duplicate}))
        return 0
    hint = (f"; continue it with `lashflow resume {quote(run_id)}`"
            if status == RunStatus.WAITING else "")
    what = ("this very result was delivered before: nothing changed"
            if duplicate else "delivered")
    display.line(f"{what}; run {run_id} is {status}{hint}")
    return 0


def signal(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to signal.", show_default=False),
    name: str = typer.Argument(..., metavar="NAME",
                               help="The signal name (as in wait_signal(\"name\")).",
                               show_default=False),
    payload: Optional[str] = typer.Option(None, "--payload", metavar="JSON|@FILE",
                                          help="The signal's payload, as JSON (default null)."),
    max_wait: float = MaxWaitOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Deliver a signal; a run waiting for it is driven on at once. Signals are kept in
    order: the n-th wait_signal("name") gets the n-th signal of that name. Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        data = parse_json_option(payload, "--payload")
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            with live_status(inv, f"signal {name}") as live:
                eng.listeners.append(live.on_event)
                await eng.signal(run_id, name, data)
                outcome = await eng.settle(await eng.get(run_id), max_wait=max_wait)
        if as_json:
            stdout(dumps(outcome.to_json()))
        else:
            display.line(f"signal {name} delivered")
            render_outcome(display, outcome)
        return 0

    raise typer.Exit(run_async(inv, go, run_id=run_id))


def cancel(
    ctx: typer.Context,
    run_id: Optional[str] = RunArgument("The run to cancel."),
    reason: Optional[str] = ReasonOption("Why: kept in the run's error and shown."),
    where: Optional[str] = WhereOption,
    dry_run: bool = BulkDryRunOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Cancel a run: at once if parked or queued, at its next effect if a worker is
    driving it (in-flight attempts are cancelled). Pending tool calls follow their
    on_cancel. With --where, a cancel is requested on every run selected and each is
    settled by the next drive that takes it (a worker's). Exit 0."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    run = the_run(inv, db, "cancel", run_id, where, dry_run, reason)

    async def act(eng: Any) -> tuple[Any, Any]:
        before = (await eng.get(run)).status
        return before, await eng.cancel(run, reason)

    def say(answer: tuple[Any, Any], outcome: Any) -> None:
        before, status = answer
        if before.settled:  # nothing to cancel: say so, change nothing
            if as_json:
                stdout(dumps(dict(outcome.to_json(), already_settled=True)))
            else:
                display.line(f"run {run} is already {before.value}; it is left as it is")
            return
        if as_json:
            data = outcome.to_json()
            if outcome.status != RunStatus.CANCELLED:
                data["cancel_requested"] = True
            stdout(dumps(data))
        elif outcome.status == RunStatus.CANCELLED:  # what was asked: a success, not an error
            why = f" ({reason})" if reason else ""
            display.line(f"run {run} cancelled{why}", style="magenta" if display.rich else None)
        else:
            display.line(f"cancel requested: run {run} is {status.value}; it stops at its "
                         "next effect")

    on_the_run(inv, db, run, act, say)


def gc(
    ctx: typer.Context,
    older_than: Optional[str] = typer.Option(None, "--older-than", metavar="AGE",
                                             help="Delete settled runs not updated for this "
                                                  "long: 30d, 12h, 90m..."),
    where: Optional[str] = WhereOption,
    status: str = typer.Option("finished,failed,cancelled", "--status", metavar="STATUS[,...]",
                               help="Which settled runs (finished, failed, cancelled)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would go; delete nothing."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Retention: delete old settled runs with their journals, completion keys, signals
    and the output blobs only they used, in short batches (workers keep running)."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    if (older_than is None) == (where is None):
        raise reject(UsageError("give --older-than AGE, or choose runs with --where EXPR "
                                "(e.g. \"status=failed and updated<30d\"), not both"), as_json)
    if where is not None:  # settled runs only, whatever the expression selects
        raise typer.Exit(bulk_command(inv, db, "gc", where, dry_run=dry_run))
    assert older_than is not None

    async def go() -> int:
        age = parse_age(older_than, "--older-than")
        async with inv.engine(db) as eng:
            report = await eng.gc(age, [s.strip() for s in status.split(",") if s.strip()],
                                  dry_run=dry_run)
        if as_json:
            stdout(dumps(report.to_json()))
        elif dry_run:
            display.line(f"would delete {report.runs} run(s)"
                         + (f", e.g. {', '.join(report.run_ids[:5])}" if report.run_ids else ""))
        else:
            display.line(f"deleted {report.runs} run(s) and {report.blobs} unreferenced "
                         "blob(s)")
        return 0

    raise typer.Exit(run_async(inv, go))

