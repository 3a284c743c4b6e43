"""``lashflow ratelimit ...``: presentation over ``engine.rate_limits`` (docs/rate-limits.md).

Named limits are defined here (``set``); tools join one with ``@tool(rate_limit=NAME)``.
Tools' own rates (``@tool(rate="10/s")``) are listed too, as ``tool:MODULE.NAME``.
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from .context import Invocation
from .exits import run_async
from .output import dumps, stdout
from .options import DbOption, JsonOption
from .render import Display
from .usage import LashflowGroup

ratelimit_app = typer.Typer(cls=LashflowGroup, add_completion=False, no_args_is_help=True,
                            pretty_exceptions_enable=False, rich_markup_mode=None,
                            help="Rate limits that tools share across every worker "
                                 "(@tool(rate_limit=NAME)), and tools' own rates.")

NameArgument = typer.Argument(..., metavar="NAME", help="The limit.", show_default=False)


def _print_info(display: Display, info: Any) -> None:
    if display.as_json:
        stdout(dumps(info.to_json()))
        return
    from ..rates import format_rate

    whose = f" (the own rate of tool {info.name.removeprefix('tool:')})" if info.own else ""
    display.line(f"rate limit {info.name}: {format_rate(info.rate)}{whose}")
    display.line(f"  calls    {info.calls} ({info.delayed} waited for their slot)")
    if info.limited_until is None:
        display.line("  now      a call may start at once")
    else:
        display.line(f"  rate limited until {display.when(info.limited_until)}",
                     style="yellow")


def _run(ctx: typer.Context, as_json: bool, go: Any) -> None:
    inv = Invocation.of(ctx, as_json)
    raise typer.Exit(run_async(inv, lambda: go(inv, Display.of(inv))))


@ratelimit_app.command("set")
def set_limit(ctx: typer.Context, name: str = NameArgument,
              rate: str = typer.Argument(..., metavar="N/PERIOD", show_default=False,
                                         help='Calls per period, e.g. "10/s", "600/m".'),
              db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """Define a named limit, or change its rate. Tools declared with
    @tool(rate_limit=NAME) share it, across every worker."""
    async def go(inv: Invocation, display: Display) -> int:
        async with inv.engine(db) as eng:
            info = await eng.rate_limits.set(name, rate)
        _print_info(display, info)
        return 0

    _run(ctx, as_json, go)


@ratelimit_app.command()
def show(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
         as_json: bool = JsonOption) -> None:
    """A limit: its rate, calls so far, and until when it holds calls back."""
    async def go(inv: Invocation, display: Display) -> int:
        async with inv.engine(db, create=False) as eng:
            info = await eng.rate_limits.get(name)
        _print_info(display, info)
        return 0

    _run(ctx, as_json, go)


@ratelimit_app.command("list")
def list_limits(ctx: typer.Context, db: Optional[str] = DbOption,
                as_json: bool = JsonOption) -> None:
    """Every limit (named ones and tools' own rates), and the tools with a global
    concurrency that have calls in flight."""
    async def go(inv: Invocation, display: Display) -> int:
        from ..errors import NoDatabase
        from ..rates import format_rate

        try:
            async with inv.engine(db, create=False) as eng:
                infos = await eng.rate_limits.list()
                slots = await eng.rate_limits.slots()
        except NoDatabase:
            infos, slots = [], {}
        if as_json:
            stdout(dumps({"rate_limits": [info.to_json() for info in infos],
                          "global_slots_held": slots}))
            return 0
        if not infos:
            display.line("no rate limits (lashflow ratelimit set NAME N/PERIOD makes one)")
        else:
            width = max(4, min(40, max(len(info.name) for info in infos)))
            stdout(f"{'NAME':<{width}}  {'RATE':<9} {'CALLS':>8} {'WAITED':>8}  LIMITED UNTIL")
            for info in infos:
                name = info.name if len(info.name) <= width else info.name[:width - 1] + "…"
                until = "" if info.limited_until is None else display.when(info.limited_until)
                stdout(f"{name:<{width}}  {format_rate(info.rate):<9} {info.calls:>8} "
                       f"{info.delayed:>8}  {until}".rstrip())
        for tool, held in sorted(slots.items()):
            display.line(f"global concurrency: {tool} has {held} call(s) in flight")
        return 0

    _run(ctx, as_json, go)


@ratelimit_app.command()
def delete(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
           as_json: bool = JsonOption) -> None:
    """Forget a named limit: calls of its tools wait until it is set again."""
    async def go(inv: Invocation, display: Display) -> int:
        async with inv.engine(db, create=False) as eng:
            await eng.rate_limits.delete(name)
        if as_json:
            stdout(dumps({"deleted": name}))
        else:
            display.line(f"rate limit {name} deleted")
        return 0

    _run(ctx, as_json, go)
