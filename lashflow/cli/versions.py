"""Commands for changing workflows safely: verify, diff, export, deploy, versions, upgrade.

``verify`` replays the runs in flight against an edited file, read-only, and exits 1 if
any run is incompatible; ``diff`` compares two versions of a file without any run;
``export`` writes runs as one JSON document for ``lashflow.testing.Replayer``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any, List, Optional

import typer

from ..durable.selection import FIELDS
from ..json_text import compact
from ..states import RUN_STATUSES
from .context import Invocation
from .exits import run_async
from .options import DbOption, JsonOption, ToolsOption
from .output import dumps, printable, stdout
from .render import Display

EXIT_INCOMPATIBLE = 1


def _width(display: Display) -> int | None:
    """Wrap at the terminal's width on a terminal (at most 100); piped: one line each."""
    if not display.rich:
        return None
    return min(shutil.get_terminal_size((80, 24)).columns, 100)


def _lines(text: str, width: int | None, indent: str) -> list[str]:
    if width is None:
        return [indent + text]
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False) or [indent]


def _short(value: Any, limit: int = 60) -> str:
    text = compact(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_verify(display: Display, source: str, report: Any) -> None:
    width = _width(display)
    counts = report.counts
    for line in _lines(f"verify {source}: {report.total} run{'s' if report.total != 1 else ''}",
                       width, ""):
        display.line(line)
    for name in ("compatible", "incompatible", "unknown"):
        display.line(f"  {name:<13}{counts[name]:>8,}")
    for name in ("incompatible", "unknown"):
        shown = [v for v in report.verdicts if v.verdict == name]
        if not shown:
            continue
        display.line("")
        display.line(name)
        for verdict in shown:
            where = f" at {verdict.line}:{verdict.column}" if verdict.line else ""
            head = f"  {printable(verdict.run_id)}"
            if verdict.step:
                head += f"  step {verdict.step}{where}"
            if verdict.paths:
                head += "  " + ", ".join(verdict.paths)
            for line in _lines(head, width, ""):
                display.line(line)
            for line in _lines(printable(verdict.reason), width, "    "):
                display.line(line)
            if verdict.recorded:
                recorded = verdict.recorded
                what = " ".join(str(recorded[k]) for k in ("kind", "tool") if recorded.get(k))
                text = f"recorded: {what}"
                if "args" in recorded:
                    text += f" {_short(recorded['args'])}"
                if verdict.recorded_at:
                    text += f" (line {verdict.recorded_at} of the run's source)"
                for line in _lines(printable(text), width, "    "):
                    display.line(line)


def verify(
    ctx: typer.Context,
    file: Path = typer.Argument(..., metavar="EDITED.lash", help="The edited workflow file."),
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="Only the runs of this process (default: every "
                                               "process the file defines)."),
    runs: List[str] = typer.Option([], "--run", "-r", metavar="RUN",
                                   help="Only this run, whatever its status (repeatable)."),
    status: Optional[str] = typer.Option(None, "--status", "-s", metavar="STATUS[,STATUS]",
                                         help="Runs with these statuses (default: every run "
                                              "that has not settled): "
                                              + ", ".join(RUN_STATUSES) + "."),
    tools: List[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Replay runs in flight against an edited workflow, running and writing nothing:
    each run is compatible, incompatible (the step, its line in the edited file, the
    JSON paths that differ) or unknown (why). Exit 1 if any run is incompatible."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    statuses = [part.strip() for part in status.split(",") if part.strip()] if status else None

    async def go() -> int:
        async with inv.engine(db, tools, create=False, readonly=True) as eng:
            report = await eng.verify(file, process=process, runs=runs, status=statuses)
        if as_json:
            stdout(dumps(report.to_json()))
        else:
            render_verify(display, str(file), report)
        return 0 if report.ok else EXIT_INCOMPATIBLE

    raise typer.Exit(run_async(inv, go))


def render_diff(display: Display, old: str, new: str, changes: list[Any]) -> None:
    width = _width(display)
    for line in _lines(f"diff {old} {new}: {len(changes)} change{'s' if len(changes) != 1 else ''}",
                       width, ""):
        display.line(line)
    for change in changes:
        site = change.new or change.old
        places = []
        if change.old is not None:
            places.append(f"old {change.old.line}:{change.old.column}")
        if change.new is not None:
            places.append(f"new {change.new.line}:{change.new.column}")
        for line in _lines(f"  {change.change:<8} {printable(site.entry)}: "
                           f"{printable(site.label)}  ({', '.join(places)})", width, ""):
            display.line(line)
        if change.change == "changed" and change.old is not None and change.new is not None:
            if change.old.label != change.new.label:
                for line in _lines(f"was {printable(change.old.label)}", width, "           "):
                    display.line(line)
            if change.old.args != change.new.args:
                for line in _lines(f"was ({printable(change.old.args)})", width, "           "):
                    display.line(line)
                for line in _lines(f"now ({printable(change.new.args)})", width, "           "):
                    display.line(line)
    unreachable = [c.unreachable for c in changes if c.unreachable]
    if unreachable:
        display.line("")
        display.line("recorded steps the new file no longer reaches:")
        for key in unreachable:
            display.line(f"  {key}")


def diff(
    ctx: typer.Context,
    old: Path = typer.Argument(..., metavar="OLD.lash", help="The workflow as runs recorded it."),
    new: Path = typer.Argument(..., metavar="NEW.lash", help="The edited workflow."),
    as_json: bool = JsonOption,
) -> None:
    """What an edit changes, from the two files alone: the call sites added, removed,
    moved or changed (tool, argument expressions) and the recorded step keys the new file
    can no longer reach."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        from ..durable.programs import read_source
        from ..lang.changes import diff_sources

        changes = diff_sources(read_source(old).text, read_source(new).text)
        if as_json:
            stdout(dumps({"changes": [change.to_json() for change in changes],
                          "unreachable": [c.unreachable for c in changes if c.unreachable]}))
        else:
            render_diff(display, str(old), str(new), changes)
        return 0

    raise typer.Exit(run_async(inv, go))


def export(
    ctx: typer.Context,
    run_ids: List[str] = typer.Argument(..., metavar="RUN...", help="The runs to export."),
    db: Optional[str] = DbOption,
) -> None:
    """Write runs (source, input, journal; no completion key, no secret) as one JSON
    document on stdout, the format lashflow.testing.Replayer replays in tests."""
    inv = Invocation.of(ctx)  # an error is one line on stderr, never in the document

    async def go() -> int:
        async with inv.engine(db, create=False, readonly=True) as eng:
            stdout(dumps(await eng.export(run_ids)))
        return 0

    raise typer.Exit(run_async(inv, go))


def deploy(
    ctx: typer.Context,
    files: List[Path] = typer.Argument(..., metavar="PATH...", help="The .lash files to deploy."),
    tools: List[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Record a numbered version of every process of each file (a new one only where its
    source or the schemas of the tools it calls changed). `lashflow run PROCESS` and
    `submit PROCESS` start runs on the latest version; runs stay on theirs."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, tools) as eng:
            deployed = await eng.deploy(*files)
        if as_json:
            stdout(dumps({"versions": [d.to_json() for d in deployed]}))
            return 0
        for d in deployed:
            state = "new" if d.created else "unchanged"
            display.line(f"{printable(d.process)} v{d.version} ({state})  "
                         f"content {d.content_hash[:12]}  tools {len(d.tools)}")
        return 0

    raise typer.Exit(run_async(inv, go))


def versions_cmd(
    ctx: typer.Context,
    process: Optional[str] = typer.Argument(None, metavar="[PROCESS]",
                                            help="Only this process's versions."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """List the deployed versions of each process."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, create=False, readonly=True) as eng:
            found = await eng.versions(process)
        if as_json:
            stdout(dumps({"versions": [d.to_json() for d in found]}))
            return 0
        if not found:
            display.line("no deployed versions")
        for d in found:
            display.line(f"{printable(d.process)} v{d.version}  {inv.when(d.deployed_at)}  "
                         f"content {d.content_hash[:12]}  tools {len(d.tools)}")
        return 0

    raise typer.Exit(run_async(inv, go))


def upgrade(
    ctx: typer.Context,
    run_ids: List[str] = typer.Argument(None, metavar="[RUN...]",
                                        help="The runs to move (or choose them with --where)."),
    to: Optional[int] = typer.Option(None, "--to", metavar="VERSION",
                                     help="The version to move to (default: the latest)."),
    where: Optional[str] = typer.Option(
        None, "--where", metavar="EXPR",
        help="Choose the runs by query instead, e.g. \"process=fulfill and version=2\" "
             f"(fields: {', '.join(FIELDS)}; runs that have settled are left out)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would move; move nothing."),
    tools: List[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Move runs to a newer version of their process, only where replaying their journal
    against it says compatible; each run moves in one atomic write that keeps the
    version it leaves (upgrade back to undo). Exit 1 if any run was incompatible."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        from ..durable.verifier import UNSETTLED
        from ..errors import UsageError

        if bool(run_ids) == (where is not None):
            raise UsageError("name the runs, or choose them with --where EXPR (not both)")
        async with inv.engine(db, tools) as eng:
            ids = list(run_ids or [])
            if where is not None:  # runs that settled are left out unless a status is named
                unsettled = "status=" + ",".join(UNSETTLED)
                chosen = (unsettled if where.strip().lower() == "all" else where
                          if "status" in where.lower() else f"{where} and {unsettled}")
                ids = await eng.select(chosen)
            done = await eng.upgrade(ids, to, dry_run=dry_run)
        if as_json:
            stdout(dumps({"runs": [u.to_json() for u in done], "dry_run": dry_run}))
        else:
            width = _width(display)
            for u in done:
                mark = "moved" if u.moved else ("would move" if dry_run and
                                                 u.verdict == "compatible" else "stays")
                head = (f"{printable(u.run_id)}  v{u.from_version if u.from_version else '-'}"
                        f" -> v{u.to_version}  {mark} ({u.verdict})")
                for line in _lines(head, width, ""):
                    display.line(line)
                for line in _lines(printable(u.reason), width, "    "):
                    display.line(line)
        return EXIT_INCOMPATIBLE if any(u.verdict == "incompatible" for u in done) else 0

    raise typer.Exit(run_async(inv, go))


__all__ = ["deploy", "diff", "export", "upgrade", "verify", "versions_cmd"]
