"""``lashflow schedule ...``: presentation over ``engine.schedules`` (docs/schedules.md).

Each command calls the engine and prints what it answers: a table or lines on a
terminal, plain lines otherwise, one JSON object (what the HTTP API answers) with
``--json``. Errors are the usual one line ``error[code]: message`` and exit 2.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

import typer

from .context import Invocation
from .exits import run_async
from .listing import list_all, name_argument, named_group
from .options import DbOption, JsonOption, ToolsOption, parse_json_option
from .output import dumps, stdout
from .render import Display

schedule_app = named_group(
    "Runs started by the clock: cron or interval schedules that every worker fires, "
    "exactly one run per tick.")

NameArgument = name_argument("schedule")


class SpecOptions:
    """The spec options ``create`` and ``update`` share (None: not given)."""

    cron = typer.Option(None, "--cron", metavar="EXPR",
                        help='Five fields, or six with seconds first ("*/10 * * * * *").')
    every = typer.Option(None, "--every", metavar="DURATION",
                         help="A fixed interval: 30s, 5m, 1h30m, 1d (counted from the epoch).")
    tz = typer.Option(None, "--tz", metavar="ZONE",
                      help="The IANA zone the cron expression is read in (default UTC).")
    jitter = typer.Option(None, "--jitter", metavar="DURATION",
                          help="Fire each tick up to this much later (spreads load).")
    overlap = typer.Option(None, "--overlap", metavar="POLICY",
                           help="While the last run goes: skip (default), buffer-one, "
                                "buffer-all, cancel-other or allow.")
    catchup = typer.Option(None, "--catchup-window", metavar="DURATION",
                           help="How late a tick may still fire, e.g. after downtime "
                                "(default 1m).")
    start = typer.Option(None, "--start", metavar="TIME",
                         help="No tick before TIME (RFC 3339; no offset: in --tz).")
    end = typer.Option(None, "--end", metavar="TIME", help="No tick at or after TIME.")
    queue = typer.Option(None, "--queue", "-q", metavar="NAME",
                         help="Its runs enter this queue (lashflow queue create).")
    key = typer.Option(None, "--key", metavar="K", help="Their key in the queue.")


def _spec(cron: str | None, every: str | None, tz: str | None, jitter: str | None,
          overlap: str | None, catchup: str | None, start: str | None,
          end: str | None) -> dict[str, Any]:
    given = {"cron": cron, "every": every, "tz": tz, "jitter": jitter, "overlap": overlap,
             "catchup_window": catchup, "start": start, "end": end}
    return {key: value for key, value in given.items() if value is not None}


def _target(process: str) -> tuple[Path, str | None]:
    """``FILE`` or ``FILE:PROCESS`` (a file with several processes)."""
    file, colon, name = process.rpartition(":")
    if colon and file.endswith(".lash"):
        return Path(file), name or None
    return Path(process), None


def _local(moment: float, zone: str) -> str:
    from zoneinfo import ZoneInfo

    return datetime.fromtimestamp(moment, ZoneInfo(zone)).isoformat(timespec="seconds")


def _info_lines(info: Any, when: Any) -> list[str]:
    spec = info.spec
    lines = [f"schedule {info.name}: {spec.describe()}, overlap {spec.overlap}, "
             f"catch-up window {_duration(spec.catchup_window)}"
             + (f", jitter {_duration(spec.jitter)}" if spec.jitter else ""),
             f"  process  {info.process or '(main)'}   file {info.file or '-'}",
             f"  input    {dumps(info.input)}"]
    if spec.start is not None or spec.end is not None:
        lines.append(f"  between  {when(spec.start)} and {when(spec.end)}")
    if info.queue:
        key = info.queue.get("key")
        lines.append(f"  queue    {info.queue['name']}" + (f"   key {key}" if key else ""))
    if info.paused:
        lines.append("  PAUSED" + (f": {info.note}" if info.note else ""))
    lines.append(f"  fired {info.fired} · missed {info.missed} · skipped {info.skipped}"
                 + (f" · {info.buffered} buffered" if info.buffered else ""))
    if info.next_fires:
        lines.append(f"  next fires ({spec.tz}):")
        lines += [f"    {_local(moment, spec.tz)}" for moment in info.next_fires]
    else:
        lines.append("  no more ticks (the schedule ended)")
    return lines


def _duration(seconds: float) -> str:
    from ..schedules.spec import format_duration

    return format_duration(seconds)


def _print_info(display: Display, info: Any) -> None:
    if display.as_json:
        stdout(dumps(info.to_json()))
        return
    for line in _info_lines(info, display.when):
        display.line(line, style="yellow" if line.strip().startswith("PAUSED") else None)
    if info.runs:
        display.line("  last runs:")
        for run in info.runs:
            display.line(f"    {run.run_id}  {run.status:<15} {display.when(run.created_at)}")


@schedule_app.command()
def create(
    ctx: typer.Context,
    name: str = NameArgument,
    process: str = typer.Option(..., "--process", metavar="FILE[:PROCESS]",
                                help="The .lash file to run (and the process, for a file "
                                     "with several).", show_default=False),
    input: Optional[str] = typer.Option(None, "--input", "-i", metavar="JSON|@FILE",
                                        help="The runs' input: a JSON object, inline or "
                                             "@file.json."),
    cron: Optional[str] = SpecOptions.cron,
    every: Optional[str] = SpecOptions.every,
    tz: Optional[str] = SpecOptions.tz,
    jitter: Optional[str] = SpecOptions.jitter,
    overlap: Optional[str] = SpecOptions.overlap,
    catchup_window: Optional[str] = SpecOptions.catchup,
    start: Optional[str] = SpecOptions.start,
    end: Optional[str] = SpecOptions.end,
    queue: Optional[str] = SpecOptions.queue,
    key: Optional[str] = SpecOptions.key,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Make a schedule: exactly one of --cron and --every. The process and its input are
    checked now; the workers fire the ticks."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    file, entry = _target(process)

    async def go() -> int:
        data = parse_json_option(input, "--input")
        async with inv.engine(db, tools) as eng:
            info = await eng.schedules.create(
                name, file, entry, input=data, queue=queue, key=key,
                **_spec(cron, every, tz, jitter, overlap, catchup_window, start, end))
        _print_info(display, info)
        return 0

    raise typer.Exit(run_async(inv, go))


@schedule_app.command("list")
def list_schedules(ctx: typer.Context, db: Optional[str] = DbOption,
                   as_json: bool = JsonOption) -> None:
    """Every schedule: when it ticks, its next fire time, what it fired, missed, skipped."""
    list_all(ctx, db, as_json, "schedules", lambda eng: eng.schedules.list(), _render_list)


def _render_list(display: Display, infos: list[Any]) -> None:
    """One line a schedule; fits 80 columns (the spec column gives way first)."""
    rows = []
    for info in infos:
        state = "paused" if info.paused else ("ended" if not info.next_fires else "")
        following = display.when(info.next_fires[0])[:19] if info.next_fires else "-"
        rows.append((info.name, info.spec.describe(), following,
                     f"{info.fired}/{info.missed}/{info.skipped}", state))
    name_w = max(4, *(len(r[0]) for r in rows))
    spec_w = max(4, min(80 - name_w - 19 - 14 - 6 - 8, max(len(r[1]) for r in rows)))
    stdout(f"{'NAME':<{name_w}}  {'WHEN':<{spec_w}}  {'NEXT FIRE':<19}  "
           f"{'FIRED/MISS/SKIP':<15} STATE")
    for name, spec, following, counts, state in rows:
        shown = spec if len(spec) <= spec_w else spec[:spec_w - 1] + "…"
        stdout(f"{name:<{name_w}}  {shown:<{spec_w}}  {following:<19}  {counts:<15} {state}"
               .rstrip())


@schedule_app.command()
def show(
    ctx: typer.Context,
    name: str = NameArgument,
    runs: int = typer.Option(10, "--runs", min=0, max=1000, metavar="N",
                             help="How many of its latest runs to list."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A schedule: its spec, the next 5 fire times in its zone, what it fired, missed and
    skipped, and its latest runs."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=_no_schedule(name)) as eng:
            _print_info(display, await eng.schedules.get(name, runs=runs))
        return 0

    raise typer.Exit(run_async(inv, go))


def _no_schedule(name: str) -> Any:
    from ..errors import UnknownSchedule

    return lambda missing: UnknownSchedule(f"no schedule named {name!r} ({missing})")


def _act(ctx: typer.Context, name: str, db: str | None, as_json: bool,
         act: Callable[[Any], Awaitable[Any]], answer: Callable[[Any], dict[str, Any]],
         text: Callable[[Any], str]) -> None:
    """A command on one existing schedule: ``act(engine)``, then ``answer(result)`` as
    the JSON object or ``text(result)`` as the line."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, absent=_no_schedule(name)) as eng:
            result = await act(eng)
        if as_json:
            stdout(dumps(answer(result)))
        else:
            display.line(text(result))
        return 0

    raise typer.Exit(run_async(inv, go))


def _info_json(info: Any) -> dict[str, Any]:
    return dict(info.to_json())


@schedule_app.command()
def pause(
    ctx: typer.Context,
    name: str = NameArgument,
    note: Optional[str] = typer.Option(None, "--note", metavar="TEXT",
                                       help="Why it is paused (shown by list and show)."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Stop firing until resumed."""
    _act(ctx, name, db, as_json, lambda eng: eng.schedules.pause(name, note), _info_json,
         lambda info: f"schedule {name} paused")


@schedule_app.command()
def resume(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
           as_json: bool = JsonOption) -> None:
    """Fire again: paused ticks inside the catch-up window fire, older ones are passed
    over."""
    _act(ctx, name, db, as_json, lambda eng: eng.schedules.resume(name), _info_json,
         lambda info: f"schedule {name} resumed")


@schedule_app.command()
def trigger(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
            as_json: bool = JsonOption) -> None:
    """Start a run now, whatever the overlap policy (a worker drives it)."""
    _act(ctx, name, db, as_json, lambda eng: eng.schedules.trigger(name),
         lambda run_id: {"run_id": run_id, "schedule": name},
         lambda run_id: f"run {run_id} queued (lashflow show {run_id})")


@schedule_app.command()
def backfill(
    ctx: typer.Context,
    name: str = NameArgument,
    start: str = typer.Option(..., "--from", metavar="TIME",
                              help="The first tick included (RFC 3339; no offset: the "
                                   "schedule's zone).", show_default=False),
    end: str = typer.Option(..., "--to", metavar="TIME", help="Ticks before TIME.",
                            show_default=False),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A run for every tick in [--from, --to), under the overlap policy; ticks that
    already have their run keep it."""
    _act(ctx, name, db, as_json, lambda eng: eng.schedules.backfill(name, start, end),
         lambda report: {"started": report.started, "buffered": report.buffered,
                         "skipped": report.skipped},
         lambda report: f"schedule {name}: {report.started} run(s) queued, "
                        f"{report.buffered} buffered, {report.skipped} skipped")


@schedule_app.command()
def update(
    ctx: typer.Context,
    name: str = NameArgument,
    process: Optional[str] = typer.Option(None, "--process", metavar="FILE[:PROCESS]",
                                          help="Run this file (and process) from now on."),
    input: Optional[str] = typer.Option(None, "--input", "-i", metavar="JSON|@FILE",
                                        help="The runs' input from now on."),
    cron: Optional[str] = SpecOptions.cron,
    every: Optional[str] = SpecOptions.every,
    tz: Optional[str] = SpecOptions.tz,
    jitter: Optional[str] = SpecOptions.jitter,
    overlap: Optional[str] = SpecOptions.overlap,
    catchup_window: Optional[str] = SpecOptions.catchup,
    start: Optional[str] = SpecOptions.start,
    end: Optional[str] = SpecOptions.end,
    queue: Optional[str] = SpecOptions.queue,
    key: Optional[str] = SpecOptions.key,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Change a schedule: a new --cron replaces --every and the reverse (ticks count from
    now); a new --process or --input applies to the next run on."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        data = parse_json_option(input, "--input")
        file, entry = _target(process) if process is not None else (None, None)
        async with inv.engine(db, tools, create=False, absent=_no_schedule(name)) as eng:
            info = await eng.schedules.update(
                name, file, entry, input=data, queue=queue, key=key,
                **_spec(cron, every, tz, jitter, overlap, catchup_window, start, end))
        _print_info(display, info)
        return 0

    raise typer.Exit(run_async(inv, go))


@schedule_app.command()
def delete(ctx: typer.Context, name: str = NameArgument, db: Optional[str] = DbOption,
           as_json: bool = JsonOption) -> None:
    """Delete a schedule; the runs it started stay."""
    _act(ctx, name, db, as_json, lambda eng: eng.schedules.delete(name),
         lambda _: {"name": name, "deleted": True},
         lambda _: f"schedule {name} deleted (its runs stay)")


__all__ = ["schedule_app"]
