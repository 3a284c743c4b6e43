"""How the CLI shows outcomes, runs, timelines and waits: rich on a terminal, plain lines
otherwise (pipes, files, CI logs), and JSON-ready dicts for ``--json``.

Nothing here talks to the engine; commands fetch, this module only formats. What one
invocation chose (``--utc``, the ``--db`` to repeat, the run's source) comes with the
``Display``. Rich is imported only when a terminal is present, so scripted use stays fast.
"""

from __future__ import annotations

import sys
from shlex import quote
from typing import Any, Callable, Iterable

from ..durable.timeline import (
    first_cut, journal_lines, journal_rows, one_line, preview, seconds, status_text, wait_what,
)
from ..states import RunStatus
from ..slotted import Frozen, Slotted
from .context import Invocation
from .output import dumps, is_terminal, printable, stderr, stdout

STATUS_STYLE: dict[str, str] = {
    RunStatus.FINISHED: "green", RunStatus.FAILED: "red", RunStatus.CANCELLED: "magenta",
    RunStatus.WAITING: "yellow", RunStatus.RUNNING: "cyan", RunStatus.QUEUED: "blue",
    RunStatus.NEEDS_ATTENTION: "bold red", RunStatus.PAUSED: "bold yellow", "rejected": "red"}
STATUS_MARK: dict[str, str] = {
    RunStatus.FINISHED: "✔", RunStatus.FAILED: "✘", RunStatus.CANCELLED: "⊘", RunStatus.WAITING: "⏸",
    RunStatus.RUNNING: "▶", RunStatus.QUEUED: "…", RunStatus.NEEDS_ATTENTION: "⚠", RunStatus.PAUSED: "‖"}
STATE_STYLE = {"ok": "green", "done": "green", "err": "red", "failed": "red", "exhausted": "red",
               "cancelled": "magenta", "pending": "yellow", "waiting": "yellow",
               "started": "cyan", "interrupted": "bold red"}


class Display(Slotted):
    """Where and how a command writes: ``json`` wins, then rich on a terminal, else plain;
    ``inv`` is the invocation it writes for (``of``)."""

    __slots__ = ("as_json", "inv", "rich", "_console")

    def __init__(self, as_json: bool = False, inv: Invocation | None = None) -> None:
        self.as_json = as_json
        self.inv = Invocation() if inv is None else inv
        self.rich = not as_json and is_terminal(sys.stdout)
        self._console: Any = None

    def __repr__(self) -> str:
        return f"Display(as_json={self.as_json!r}, inv={self.inv!r}, rich={self.rich!r})"

    @classmethod
    def of(cls, inv: Invocation) -> "Display":
        return cls(inv.as_json, inv)

    def when(self, moment: float | None) -> str:
        return self.inv.when(moment)

    @property
    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=sys.stdout, highlight=False, soft_wrap=False)
        return self._console

    def line(self, text: str, style: str | None = None) -> None:
        """One line on stdout, never wrapped (so commands can be copied whole)."""
        if self.rich:
            from rich.text import Text

            self.console.print(Text(printable(text), style=style or ""), soft_wrap=True)
        else:
            stdout(text)


# --------------------------------------------------------------------------- small helpers


def result_text(result: Any) -> str:
    """A finished run's result on one line of JSON, through the output budget."""
    from ..tools import project_output

    if isinstance(result, str):
        return dumps(result)
    return project_output(result)


# --------------------------------------------------------------------------- outcomes


def render_outcome(display: Display, outcome: Any, elapsed: float | None = None) -> None:
    """A run after ``run``/``resume``/``complete --resume``/``signal``: prints, status,
    result or error, and what it waits on with the command that resolves each wait."""
    status = outcome.status.value
    for text in outcome.prints:
        display.line(text)
    took = f" in {seconds(elapsed)}" if elapsed is not None else ""
    if display.rich:
        from rich.text import Text

        head = Text()
        head.append(f"{STATUS_MARK.get(status, '')} {status}", style=STATUS_STYLE.get(status, ""))
        head.append(printable(f"  run {outcome.run_id}{took}"), style="dim")
        display.console.print(head)
    else:
        stdout(f"run {outcome.run_id} {status}")
    if status == RunStatus.FINISHED:
        if display.rich and outcome.result is not None and not isinstance(outcome.result, str):
            _print_json(display, outcome.result)
        else:
            display.line(result_text(outcome.result))
    if outcome.error is not None:
        stderr(run_error_text(outcome.error, display.inv.run_source))
    if getattr(outcome, "paused", None):
        display.line(paused_text(outcome.paused, display.when)
                     + f"; `lashflow unpause {quote(outcome.run_id)}` continues it")
    render_waits(display, outcome.waiting)


def run_error_text(error: Any, run_source: tuple[str, str] | None = None) -> str:
    """``error[code]: Kind: message``, then ``--> file:line:col`` with the line and a
    caret when the run's source (file name, text) is at hand (else ``(line L, column
    C)``)."""
    kind = f"{error.kind}: " if error.kind else ""
    head = f"error[{error.code}]: {kind}{error.message}"
    if not error.line:
        return head
    if run_source is None:
        return f"{head} (line {error.line}, column {error.column})"
    filename, source = run_source
    lines = source.splitlines()
    where = f"--> {filename}:{error.line}:{error.column}"
    if error.line > len(lines):
        return f"{head}\n{where}"
    caret = " " * max(0, (error.column or 1) - 1) + "^"
    return f"{head}\n{where}\n  | {lines[error.line - 1]}\n  | {caret}"


def resolve_command(display: Display, wait: Any) -> str:
    """The wait's resolve command as a person pastes it: with ``--db`` when this command
    used a database other than the default one."""
    suffix = display.inv.db_suffix
    if not suffix or not wait.resolve.startswith("lashflow "):
        return wait.resolve
    return wait.resolve + suffix


def render_waits(display: Display, waits: Iterable[Any], indent: str = "  ") -> None:
    for wait in waits:
        display.line(f"{indent}waiting on {wait_what(wait, display.when)} (step {wait.step})",
                     style="yellow" if display.rich else None)
        display.line(f"{indent}  {resolve_command(display, wait)}", style="bold" if display.rich else None)


def _print_json(display: Display, value: Any) -> None:
    from rich.json import JSON

    from ..tools import project_output

    text = dumps(value)
    if len(text) > 16 * 1024:  # too big to pretty-print: the budgeted preview instead
        display.line(project_output(value))
        return
    display.console.print(JSON(text))


# --------------------------------------------------------------------------- show


def render_show(display: Display, detail: Any) -> None:
    """``lashflow show``: a header, the journal as a timeline, then result/error/waits."""
    run = detail.summary
    rows = journal_rows(detail)
    if display.rich:
        _show_rich(display, detail, rows)
    else:
        for line in journal_lines(detail, display.when, rows):
            stdout(line)
    if detail.forked_from:
        display.line(f"forked from run {detail.forked_from.get('run_id')} at step "
                     f"{detail.forked_from.get('step')} (steps before it copied)")
    if detail.forks:
        display.line(f"forks: {', '.join(detail.forks)}")
    for child in detail.children:
        display.line(f"child: {child.run_id} {status_text(child)}")
    if detail.schedule is not None:
        started = detail.schedule
        display.line(f"schedule: {started['name']}, " + (
            "triggered by hand" if started.get("trigger") else
            f"tick {display.when(started.get('tick'))}"))
    for text in detail.prints:
        display.line(f"print: {text}")
    for sent in detail.pending_signals:
        display.line(f"signal not taken yet: {sent['name']} {preview(sent['payload'], 80)}")
    if run.paused:
        display.line(paused_text(run.paused, display.when),
                     style=STATUS_STYLE[RunStatus.PAUSED] if display.rich else None)
    if run.status == RunStatus.FINISHED:
        display.line("result: " + result_text(detail.result))
    if run.error is not None and run.error != detail.journal_error:
        display.line(run_error_text(run.error, display.inv.run_source), style="red" if display.rich else None)
    render_waits(display, run.waiting)
    cut = first_cut(detail)
    if cut is not None:  # only when the table had to cut an outcome: the real command
        display.line(f"full output of a step: lashflow output {quote(run.run_id)} "
                     f"{quote(cut)}{display.inv.db_suffix or ''}",
                     style="dim" if display.rich else None)


def _show_rich(display: Display, detail: Any, rows: list[tuple[str, ...]]) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    run = detail.summary
    status = run.status.value
    head = Text()
    head.append(f"{STATUS_MARK.get(status, '')} {status_text(run)}", style=STATUS_STYLE.get(status, ""))
    head.append(printable(f"  run {run.run_id}"), style="bold")
    head.append(printable(f"  process {process_text(run, '(main block)')}"), style="dim")
    if run.parent_run_id:
        head.append(printable(f"  parent {run.parent_run_id}"), style="dim")
    display.console.print(head)
    display.console.print(Text(printable(f"file {detail.file or '-'}   created "
                                         f"{display.when(run.created_at)}   updated "
                                         f"{display.when(run.updated_at)}"), style="dim"))
    display.console.print(Text(printable(f"input {preview(detail.input, 100)}"), style="dim"))
    width = display.console.width
    plan = journal_widths(rows, width)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False,
                  padding=(0, 1), collapse_padding=True)
    for (name, justify), fixed in zip(JOURNAL_COLUMNS, plan.fixed):
        # rich wants its JustifyMethod literal: the columns' words are those, written
        # as plain text so this module imports no rich before a table is drawn
        table.add_column(name, justify=justify,  # type: ignore[arg-type]
                         no_wrap=True, overflow="ellipsis", min_width=fixed, max_width=fixed,
                         style="dim" if name == "#" else None)
    if plan.outcome:
        table.add_column("outcome", no_wrap=True, overflow="ellipsis", max_width=plan.outcome)
    for (n, key, kind, target, state, attempts, duration, offset, text) in rows:
        cells: list[Any] = [n, printable(key), kind, printable(target),
                            Text(state, style=STATE_STYLE.get(state, "")), attempts, duration,
                            offset]
        if plan.outcome:
            cells.append(printable(text))
        table.add_row(*cells)
    display.console.print(table)
    if not plan.outcome:  # too narrow for it beside the fixed columns: a line of its own
        for (n, *_, text) in rows:
            if text:
                display.console.print(Text(f"{n:>3}  " + one_line(printable(text),
                                                                  max(8, width - 5))),
                                      soft_wrap=True)


JOURNAL_COLUMNS = (("#", "right"), ("step", "left"), ("kind", "left"), ("tool", "left"),
                   ("state", "left"), ("tries", "right"), ("took", "right"), ("at", "right"))
GAP = 2  # between two columns
MIN_OUTCOME = 24  # narrower than this, the outcome goes to a line of its own


class JournalWidths(Frozen):
    __slots__ = ("fixed", "outcome")
    fixed: tuple[int, ...]  # one width per JOURNAL_COLUMNS column: never wrapped
    outcome: int  # the outcome column's width; 0: each outcome on its own line

    def __init__(self, fixed: tuple[int, ...], outcome: int) -> None:
        object.__setattr__(self, "fixed", fixed)
        object.__setattr__(self, "outcome", outcome)


def journal_widths(rows: list[tuple[str, ...]], width: int) -> JournalWidths:
    """How ``show``'s table fits ``width`` columns: the fixed columns take what their
    contents need and never wrap; the outcome takes the rest, and below
    ``MIN_OUTCOME`` moves to a line of its own. If even the fixed columns do not fit, the
    tool name gives way first (to 10), then the step key (to 8), each cut with ``…``."""
    natural = [max([len(name)] + [len(row[i]) for row in rows])
               for i, (name, _) in enumerate(JOURNAL_COLUMNS)]
    used = sum(natural) + GAP * (len(natural) - 1)
    room = width - used - GAP
    if room >= MIN_OUTCOME:
        return JournalWidths(tuple(natural), room)
    fixed = list(natural)
    for column, floor in ((3, 10), (1, 8)):  # tool, then step
        over = sum(fixed) + GAP * (len(fixed) - 1) - width
        if over > 0:
            fixed[column] = max(floor, fixed[column] - over)
    return JournalWidths(tuple(fixed), 0)


# --------------------------------------------------------------------------- list / waiting


def render_runs(display: Display, runs: list[Any]) -> None:
    """``lashflow list``: one row per run summary. The run id, status and creation time
    are never cut; where the terminal leaves the info column (error, waits, note) too
    little room, each run's time and info go on a line of their own below its row.
    Piped output keeps a header line and one run per line, for grep."""
    if display.rich:
        from rich.table import Table
        from rich.text import Text

        width = display.console.width
        run_w = max(len(r.run_id) for r in runs)
        status_w = max(len(status_text(r)) for r in runs)
        process_w = min(24, max(len(process_text(r)) for r in runs))
        created_w = max(len(display.when(r.created_at)) for r in runs)
        # a column costs 3 for its padding; below MIN_INFO columns of info, two lines
        info_w = width - 3 * 4 - run_w - status_w - process_w - created_w
        if info_w < MIN_INFO:
            _runs_on_two_lines(display, runs, run_w, status_w)
            return
        table = Table(show_edge=False, header_style="bold", pad_edge=False)
        table.add_column("run", no_wrap=True, min_width=run_w)
        table.add_column("status", no_wrap=True, min_width=status_w)
        table.add_column("process", no_wrap=True, overflow="ellipsis", max_width=process_w)
        table.add_column("created", no_wrap=True, min_width=created_w)
        table.add_column("info", no_wrap=True, overflow="ellipsis", max_width=info_w)
        for run in runs:
            status = run.status.value
            # Text, not markup: an info like ``error[code]`` is not a style tag
            table.add_row(Text(printable(run.run_id)),
                          Text(status_text(run), style=STATUS_STYLE.get(status, "")),
                          Text(printable(process_text(run))), display.when(run.created_at),
                          Text(printable(run_info(run, display.when))))
        display.console.print(table)
        display.console.print(Text(f"{len(runs)} run(s)", style="dim"))
        return
    width = max(len(run.run_id) for run in runs)
    stdout(f"{'RUN':<{width}}  {'STATUS':<15} {'PROCESS':<16} {'CREATED':<25} INFO")
    for run in runs:
        stdout(f"{run.run_id:<{width}}  {status_text(run):<15} {process_text(run):<16} "
               f"{display.when(run.created_at):<25} {run_info(run, display.when)}")


MIN_INFO = 24  # columns of info worth a column of its own (else it goes below the row)


def _runs_on_two_lines(display: Display, runs: list[Any], run_w: int, status_w: int) -> None:
    """``list`` on a narrow terminal: run, status and process on the first line, the
    creation time (whole) and the info (cut at the edge) indented on the second."""
    from rich.text import Text

    console = display.console

    def out(text: Any) -> None:
        console.print(text, no_wrap=True, overflow="ellipsis", crop=True)

    out(Text(f"{'run':<{run_w}}  {'status':<{status_w}}  process", style="bold"))
    for run in runs:
        status = run.status.value
        out(Text.assemble(f"{printable(run.run_id):<{run_w}}  ",
                          (f"{status_text(run):<{status_w}}", STATUS_STYLE.get(status, "")),
                          "  " + printable(process_text(run))))
        info = printable(run_info(run, display.when))
        out(Text("  " + display.when(run.created_at) + ("  " + info if info else ""),
                 style="dim"))
    out(Text(f"{len(runs)} run(s)", style="dim"))


def process_text(run: Any, main: str = "(main)") -> str:
    """The run's process, with the deployed version it runs (``fulfill v3``)."""
    version = getattr(run, "version", None)
    return (run.process or main) + (f" v{version}" if version is not None else "")


def paused_text(paused: dict[str, Any], when: Callable[[float | None], str]) -> str:
    """Who paused a run, when and why: ``paused by ann@box at 2026-12-04 10:00: why``."""
    by = f" by {paused['by']}" if paused.get("by") else ""
    why = f": {paused['reason']}" if paused.get("reason") else ""
    return f"paused{by} at {when(paused.get('at'))}{why}"


def run_info(run: Any, when: Callable[[float | None], str]) -> str:
    """A summary's one-line info: its error, what it waits on, its parent, its note."""
    parts = []
    if getattr(run, "paused", None):
        parts.append(paused_text(run.paused, when))
    if run.error is not None:
        parts.append(f"error[{run.error.code}]: {run.error.message}")
    if run.waiting:
        parts.append("; ".join(wait_what(w, when) for w in run.waiting))
    if run.parent_run_id:
        parts.append(f"child of {run.parent_run_id}")
    if run.note:
        parts.append(f"note: {run.note}")
    return one_line(" · ".join(parts), 120)


def render_waiting(display: Display, waits: list[tuple[str, Any]], now: float) -> None:
    """``lashflow waiting``: a table of what each parked run waits on, then the exact
    command that resolves each wait, numbered, each on one unbroken line."""
    if not waits:
        display.line("no run is waiting")
        return
    if display.rich:
        from rich.table import Table
        from rich.text import Text

        table = Table(show_edge=False, header_style="bold", pad_edge=False)
        for name in ("#", "run", "waits on", "step", "due"):
            table.add_column(name, overflow="fold")
        for i, (run_id, wait) in enumerate(waits, 1):
            table.add_row(str(i), printable(run_id),
                          Text(printable(wait_what(wait, display.when)), style="yellow"),
                          printable(wait.step), _due(wait, now))
        display.console.print(table)
        display.console.print(Text("resolve with:", style="bold"))
        for i, (_, wait) in enumerate(waits, 1):
            display.line(f"  #{i}  {resolve_command(display, wait)}")
        return
    width = max(len(run_id) for run_id, _ in waits)
    for run_id, wait in waits:
        stdout(f"{run_id:<{width}}  {wait.kind:<10} {wait.step:<24} "
               f"{wait_what(wait, display.when)}")
        stdout(f"    {resolve_command(display, wait)}")


def _due(wait: Any, now: float) -> str:
    if wait.until is None:
        return ""
    left = wait.until - now
    return f"in {seconds(left)}" if left > 0 else "due now"
