"""Commands that read runs: list, show, waiting, output."""

from __future__ import annotations

from shlex import quote
from typing import Any, Optional

import typer

from ..errors import NoDatabase, UnknownStep
from ..states import RUN_STATUSES
from .context import Invocation
from .exits import EXIT_REJECTED, run_async
from .options import DbOption, RunIdArgument, JsonOption, no_run, parse_when
from .output import dumps, stderr, stdout
from .render import Display, render_runs, render_show, render_waiting, run_error_text
from ..json_text import pretty


def nothing_yet(display: Display, missing: Exception, empty: dict[str, Any]) -> int:
    """A listing where no database exists yet: empty, saying where lashflow looked."""
    if display.as_json:
        stdout(dumps(dict(empty, note=str(missing))))
    else:
        display.line(f"nothing yet: {missing}")
    return 0


def list_runs(
    ctx: typer.Context,
    status: Optional[str] = typer.Option(None, "--status", "-s", metavar="STATUS[,STATUS]",
                                         help="Only runs with these statuses: "
                                              + ", ".join(RUN_STATUSES) + "."),
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="Only runs of this process."),
    parent: Optional[str] = typer.Option(None, "--parent", metavar="RUN",
                                         help="Only the child runs of this run."),
    since: Optional[str] = typer.Option(None, "--since", metavar="WHEN",
                                        help="Only runs created at or after WHEN: an ISO 8601 "
                                             "time or an age such as 30m, 2h, 7d."),
    until: Optional[str] = typer.Option(None, "--until", metavar="WHEN",
                                        help="Only runs created before WHEN (as --since)."),
    limit: int = typer.Option(50, "--limit", "-n", min=1, max=1000, metavar="N",
                              help="Runs per page (1-1000)."),
    cursor: Optional[str] = typer.Option(None, "--cursor", metavar="CURSOR",
                                         help="The next page, as the previous page printed."),
    queue: Optional[str] = typer.Option(None, "--queue", "-q", metavar="NAME",
                                        help="Only runs of this queue."),
    key: Optional[str] = typer.Option(None, "--key", metavar="K",
                                      help="With --queue: only runs of this key in it."),
    schedule: Optional[str] = typer.Option(None, "--schedule", metavar="NAME",
                                           help="Only the runs this schedule started, newest "
                                                "first (up to --limit; no other filter)."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """List runs, newest first, one page at a time (the command for the next page is
    printed under the list)."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    statuses = [part.strip() for part in status.split(",") if part.strip()] if status else []

    async def go() -> int:
        from ..durable.outcome import RunPage
        from ..durable.reads import check_run_filters

        check_run_filters(statuses, limit)  # a bad filter is refused, database or not
        try:
            async with inv.engine(db, create=False) as eng:
                now = eng.clock.now()
                if schedule is not None:
                    page = RunPage(await eng.schedules.runs(schedule, limit))
                else:
                    page = await eng.runs(status=statuses, process=process, parent=parent,
                                          since=parse_when(since, "--since", now),
                                          until=parse_when(until, "--until", now),
                                          limit=limit, cursor=cursor, queue=queue, key=key)
        except NoDatabase as missing:  # nothing has run here: no runs, and no file made
            if schedule is not None:
                from ..errors import UnknownSchedule

                raise UnknownSchedule(f"no schedule named {schedule!r} ({missing})") from None
            return nothing_yet(display, missing, {"runs": [], "next_cursor": None})
        if as_json:
            stdout(dumps(page.to_json()))
            return 0
        if not page.runs:
            display.line("no runs" + (f" with status {status}" if status else ""))
            return 0
        render_runs(display, page.runs)
        if page.next_cursor:
            display.line(f"more: lashflow list --cursor {quote(page.next_cursor)}",
                         style="dim" if display.rich else None)
        return 0

    raise typer.Exit(run_async(inv, go))


def show(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to show.", show_default=False),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A run's status, input and its journal as a timeline: each step's tool, attempts,
    duration, start offset and outcome preview (through the output budget), its children
    and its parent."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            detail = await eng.run_detail(run_id)
        if as_json:
            stdout(dumps(detail.to_json()))
        else:
            render_show(display, detail)
            if detail.summary.note:  # e.g. a worker that lacks the run's tools
                display.line(f"note: {detail.summary.note}", style="yellow")
            if detail.journal_error is not None:
                stderr(run_error_text(detail.journal_error))
        # a journal that cannot be trusted is shown as far as it reads, and exits 2
        return EXIT_REJECTED if detail.journal_error is not None else 0

    raise typer.Exit(run_async(inv, go, run_id=run_id))


def waiting(
    ctx: typer.Context,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """What every parked run waits on, with the exact command that would resolve it."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        try:
            async with inv.engine(db, create=False) as eng:
                waits = await eng.waiting()
                now = eng.clock.now()
        except NoDatabase as missing:
            return nothing_yet(display, missing, {"waiting": []})
        if as_json:
            stdout(dumps({"waiting": [dict(w.to_json(), run_id=r) for r, w in waits]}))
        else:
            render_waiting(display, waits, now)
        return 0

    raise typer.Exit(run_async(inv, go))


def output(
    ctx: typer.Context,
    run_id: str = RunIdArgument,
    step: str = typer.Argument(..., metavar="STEP",
                               help="The step key, or the row number `show` prints.",
                               show_default=False),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """The full, unbudgeted output of one step (a failed tool step: its message and the
    journaled traceback)."""
    inv = Invocation.of(ctx, as_json)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            steps = await eng.steps(run_id)
        by_row = steps[int(step) - 1].step_key if step.isdigit() and \
            1 <= int(step) <= len(steps) and not any(s.step_key == step for s in steps) else step
        for s in steps:
            if s.step_key != by_row:
                continue
            value = s.outcome
            if s.kind == "tool" and isinstance(value, dict):
                if value.get("status") == "ok":
                    value = value.get("value")
                elif not as_json:
                    stdout(str(value.get("message") or value.get("value") or value.get("status")),
                           raw=True)
                    if value.get("traceback"):
                        stdout(str(value["traceback"]).rstrip(), raw=True)
                    return 0
            elif s.kind in ("print", "yield") and isinstance(value, dict):
                # a print is its text, byte-exact as for a tool's text; a yield its value
                value = value.get("text") if s.kind == "print" else value.get("value")
            if as_json:
                stdout(dumps({"run_id": run_id, "step": s.step_key, "kind": s.kind,
                              "tool": s.tool, "status": s.status, "outcome": value}))
            else:
                stdout(value if isinstance(value, str)
                       else pretty(value), raw=True)
            return 0
        known = ", ".join(s.step_key for s in steps[:6]) + (", ..." if len(steps) > 6 else "")
        raise UnknownStep(f"run {run_id} has no step {step!r}"
                          + (f" (its steps: {known})" if steps else " (it has no steps yet)"))

    raise typer.Exit(run_async(inv, go, run_id=run_id))

