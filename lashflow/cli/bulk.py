"""``--where EXPR [--dry-run]`` on cancel, retry, pause, unpause and gc: one bulk action
over every run the expression selects, with a progress bar on a terminal (ADR 0032)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, NoReturn, Optional, TypeVar

import typer

from ..durable.selection import EXAMPLE, FIELDS
from ..errors import UsageError
from .context import Invocation
from .options import no_run
from .output import dumps, stdout
from .render import Display

T = TypeVar("T")

WhereOption: Any = typer.Option(
    None, "--where", metavar="EXPR",
    help=f"Act on every run this selects instead of one: conditions joined by `and`, e.g. "
         f"\"{EXAMPLE}\" (fields: {', '.join(FIELDS)}; `all`).")
BulkDryRunOption: Any = typer.Option(False, "--dry-run",
                                     help="With --where: count what would be acted on; "
                                          "change nothing.")

DONE = {"cancel": "cancel requested", "retry": "queued again", "pause": "paused",
        "unpause": "queued again", "gc": "deleted", "upgrade": "moved"}
WOULD = {"cancel": "would cancel", "retry": "would retry", "pause": "would pause",
         "unpause": "would unpause", "gc": "would delete", "upgrade": "would move"}


def RunArgument(help: str) -> Any:  # noqa: N802 (reads as the other options do)
    """A command's RUN, left out when it takes --where instead."""
    return typer.Argument(None, metavar="[RUN]", help=help, show_default=False)


def ReasonOption(help: str) -> Any:  # noqa: N802
    return typer.Option(None, "--reason", metavar="TEXT", help=help)


def one_or_where(inv: Invocation, run_id: Optional[str], where: Optional[str]) -> None:
    """A command takes RUN or --where, exactly one (else ``usage_error``, exit 2)."""
    if (run_id is None) == (where is None):
        from .exits import reject

        raise reject(UsageError("name one RUN, or choose runs with --where EXPR (not both)"),
                     inv.as_json)


def the_run(inv: Invocation, db: Optional[str], action: str, run_id: Optional[str],
            where: Optional[str], dry_run: bool, reason: Optional[str] = None) -> str:
    """The one run a command names; with --where the bulk action runs instead, and the
    command ends with it."""
    one_or_where(inv, run_id, where)
    if where is not None:
        raise typer.Exit(bulk_command(inv, db, action, where, dry_run=dry_run, reason=reason))
    assert run_id is not None
    return run_id


def on_the_run(inv: Invocation, db: Optional[str], run_id: str,
               act: Callable[[Any], Awaitable[T]], say: Callable[[T, Any], None]) -> NoReturn:
    """Open the database, ``act`` on the run with the engine, then ``say`` what came of
    it (the answer and the run's outcome after it); exit 0, or as the error says."""
    from .exits import run_async

    async def go() -> int:
        async with inv.engine(db, create=False, absent=no_run(run_id)) as eng:
            answer = await act(eng)
            outcome = await eng.get(run_id)
        say(answer, outcome)
        return 0

    raise typer.Exit(run_async(inv, go, run_id=run_id))


def bulk_command(inv: Invocation, db: Optional[str], action: str, where: str, *,
                 dry_run: bool, reason: Optional[str] = None, to: Optional[int] = None,
                 tools: tuple[str, ...] = ()) -> int:
    """Run the bulk action and print its report (``--json``: the report's JSON)."""
    from .exits import run_async

    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, tools, create=False) as eng:
            eng.bulk_actions.plan(action, where, dry_run)  # refuse a bad --where first
            with _bar(display, action, dry_run) as progress:
                report = await eng.bulk(action, where, dry_run=dry_run, reason=reason, to=to,
                                        progress=progress)
        if display.as_json:
            stdout(dumps(report.to_json()))
            return 0
        what = (WOULD if dry_run else DONE)[action]
        display.line(f"{report.matched:,} run(s) matched; {what}: {report.acted:,}; "
                     f"skipped: {report.skipped:,} (the action does not apply to them); "
                     f"{report.seconds:.1f} s")
        if report.sample:
            display.line("e.g. " + ", ".join(report.sample[:5]),
                         style="dim" if display.rich else None)
        return 0

    return run_async(inv, go)


class _bar:
    """A rich progress bar over the runs read, on a terminal; nothing elsewhere."""

    def __init__(self, display: Display, action: str, dry_run: bool) -> None:
        self.display, self.label = display, f"{action}{' (dry run)' if dry_run else ''}"
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> Any:
        if not self.display.rich:
            return None
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=self.display.console, transient=True)
        self.progress.__enter__()
        self.task = self.progress.add_task(self.label, total=None)
        return self.update

    def update(self, report: Any) -> None:
        self.progress.update(self.task, total=report.matched, completed=report.seen)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)


__all__ = ["BulkDryRunOption", "ReasonOption", "RunArgument", "WhereOption", "bulk_command",
           "on_the_run", "one_or_where", "the_run"]
