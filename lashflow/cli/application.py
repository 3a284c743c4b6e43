"""The typer application: the root options and every command, in the order ``--help``
and docs/cli.md list them. Commands live by theme in the modules beside this one."""

from __future__ import annotations

from typing import Callable

import typer

from .. import __version__
from . import (operate, queue, ratelimit, reads, repair, run, schedule, serve, tooling, versions,
               watch)
from .context import Invocation
from .output import stdout
from .usage import LashflowGroup

app = typer.Typer(cls=LashflowGroup, add_completion=False, no_args_is_help=True,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="lashflow: durable workflows written in Lashlang.\n\n"
                       "Exit codes of run/resume: 0 finished, 1 failed, 2 rejected (nothing ran: "
                       "bad file, input, key, database...), 3 waiting, 4 cancelled, "
                       "5 needs attention, 6 paused. Add --json to any command for one JSON object.")


def _version(value: bool) -> None:
    if value:
        stdout(f"lashflow {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit."),
          utc: bool = typer.Option(False, "--utc",
                                   help="Print times in UTC (default: local time, with its "
                                        "offset). Also LASHFLOW_UTC=1.")) -> None:
    """lashflow: durable workflows written in Lashlang."""
    ctx.obj = Invocation(utc=utc)


COMMANDS: list[tuple[str | None, Callable[..., None]]] = [
    (None, run.run), (None, run.submit), (None, run.resume), (None, run.retry),
    (None, run.fork), (None, run.recover), (None, run.worker),
    (None, tooling.check), (None, tooling.fmt), (None, tooling.lsp), (None, tooling.graph),
    (None, operate.complete), (None, operate.signal), (None, operate.cancel),
    (None, repair.pause), (None, repair.unpause), ("resolve-step", repair.resolve_step),
    ("list", reads.list_runs), (None, reads.show), (None, reads.waiting), (None, reads.output),
    (None, operate.gc), (None, serve.serve), (None, watch.watch),
    (None, versions.verify), (None, versions.diff), (None, versions.export),
    (None, versions.deploy), (None, versions.upgrade), ("versions", versions.versions_cmd),
]
for name, command in COMMANDS:
    app.command(name)(command)
app.add_typer(schedule.schedule_app, name="schedule")
app.add_typer(queue.queue_app, name="queue")
app.add_typer(ratelimit.ratelimit_app, name="ratelimit")


def main() -> None:
    """Console-script entry point (``lashflow`` and ``python -m lashflow``)."""
    app()
