"""What the command groups of named things (``lashflow queue``, ``lashflow schedule``)
share: the group itself, its NAME argument, and ``list``: read every item of the kind,
print them as JSON or one line each, and say so when there is none (a database not made
yet holds none: nothing is created to answer)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, NoReturn, Optional

import typer

from .context import Invocation
from .exits import run_async
from .output import dumps, stdout
from .render import Display
from .usage import LashflowGroup


def named_group(help: str) -> typer.Typer:
    return typer.Typer(cls=LashflowGroup, add_completion=False, no_args_is_help=True,
                       pretty_exceptions_enable=False, rich_markup_mode=None, help=help)


def name_argument(what: str) -> Any:
    return typer.Argument(..., metavar="NAME", help=f"The {what}.", show_default=False)


def list_all(ctx: typer.Context, db: Optional[str], as_json: bool, kind: str,
             fetch: Callable[[Any], Awaitable[list[Any]]],
             render: Callable[[Display, list[Any]], None]) -> NoReturn:
    """``kind``: the plural the JSON object and the empty line name (``queues``)."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        from ..errors import NoDatabase

        try:
            async with inv.engine(db, create=False) as eng:
                infos = await fetch(eng)
        except NoDatabase:
            infos = []
        if as_json:
            stdout(dumps({kind: [info.to_json() for info in infos]}))
        elif not infos:
            display.line(f"no {kind} (lashflow {kind[:-1]} create makes one)")
        else:
            render(display, infos)
        return 0

    raise typer.Exit(run_async(inv, go))
