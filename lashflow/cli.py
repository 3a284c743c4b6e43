"""``lashflow`` command line: typer over the public ``Engine`` API, no logic of its own.

Each command parses its arguments, calls the engine and hands the answer to
``cli_render`` (rich on a terminal, plain lines otherwise, one JSON object with
``--json``). Every user mistake ends as one line ``error[code]: message`` on stderr (plus
a caret excerpt for source errors) and exit code 2; see ``cli_support``.
"""

from __future__ import annotations

import asyncio
import signal as signals
import time
from pathlib import Path
from shlex import quote
from typing import Any, Awaitable, Callable, Optional

import typer

from . import __version__
from .cli_drive import LiveStatus, settle
from .cli_render import (RUN_SOURCE, Display, render_outcome, render_runs, render_show,
                         render_waiting, run_error_text)
from .cli_support import (EXIT_BY_STATUS, EXIT_REJECTED, LashflowGroup, caret_text, dumps,
                          no_key, no_run, nothing_yet,
                          engine, fail, freeze_startup_heap, parse_age, parse_json_option, parse_when, read_source, run_async,
                          source_or_none, stderr, stdout)
from .errors import LashflowError, NoDatabase, UsageError
from .states import RUN_STATUSES

app = typer.Typer(cls=LashflowGroup, add_completion=False, no_args_is_help=True,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="lashflow: durable workflows written in Lashlang.\n\n"
                       "Exit codes of run/resume: 0 finished, 1 failed, 2 rejected (nothing ran: "
                       "bad file, input, key, database...), 3 waiting, 4 cancelled, "
                       "5 needs attention. Add --json to any command for one JSON object.")

DB_HELP = ("Database: sqlite:///file.db, a plain file path, or postgresql://user@host:port/db. "
           "Default: $LASHFLOW_DB, else .lashflow/lashflow.db here.")
DbOption = typer.Option(None, "--db", envvar="LASHFLOW_DB", show_envvar=True, metavar="URL",
                        help=DB_HELP)
JsonOption = typer.Option(False, "--json", help="Print exactly one JSON object on stdout.")
ToolsOption = typer.Option([], "--tools", "-t", metavar="MODULE",
                           help="Tool module name or .py path to load (repeatable); the .py "
                                "beside the .lash file is always loaded.")


def _log_format(value: str) -> str:
    if value not in ("text", "json"):
        fail("usage_error", f"--log-format {value}: use text or json", False)
    return value


LogFormatOption = typer.Option("text", "--log-format", metavar="text|json",
                               callback=_log_format,
                               help="Run transitions as text lines or as JSON lines.")


def run_log(fmt: str, write: Any) -> Any:
    """The listener that writes one line per run transition (see RunLog)."""
    from .telemetry.runlog import RunLog

    return RunLog(write, fmt)


MaxWaitOption = typer.Option(30.0, "--max-wait", metavar="SECONDS",
                             help="Keep driving through sleeps that end within this many seconds.")
FollowOption = typer.Option(False, "--follow", "-f",
                            help="Keep driving through every wait until it is resolved from "
                                 "elsewhere (signal, complete, another worker).")


def _version(value: bool) -> None:
    if value:
        stdout(f"lashflow {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit."),
          utc: bool = typer.Option(False, "--utc",
                                   help="Print times in UTC (default: local time, with its "
                                        "offset). Also LASHFLOW_UTC=1.")) -> None:
    """lashflow: durable workflows written in Lashlang."""
    from .cli_render import UTC_REQUESTED

    UTC_REQUESTED[0] = utc
    RUN_SOURCE.clear()  # set by `run` for its own runtime errors only


def _finish(display: Display, outcome: Any, started: float | None = None) -> int:
    """Report a run outcome; the exit code follows its status."""
    if display.as_json:
        stdout(dumps(outcome.to_json()))
    else:
        render_outcome(display, outcome, None if started is None else time.monotonic() - started)
    return EXIT_BY_STATUS.get(outcome.status.value, 0)


# --------------------------------------------------------------------------- running


@app.command()
def run(
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The .lash file to run.", show_default=False),
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="The process to run (needed when the file has "
                                               "several and no main block)."),
    input: Optional[str] = typer.Option(None, "--input", "-i", metavar="JSON|@FILE",
                                        help="The run's input: a JSON object of the process "
                                             "parameters, inline or @file.json."),
    run_id: Optional[str] = typer.Option(None, "--run-id", metavar="ID",
                                         help="Idempotent run id: the same id, file and input "
                                              "give back the same run."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    detach: bool = typer.Option(False, "--detach",
                                help="Store the run as queued and return (as `submit`)."),
    max_wait: float = MaxWaitOption,
    follow: bool = FollowOption,
) -> None:
    """Start a run and drive it until it settles or parks.

    Exit 0 finished, 1 failed, 2 rejected, 3 waiting (each wait is listed with the
    command that resolves it), 4 cancelled, 5 needs attention.
    """
    display = Display(as_json)
    text = source_or_none(file)
    started = time.monotonic()
    if text is not None:
        RUN_SOURCE[:] = [(str(file), text)]

    async def go() -> int:
        data = parse_json_option(input, "--input")
        async with engine(db, tools) as eng:
            if detach:
                record = await eng.create(file, process, data, run_id)
                return _finish(display, await eng.get(record.run_id))
            with LiveStatus.for_command(as_json, f"run {file.name}") as live:
                eng.listeners.append(live.on_event)
                outcome = await eng.run(file, process, data, run_id)
                outcome = await settle(eng, outcome, max_wait, follow, live)
            return _finish(display, outcome, started)

    raise typer.Exit(run_async(go, as_json, text, str(file), run_id))


@app.command()
def submit(
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The .lash file to run.", show_default=False),
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="The process to run."),
    input: Optional[str] = typer.Option(None, "--input", "-i", metavar="JSON|@FILE",
                                        help="Input JSON object, inline or @file.json."),
    run_id: Optional[str] = typer.Option(None, "--run-id", metavar="ID", help="Idempotent run id."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Enqueue a run without driving it: `lashflow worker` or `lashflow recover` picks it
    up. The input is checked now (exit 2 if it does not fit)."""
    display = Display(as_json)
    text = source_or_none(file)

    async def go() -> int:
        data = parse_json_option(input, "--input")
        async with engine(db, tools) as eng:
            record = await eng.create(file, process, data, run_id)
            return _finish(display, await eng.get(record.run_id))

    raise typer.Exit(run_async(go, as_json, text, str(file), run_id))


@app.command()
def resume(
    run_id: str = typer.Argument(..., metavar="RUN",
                                 help="The run to continue.", show_default=False),
    source: Optional[Path] = typer.Option(None, "--source", metavar="FILE",
                                          help="Continue under this edited .lash file; recorded "
                                               "steps must still match (else replay_mismatch)."),
    retry_interrupted: bool = typer.Option(False, "--retry-interrupted",
                                           help="Run an interrupted non-idempotent attempt again "
                                                "(the run is in needs_attention)."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    max_wait: float = MaxWaitOption,
    follow: bool = FollowOption,
) -> None:
    """Continue one run from its journal: recorded steps replay, the first unrecorded one
    runs. A settled run is shown unchanged. Exit codes as `run`."""
    go = _driving(as_json, db, tools, f"resume {run_id}", max_wait, follow, source,
                  lambda eng: eng.resume(run_id, source, retry_interrupted=retry_interrupted))
    raise typer.Exit(run_async(go, as_json, source_or_none(source),
                               str(source) if source else None, run_id))


def _driving(as_json: bool, db: Optional[str], tools: list[str], label: str, max_wait: float,
             follow: bool, source: Optional[Path],
             act: Callable[[Any], Awaitable[Any]]) -> Callable[[], Awaitable[int]]:
    """A command that drives one run: ``act(engine)`` starts it, then ``settle`` keeps
    it going (short sleeps, ``--follow``) with a live status line, then the report."""
    display = Display(as_json)
    started = time.monotonic()

    async def go() -> int:
        if source is not None:
            read_source(source)
        async with engine(db, tools) as eng:
            with LiveStatus.for_command(as_json, label) as live:
                eng.listeners.append(live.on_event)
                outcome = await settle(eng, await act(eng), max_wait, follow, live)
            return _finish(display, outcome, started)

    return go


@app.command()
def retry(
    run_id: str = typer.Argument(..., metavar="RUN",
                                 help="A failed, cancelled or needs_attention run.",
                                 show_default=False),
    source: Optional[Path] = typer.Option(None, "--source", metavar="FILE",
                                          help="Retry under this edited .lash file; recorded "
                                               "steps must still match (else replay_mismatch)."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    max_wait: float = MaxWaitOption,
    follow: bool = FollowOption,
) -> None:
    """Run a stopped run again: recorded successes replay, the first step that did not
    succeed and every step after it run again; their old attempts stay in the journal
    (`show`). Exit codes as `run`."""
    go = _driving(as_json, db, tools, f"retry {run_id}", max_wait, follow, source,
                  lambda eng: eng.retry(run_id, source))
    raise typer.Exit(run_async(go, as_json, source_or_none(source),
                               str(source) if source else None, run_id))


@app.command()
def fork(
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to fork.", show_default=False),
    from_step: str = typer.Option(..., "--from", metavar="STEP",
                                  help="Copy the journal before this step (a step key, or the "
                                       "row number `show` prints); the fork runs on from it."),
    sets: list[str] = typer.Option([], "--set", metavar="STEP=JSON",
                                   help="Record JSON as this tool step's successful result in "
                                        "the fork (repeatable)."),
    new_run_id: Optional[str] = typer.Option(None, "--run-id", metavar="ID",
                                             help="The fork's run id (default: generated)."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    max_wait: float = MaxWaitOption,
    follow: bool = FollowOption,
) -> None:
    """A new run from a run's journal before a step, optionally with some tool results
    set by hand ("what if approval had said no"), driven on at once. The fork records
    `forked_from`, the original its `forks`. Exit codes as `run`."""

    async def act(eng: Any) -> Any:
        overrides: dict[str, Any] = {}
        for item in sets:
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise UsageError(f"--set {item!r}: expected STEP=JSON")
            overrides[key] = parse_json_option(value, f"--set {key}")
        return await eng.fork(run_id, from_step, set=overrides, run_id_of_fork=new_run_id)

    go = _driving(as_json, db, tools, f"fork {run_id}", max_wait, follow, None, act)
    raise typer.Exit(run_async(go, as_json, run_id=run_id))


@app.command()
def recover(
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue every run whose worker is gone (and every run whose timer is due).

    Exit 0; each run's status is in the output (JSON: {"recovered": [outcome, ...]}).
    """
    display = Display(as_json)

    async def go() -> int:
        async with engine(db, tools) as eng:
            with LiveStatus.for_command(as_json, "recover") as live:
                eng.listeners.append(live.on_event)
                outcomes = await eng.recover()
        if as_json:
            stdout(dumps({"recovered": [o.to_json() for o in outcomes]}))
            return 0
        for outcome in outcomes:
            render_outcome(display, outcome)
        display.line(f"recovered {len(outcomes)} run(s)")
        return 0

    raise typer.Exit(run_async(go, as_json))


@app.command()
def worker(
    concurrency: int = typer.Option(64, "--concurrency", "-c", min=1, metavar="N",
                                    help="Runs driven at once (a parked run does not count)."),
    poll: float = typer.Option(1.0, "--poll", metavar="SECONDS", min=0.01,
                               help="Seconds between looks for queued, orphaned and due runs."),
    once: bool = typer.Option(False, "--once",
                              help="Drive what is ready now, then exit (for cron and tests)."),
    lease_ttl: float = typer.Option(30.0, "--lease-ttl", metavar="SECONDS", min=0.3,
                                    envvar="LASHFLOW_LEASE_TTL", show_envvar=True,
                                    help="How long a run's lease outlives a silent worker "
                                         "(renewed every third of it): another worker takes "
                                         "the run over after that."),
    log_format: str = LogFormatOption,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Run queued runs (from `submit`), orphaned runs and due timers until stopped.
    Each run transition is one line on stdout: time, run id, status, step.
    Ctrl-C or SIGTERM: no new run is taken; each run in flight stops at its next effect
    and goes back to `queued` (its journal kept) for the next worker; a run still busy
    after a grace of 10 s is cut off the same way (its lease then lets another take it)."""

    async def go() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # not the main thread (test runners)
                pass
        settled: dict[str, None] = {}  # run ids in the order their drives ended
        async with engine(db, tools, concurrency=concurrency, lease_ttl=lease_ttl) as eng:
            if not as_json and not once:
                stderr(f"worker {eng.owner}: polling every {poll:g} s, {concurrency} runs at once")
            def on_event(event: dict[str, Any]) -> None:
                if event["type"] == "run" and as_json:
                    # kept for the summary only: a long-lived worker keeps none
                    settled.setdefault(event["run_id"])

            eng.listeners.append(on_event)
            if not as_json:
                eng.listeners.append(run_log(log_format, stdout))
            if not once:
                freeze_startup_heap()
            await eng.work(concurrency, stop=stop, poll=poll, idle_exit=0.0 if once else None)
            done = [await eng.get(run_id) for run_id in settled]
        if as_json:
            stdout(dumps({"recovered": [o.to_json() for o in done]}))
        return 0

    raise typer.Exit(run_async(go, as_json))


# --------------------------------------------------------------------------- checking


@app.command()
def check(
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The .lash file to check.", show_default=False),
    tools: list[str] = ToolsOption,
    as_json: bool = JsonOption,
) -> None:
    """Parse and link a file against the tools it would run with; run nothing.

    Exit 0 if it is fine, 2 with the diagnostic (and a caret under the place) if not.
    """
    from .lang import check as check_source

    text = source_or_none(file)

    async def catalog() -> Any:
        """The tools the file links against (``--tools``, the project's config, the ``.py``
        beside it), loaded into a registry of their own (no database is opened)."""
        from .lang.catalog import Catalog
        from .tools import ToolRegistry, tools_in_module
        from .tools.loading import tool_modules_for

        read_source(file)
        registry = ToolRegistry()
        for module in tool_modules_for(file, tools):
            registry.add(*tools_in_module(module))
        return Catalog.of(registry.definitions())

    cat = run_async(catalog, as_json)
    assert text is not None
    diagnostics = check_source(text, cat)
    if diagnostics:
        first = diagnostics[0]
        if as_json:
            stdout(dumps({"run_id": None, "status": "rejected", "ok": False,
                          "error": first.to_dict(),
                          "diagnostics": [d.to_dict() for d in diagnostics]}))
        else:
            for d in diagnostics:
                stderr(caret_text(d, text, str(file)))
        raise typer.Exit(2)
    from .lang import parse

    from .graph import fan_outs

    module = parse(text)
    processes = [{"name": p.name, "params": [q.name for q in p.params]} for p in module.processes]
    batches = fan_outs(module, text)
    if as_json:
        stdout(dumps({"run_id": None, "status": "ok", "ok": True, "file": str(file),
                      "main": bool(module.main), "processes": processes,
                      "fan_outs": batches, "diagnostics": []}))
    else:
        entry = ["main block"] if module.main else []
        entry += [f"process {p['name']}({', '.join(p['params'])})" for p in processes]
        stdout(f"{file}: ok ({'; '.join(entry) or 'empty'})")
        for batch in batches:
            stdout(f"  line {batch['line']}: fan-out {batch['fan_out']} (one concurrent batch)")
    raise typer.Exit(0)


@app.command()
def fmt(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", show_default=False,
                                       help=".lash files, or folders to search for them."),
    check: bool = typer.Option(False, "--check", help="Write nothing; name the files that "
                               "would change and exit 1 if there are any (for CI)."),
    diff: bool = typer.Option(False, "--diff", help="Write nothing; print what would change."),
) -> None:
    """Rewrite .lash files in the one canonical layout (comments kept, meaning unchanged).

    Names each file it changes; exit 2 if a file cannot be read or does not parse.
    """
    from .fmt import format_paths

    raise typer.Exit(format_paths(paths, check=check, diff=diff, out=stdout, err=stderr))


@app.command()
def lsp(tools: list[str] = ToolsOption) -> None:
    """Run the Lashlang language server on stdin/stdout, for editors (docs/editors.md)."""
    from .lsp import serve

    serve(tools)


@app.command()
def graph(
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The .lash file to draw.", show_default=False),
    fmt: str = typer.Option("mermaid", "--format", metavar="FORMAT",
                            help="mermaid (default) or dot."),
    run: Optional[str] = typer.Option(None, "--run", metavar="RUN",
                                      help="Colour the steps by this run's journal (and its "
                                           "child runs')."),
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="Only this process (default: every process and "
                                               "the main block)."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """The process as a graph (Mermaid or Graphviz DOT): its steps (tool calls, starts,
    sleeps, signals, awaits), branches, loops and batches, titled by @label.

    With --json: {"run_id", "status": "ok", "format", "text", "nodes", "edges"}, each
    node with its kind, label, state and executions."""
    from .graph import GraphError, build_graph, node_state, render, site_states

    if fmt not in ("mermaid", "dot"):
        fail("usage_error", f"--format must be mermaid or dot, not {fmt!r}", as_json)
    text = source_or_none(file)

    async def go() -> int:
        source = read_source(file)
        states: dict[str, list[str]] = {}
        if run is not None:
            from .durable.programs import source_digest

            async with engine(db, create=False, absent=no_run(run)) as eng:
                states = await site_states(eng, run)
                if (await eng.get_record(run)).source_hash != source_digest(source):
                    stderr(f"warning: run {run} was started from another version of {file}; "
                           "steps are matched by their place in the process")
        try:
            drawing = build_graph(source, process=process)
        except GraphError as exc:
            raise UsageError(str(exc)) from None
        shown = states if run is not None else None
        text_out = render(drawing, fmt, shown)
        if not as_json:
            stdout(text_out)
            return 0
        nodes = []
        for node in drawing.nodes.values():
            state, runs = node_state(node, shown) if shown is not None else (None, 0)
            nodes.append({"id": node.id, "kind": node.kind, "label": node.label,
                          "sites": node.sites, "state": state, "executions": runs})
        stdout(dumps({"run_id": run, "status": "ok", "format": fmt, "text": text_out,
                      "nodes": nodes, "edges": [{"from": a, "to": b, "label": label}
                                                for a, b, label in drawing.edges]}))
        return 0

    raise typer.Exit(run_async(go, as_json, text, str(file), run))


# --------------------------------------------------------------------------- outside events


@app.command()
def complete(
    key: str = typer.Argument(..., metavar="KEY",
                              help="The completion key (lfk_...), as printed by `run` "
                                        "or `waiting`.", show_default=False),
    result: Optional[str] = typer.Option(None, "--result", metavar="JSON|@FILE",
                                         help="The tool's result, as JSON."),
    error: Optional[str] = typer.Option(None, "--error", metavar="MESSAGE",
                                        help="Resolve as a tool error with this message "
                                             "(the process sees {ok: false, error})."),
    resume_run: bool = typer.Option(False, "--resume",
                                    help="Drive the run on after delivery (exit codes then as "
                                         "`run`)."),
    max_wait: float = MaxWaitOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Resolve a completion key: the first writer wins (a later one gets
    completion_already_resolved, a forged or unknown key unknown_completion_key)."""
    from .tools import ToolResult

    display = Display(as_json)
    started = time.monotonic()

    async def go() -> int:
        if (result is None) == (error is None):
            raise UsageError("give exactly one of --result JSON or --error MESSAGE")
        value = ToolResult.err(error) if error is not None else ToolResult.ok(
            parse_json_option(result, "--result"))
        async with engine(db, create=False, absent=no_key) as eng:
            with LiveStatus.for_command(as_json or not resume_run, "complete") as live:
                eng.listeners.append(live.on_event)
                delivery = await eng.deliver(key, value, resume=resume_run)
                run_id = delivery.run_id
                outcome = await eng.get(run_id)
                if not resume_run:
                    return _delivered(display, run_id, outcome.status.value)
                outcome = await settle(eng, outcome, max_wait, False, live)
            return _finish(display, outcome, started)

    raise typer.Exit(run_async(go, as_json))


def _delivered(display: Display, run_id: str, status: str) -> int:
    if display.as_json:
        stdout(dumps({"run_id": run_id, "status": status, "delivered": True}))
    else:
        hint = f"; continue it with `lashflow resume {quote(run_id)}`" if status == "waiting" else ""
        display.line(f"delivered; run {run_id} is {status}{hint}")
    return 0


@app.command()
def signal(
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
    display = Display(as_json)

    async def go() -> int:
        data = parse_json_option(payload, "--payload")
        async with engine(db, create=False, absent=no_run(run_id)) as eng:
            with LiveStatus.for_command(as_json, f"signal {name}") as live:
                eng.listeners.append(live.on_event)
                await eng.signal(run_id, name, data)
                outcome = await settle(eng, await eng.get(run_id), max_wait, False, live)
        if as_json:
            stdout(dumps(outcome.to_json()))
        else:
            display.line(f"signal {name} delivered")
            render_outcome(display, outcome)
        return 0

    raise typer.Exit(run_async(go, as_json, run_id=run_id))


@app.command()
def cancel(
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to cancel.", show_default=False),
    reason: Optional[str] = typer.Option(None, "--reason", metavar="TEXT",
                                         help="Why: kept in the run's error and shown."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Cancel a run: at once if parked or queued, at its next effect if a worker is
    driving it (in-flight attempts are cancelled). Pending tool calls follow their
    on_cancel. Exit 0."""
    display = Display(as_json)

    async def go() -> int:
        async with engine(db, create=False, absent=no_run(run_id)) as eng:
            before = (await eng.get(run_id)).status
            status = await eng.cancel(run_id, reason)
            outcome = await eng.get(run_id)
        if before.settled:  # nothing to cancel: say so, change nothing
            if as_json:
                stdout(dumps(dict(outcome.to_json(), already_settled=True)))
            else:
                display.line(f"run {run_id} is already {before.value}; it is left as it is")
            return 0
        if as_json:
            data = outcome.to_json()
            if outcome.status.value != "cancelled":
                data["cancel_requested"] = True
            stdout(dumps(data))
        elif outcome.status.value == "cancelled":
            render_outcome(display, outcome)
        else:
            display.line(f"cancel requested: run {run_id} is {status.value}; it stops at its "
                         "next effect")
        return 0

    raise typer.Exit(run_async(go, as_json, run_id=run_id))


# --------------------------------------------------------------------------- inspecting


@app.command("list")
def list_runs(
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
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """List runs, newest first, one page at a time (the command for the next page is
    printed under the list)."""
    display = Display(as_json)
    statuses = [part.strip() for part in status.split(",") if part.strip()] if status else []

    async def go() -> int:
        from .durable.reads import check_run_filters

        check_run_filters(statuses, limit)  # a bad filter is refused, database or not
        try:
            async with engine(db, create=False) as eng:
                now = eng.clock.now()
                page = await eng.runs(status=statuses, process=process, parent=parent,
                                      since=parse_when(since, "--since", now),
                                      until=parse_when(until, "--until", now),
                                      limit=limit, cursor=cursor)
        except NoDatabase as missing:  # nothing has run here: no runs, and no file made
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

    raise typer.Exit(run_async(go, as_json))


@app.command()
def show(
    run_id: str = typer.Argument(..., metavar="RUN", help="The run to show.", show_default=False),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A run's status, input and its journal as a timeline: each step's tool, attempts,
    duration, start offset and outcome preview (through the output budget), its children
    and its parent."""
    display = Display(as_json)

    async def go() -> int:
        async with engine(db, create=False, absent=no_run(run_id)) as eng:
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

    raise typer.Exit(run_async(go, as_json, run_id=run_id))


@app.command()
def waiting(
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """What every parked run waits on, with the exact command that would resolve it."""
    display = Display(as_json)

    async def go() -> int:
        try:
            async with engine(db, create=False) as eng:
                waits = await eng.waiting()
                now = eng.clock.now()
        except NoDatabase as missing:
            return nothing_yet(display, missing, {"waiting": []})
        if as_json:
            stdout(dumps({"waiting": [dict(w.to_json(), run_id=r) for r, w in waits]}))
        else:
            render_waiting(display, waits, now)
        return 0

    raise typer.Exit(run_async(go, as_json))


@app.command()
def output(
    run_id: str = typer.Argument(..., metavar="RUN", help="The run.", show_default=False),
    step: str = typer.Argument(..., metavar="STEP",
                               help="The step key, or the row number `show` prints.",
                               show_default=False),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """The full, unbudgeted output of one step (a failed tool step: its message and the
    journaled traceback)."""
    import json

    async def go() -> int:
        async with engine(db, create=False, absent=no_run(run_id)) as eng:
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
                       else json.dumps(value, indent=2, ensure_ascii=False), raw=True)
            return 0
        known = ", ".join(s.step_key for s in steps[:6]) + (", ..." if len(steps) > 6 else "")
        raise LashflowError(f"run {run_id} has no step {step!r}"
                            + (f" (its steps: {known})" if steps else " (it has no steps yet)"),
                            code="unknown_step")

    raise typer.Exit(run_async(go, as_json, run_id=run_id))


@app.command()
def gc(
    older_than: str = typer.Option(..., "--older-than", metavar="AGE",
                                   help="Delete settled runs not updated for this long: "
                                        "30d, 12h, 90m..."),
    status: str = typer.Option("finished,failed,cancelled", "--status", metavar="STATUS[,...]",
                               help="Which settled runs (finished, failed, cancelled)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would go; delete nothing."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Retention: delete old settled runs with their journals, completion keys, signals
    and the output blobs only they used, in short batches (workers keep running)."""
    display = Display(as_json)

    async def go() -> int:
        age = parse_age(older_than, "--older-than")
        async with engine(db) as eng:
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

    raise typer.Exit(run_async(go, as_json))


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST",
                             help="The address to listen on (loopback unless you say so)."),
    port: int = typer.Option(8750, "--port", metavar="PORT", min=0, max=65535,
                             help="The port (0: any free one, printed at start)."),
    processes: Optional[Path] = typer.Option(None, "--processes", metavar="DIR",
                                             help="The directory runs may be started from "
                                                  "(POST /v1/runs); none: the API starts no runs."),
    token: Optional[str] = typer.Option(None, "--token", envvar="LASHFLOW_API_TOKEN",
                                        metavar="TOKEN", show_default=False,
                                        help="The management routes' bearer token (default "
                                             "$LASHFLOW_API_TOKEN, else one is generated and "
                                             "printed)."),
    body_limit: int = typer.Option(1024 * 1024, "--body-limit", metavar="BYTES", min=1,
                                   help="The largest request body accepted (413 beyond)."),
    inbox_only: bool = typer.Option(False, "--inbox-only",
                                    help="Serve only the console's inbox (and the webhooks): "
                                         "for the people who approve; no runs API."),
    no_worker: bool = typer.Option(False, "--no-worker",
                                   help="Serve only: runs move on in `lashflow worker` "
                                        "processes, not here."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", metavar="N",
                                              help="Runs driven at once by the worker."),
    log_format: str = LogFormatOption,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
) -> None:
    """Serve the web console at / (sign in with the token), completion webhooks (POST
    /v1/completions/KEY), the runs API under /v1, /metrics and /openapi.json, and run the
    worker loop (one line per run transition on stderr). SIGTERM: stop accepting, finish requests in
    flight, then runs in flight go back to `queued` at their next effect."""
    import secrets

    from .http import ServeConfig
    from .http.server import serve as run_server

    if processes is not None and not processes.is_dir():
        fail("usage_error", f"--processes {processes}: not a directory", False)
    secret = token or secrets.token_urlsafe(24)
    if token is None:
        stderr(f"lashflow serve: management token {secret} (set LASHFLOW_API_TOKEN to "
               "choose one)")
    config = ServeConfig(secret, processes, body_limit, drive=not no_worker,
                         console="inbox" if inbox_only else "full")

    def up(line: str) -> None:
        stderr(line)
        freeze_startup_heap()

    async def go() -> int:
        await run_server(host=host, port=port, db=db, tools=tools, config=config,
                         concurrency=concurrency, announce=up,
                         listener=run_log(log_format, stderr))
        return 0

    raise typer.Exit(run_async(go, False))


from .cli_schedule import schedule_app  # noqa: E402 - a group of its own, registered last

app.add_typer(schedule_app, name="schedule")


def main() -> None:
    """Console-script entry point (``lashflow`` and ``python -m lashflow``)."""
    app()


if __name__ == "__main__":
    main()
