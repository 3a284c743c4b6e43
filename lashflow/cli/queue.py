"""``lashflow queue ...``: presentation over ``engine.queues`` (docs/queues.md).

Each command calls the engine and prints what it answers: a table or lines on a
terminal, one JSON object (what the HTTP API answers) with ``--json``. Errors are the
usual one line ``error[code]: message`` and exit 2.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional

import typer

from .context import Invocation
from .exits import run_async
from .listing import list_all, name_argument, named_group
from .output import dumps, stdout
from .options import DbOption, JsonOption
from .render import Display

queue_app = named_group(
    "Queues: how many runs start at once (in all and per key), how fast, in which order; "
    "every worker obeys them.")

NameArgument = name_argument("queue")


class LimitOptions:
    """The options ``create`` and ``update`` share (None: not given)."""

    concurrency = typer.Option(None, "--concurrency", metavar="N", min=0,
                               help="Runs of the queue driven at once, across all workers "
                                    "(0 on update: no limit).")
    per_key = typer.Option(None, "--concurrency-per-key", metavar="N", min=0,
                           help="Runs of one key driven at once (0 on update: no limit).")
    rate = typer.Option(None, "--rate", metavar="N/PERIOD",
                        help='Runs started per period, e.g. "20/s", "100/m" ("none" on '
                             "update: no limit).")
    key_rate = typer.Option(None, "--rate-per-key", metavar="N/PERIOD",
                            help="Runs of one key started per period.")
    levels = typer.Option(None, "--priority-levels", metavar="K", min=1, max=100,
                          help="Priorities 1 (first) to K; a run without one gets the "
                               "middle (default 5 levels).")
    fair = typer.Option(None, "--fair/--no-fair",
                        help="Weighted round robin across keys (else by age).")
    weight = typer.Option(None, "--weight", metavar="KEY=W",
                          help="A key's share under --fair (default 1); repeatable.")


def _weights(given: list[str] | None) -> dict[str, float] | None:
    from ..errors import QueueInvalid

    if not given:
        return None
    found: dict[str, float] = {}
    for item in given:
        key, equals, number = item.rpartition("=")
        try:
            found[key] = float(number)
        except ValueError:
            equals = ""
        if not equals:
            raise QueueInvalid(f"--weight {item!r}: expected KEY=WEIGHT, e.g. enterprise=3")
    return found


def _zero_clears(value: int | None) -> int | None:
    return None if value == 0 else value


def _rate_or_none(value: str | None) -> str | None:
    return None if value is not None and value.lower() in ("none", "0", "off") else value


def _print_info(display: Display, info: Any) -> None:
    if display.as_json:
        stdout(dumps(info.to_json()))
        return
    from ..durable.queues import format_rate

    limits = [f"concurrency {info.concurrency or '-'}", f"per key {info.per_key or '-'}",
              f"rate {format_rate(info.rate)}", f"per key {format_rate(info.key_rate)}"]
    display.line(f"queue {info.name}: " + ", ".join(limits))
    order = "fair across keys" if info.fair else "oldest first"
    display.line(f"  order    priority 1..{info.priority_levels}, then {order}"
                 + ("" if not info.weights else " (weights "
                    + ", ".join(f"{k}={w:g}" for k, w in sorted(info.weights.items())) + ")"))
    if info.paused:
        display.line("  PAUSED: no run of it starts until `lashflow queue resume`",
                     style="yellow")
    stats = info.stats
    if stats is None:
        return
    waiting = sum(stats.waiting_by_priority.values())
    running = sum(stats.running_by_key.values())
    oldest = "" if stats.oldest_waiting is None else \
        f", oldest since {display.when(stats.oldest_waiting)}"
    display.line(f"  waiting  {waiting}{oldest}")
    if stats.waiting_by_priority:
        display.line("  by priority  " + "  ".join(
            f"{p}: {n}" for p, n in sorted(stats.waiting_by_priority.items())))
    display.line(f"  running  {running}")
    if stats.rate_limited_until is not None:
        display.line(f"  rate limited until {display.when(stats.rate_limited_until)}")
    if stats.keys_rate_limited:
        display.line(f"  {stats.keys_rate_limited} key(s) rate limited now")
    keys = sorted(set(stats.waiting_by_key) | set(stats.running_by_key),
                  key=lambda k: (-stats.running_by_key.get(k, 0),
                                 -stats.waiting_by_key.get(k, 0), k))
    if keys:
        shown = keys[:20]
        width = min(40, max(3, *(len(k or "(none)") for k in shown)))
        display.line(f"  {'KEY':<{width}}  {'RUNNING':>7}  {'WAITING':>7}")
        for key in shown:
            name = key or "(none)"
            name = name if len(name) <= width else name[:width - 1] + "…"
            display.line(f"  {name:<{width}}  {stats.running_by_key.get(key, 0):>7}  "
                         f"{stats.waiting_by_key.get(key, 0):>7}")
        if len(keys) > len(shown):
            display.line(f"  ... and {len(keys) - len(shown)} more key(s)")


def _act(ctx: typer.Context, db: str | None, as_json: bool,
         act: Callable[[Any], Awaitable[Any]], create: bool = False) -> None:
    """A command on one queue: ``act(engine)`` answers its ``QueueInfo``, printed."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=create) as eng:
            info = await act(eng)
        _print_info(display, info)
        return 0

    raise typer.Exit(run_async(inv, go))


@queue_app.command()
def create(
    ctx: typer.Context,
    name: str = NameArgument,
    concurrency: Optional[int] = LimitOptions.concurrency,
    concurrency_per_key: Optional[int] = LimitOptions.per_key,
    rate: Optional[str] = LimitOptions.rate,
    rate_per_key: Optional[str] = LimitOptions.key_rate,
    priority_levels: Optional[int] = LimitOptions.levels,
    fair: Optional[bool] = LimitOptions.fair,
    weight: Optional[list[str]] = LimitOptions.weight,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Make a queue. Runs enter it with `lashflow submit FILE --queue NAME`."""
    weights = _weights(weight)
    _act(ctx, db, as_json, lambda eng: eng.queues.create(
        name, concurrency=_zero_clears(concurrency),
        concurrency_per_key=_zero_clears(concurrency_per_key), rate=_rate_or_none(rate),
        rate_per_key=_rate_or_none(rate_per_key), priority_levels=priority_levels or 5,
        fair=bool(fair), weights=weights), create=True)


@queue_app.command()
def update(
    ctx: typer.Context,
    name: str = NameArgument,
    concurrency: Optional[int] = LimitOptions.concurrency,
    concurrency_per_key: Optional[int] = LimitOptions.per_key,
    rate: Optional[str] = LimitOptions.rate,
    rate_per_key: Optional[str] = LimitOptions.key_rate,
    priority_levels: Optional[int] = LimitOptions.levels,
    fair: Optional[bool] = LimitOptions.fair,
    weight: Optional[list[str]] = LimitOptions.weight,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Change what is given; the rest stays. Runs in the queue stay."""
    from ..durable.queues import UNSET

    def given(value: Any, convert: Callable[[Any], Any]) -> Any:
        return UNSET if value is None else convert(value)
    weights = _weights(weight)
    _act(ctx, db, as_json, lambda eng: eng.queues.update(
        name, concurrency=given(concurrency, _zero_clears),
        concurrency_per_key=given(concurrency_per_key, _zero_clears),
        rate=given(rate, _rate_or_none), rate_per_key=given(rate_per_key, _rate_or_none),
        priority_levels=given(priority_levels, int), fair=given(fair, bool),
        weights=UNSET if weights is None else weights))


@queue_app.command()
def pause(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
          as_json: bool = JsonOption) -> None:
    """Start (or resume) none of its runs until `queue resume`; nothing is lost."""
    _act(ctx, db, as_json, lambda eng: eng.queues.pause(name))


@queue_app.command()
def resume(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
           as_json: bool = JsonOption) -> None:
    """Let its runs start again."""
    _act(ctx, db, as_json, lambda eng: eng.queues.resume(name))


@queue_app.command()
def show(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
         as_json: bool = JsonOption) -> None:
    """A queue: its limits, runs waiting by priority and key, running per key, its rate
    limit's state, the oldest waiting run."""
    _act(ctx, db, as_json, lambda eng: eng.queues.get(name))


@queue_app.command("list")
def list_queues(ctx: typer.Context, db: Optional[str] = DbOption,
                as_json: bool = JsonOption) -> None:
    """Every queue: its limits, and how many runs wait and run."""
    list_all(ctx, db, as_json, "queues", lambda eng: eng.queues.list(),
             lambda display, infos: _render_list(infos))


def _render_list(infos: list[Any]) -> None:
    """One line a queue; fits 80 columns (the name gives way first)."""
    from ..durable.queues import format_rate

    name_w = max(4, min(24, max(len(info.name) for info in infos)))
    stdout(f"{'NAME':<{name_w}}  {'CONC':>5} {'/KEY':>5}  {'RATE':<9} {'WAITING':>8} "
           f"{'RUNNING':>8}  STATE")
    for info in infos:
        stats = info.stats
        name = info.name if len(info.name) <= name_w else info.name[:name_w - 1] + "…"
        waiting = sum(stats.waiting_by_priority.values()) if stats else 0
        running = sum(stats.running_by_key.values()) if stats else 0
        state = "paused" if info.paused else ("fair" if info.fair else "")
        stdout(f"{name:<{name_w}}  {info.concurrency or '-':>5} {info.per_key or '-':>5}  "
               f"{format_rate(info.rate):<9} {waiting:>8} {running:>8}  {state}".rstrip())


@queue_app.command()
def delete(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
           as_json: bool = JsonOption) -> None:
    """Delete the queue; its runs stay and start as if they were in no queue."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False) as eng:
            await eng.queues.delete(name)
        if as_json:
            stdout(dumps({"deleted": name}))
        else:
            display.line(f"queue {name} deleted")
        return 0

    raise typer.Exit(run_async(inv, go))
