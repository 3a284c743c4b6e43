"""Commands that start and drive runs: run, submit, resume, retry, fork, recover, worker."""

from __future__ import annotations

import asyncio
import signal as signals
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

import typer

from ..errors import UsageError
from .bulk import WhereOption, bulk_command, one_or_where
from .context import Invocation
from .driving import driving, finish, live_status, resume_command
from .exits import fail, freeze_startup_heap, run_async
from .options import (DbOption, FileOrProcessArgument, FollowOption, JsonOption, LogFormatOption, MaxWaitOption,
                      ToolsOption, no_run, parse_json_option, run_log,
                      deployed, source_or_none)
from .output import dumps, stderr, stdout
from .render import Display, render_outcome


def run(
    ctx: typer.Context,
    file: Path = FileOrProcessArgument,
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
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    text = source_or_none(file)
    started = time.monotonic()
    if text is not None:
        inv.run_source = (str(file), text)

    async def go() -> int:
        data = parse_json_option(input, "--input")
        async with inv.engine(db, tools) as eng:
            if detach:
                record = await eng.create(*deployed(file, process), data, run_id)
                return finish(display, await eng.get(record.run_id))
            with live_status(inv, f"run {file.name}") as live:
                eng.listeners.append(live.on_event)
                outcome = await eng.run(*deployed(file, process), data, run_id)
                outcome = await eng.settle(outcome, max_wait=max_wait, follow=follow)
            return finish(display, outcome, started)

    raise typer.Exit(run_async(inv, go, text, str(file), run_id))


def submit(
    ctx: typer.Context,
    file: Path = FileOrProcessArgument,
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="The process to run."),
    input: Optional[str] = typer.Option(None, "--input", "-i", metavar="JSON|@FILE",
                                        help="Input JSON object, inline or @file.json."),
    run_id: Optional[str] = typer.Option(None, "--run-id", metavar="ID", help="Idempotent run id."),
    queue: Optional[str] = typer.Option(None, "--queue", "-q", metavar="NAME",
                                        help="Wait in this queue until its limits let a "
                                             "worker start it (lashflow queue create)."),
    key: Optional[str] = typer.Option(None, "--key", metavar="K",
                                      help="The run's key in its queue (per-key limits, "
                                           "fairness), e.g. a customer id."),
    priority: Optional[int] = typer.Option(None, "--priority", metavar="P",
                                           help="1 starts first (default: the queue's "
                                                "middle level)."),
    dedup_id: Optional[str] = typer.Option(None, "--dedup-id", metavar="ID",
                                           help="A second submission with this id in the "
                                                "queue gives back the first run."),
    debounce: Optional[str] = typer.Option(None, "--debounce", metavar="DURATION",
                                           help="Submissions of the key within this window "
                                                "(e.g. 30s) make one run, started when it "
                                                "closes."),
    debounce_keep: str = typer.Option("newest", "--debounce-keep", metavar="newest|oldest",
                                      help="Which submission's input the debounced run "
                                           "takes."),
    singleton: Optional[str] = typer.Option(None, "--singleton",
                                            metavar="skip|cancel-running",
                                            help="One run at a time per key: skip this one, "
                                                 "or cancel the key's run for it."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Enqueue a run without driving it: `lashflow worker` or `lashflow recover` picks it
    up (a run in a --queue: a worker, when the queue allows). The input is checked now
    (exit 2 if it does not fit)."""
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)
    text = source_or_none(file)

    async def go() -> int:
        data = parse_json_option(input, "--input")
        async with inv.engine(db, tools) as eng:
            record = await eng.create(*deployed(file, process), data, run_id, queue=queue,
                                      key=key, priority=priority, dedup_id=dedup_id,
                                      debounce=debounce, debounce_keep=debounce_keep,
                                      singleton=singleton)
            return finish(display, await eng.get(record.run_id))

    raise typer.Exit(run_async(inv, go, text, str(file), run_id))


def resume(
    ctx: typer.Context,
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
    raise typer.Exit(resume_command(Invocation.of(ctx, as_json), run_id, source,
                                    retry_interrupted, tools, db, max_wait, follow))


def retry(
    ctx: typer.Context,
    run_id: Optional[str] = typer.Argument(None, metavar="[RUN]",
                                           help="A failed, cancelled, needs_attention or "
                                                "paused run.", show_default=False),
    source: Optional[Path] = typer.Option(None, "--source", metavar="FILE",
                                          help="Retry under this edited .lash file; recorded "
                                               "steps must still match (else replay_mismatch)."),
    from_step: Optional[str] = typer.Option(None, "--from", metavar="STEP",
                                            help="Restart at this step instead (a step key, "
                                                 "or the row number `show` prints)."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Say which recorded steps would run again (with "
                                      "--where: count the runs); change nothing."),
    where: Optional[str] = WhereOption,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    max_wait: float = MaxWaitOption,
    follow: bool = FollowOption,
) -> None:
    """Run a stopped run again at the step that stopped it (its last step, or the members
    of its last fan-out that did not succeed; an `err` the process handled earlier is not
    it): the steps before replay, that step and every later one run again, a wait waits
    afresh; their old attempts stay in the journal (`show`). Exit codes as `run`. With
    --where, every stopped run selected is queued again for the workers (exit 0)."""
    inv = Invocation.of(ctx, as_json)
    one_or_where(inv, run_id, where)
    if where is not None:
        if source is not None or from_step is not None:
            fail("usage_error", "--source and --from retry one run; leave them out with "
                 "--where", as_json)
        raise typer.Exit(bulk_command(inv, db, "retry", where, dry_run=dry_run,
                                      tools=tuple(tools)))
    assert run_id is not None
    if dry_run:
        raise typer.Exit(run_async(inv, _retry_plan(inv, db, tools, run_id, from_step),
                                   run_id=run_id))
    go = driving(inv, db, tools, f"retry {run_id}", max_wait, follow, source,
                  lambda eng: eng.retry(run_id, source, from_step=from_step))
    raise typer.Exit(run_async(inv, go, source_or_none(source),
                               str(source) if source else None, run_id))


def _retry_plan(inv: Invocation, db: Optional[str], tools: list[str], run_id: str,
                from_step: Optional[str]) -> Callable[[], Awaitable[int]]:
    """``retry --dry-run``: the recorded steps a retry would run again, by show's rows."""
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, tools, create=False, absent=no_run(run_id)) as eng:
            again = await eng.retry_plan(run_id, from_step)
            rows = {view.step_key: number for number, view in
                    enumerate(await eng.steps(run_id), 1)}
        if inv.as_json:
            stdout(dumps({"run_id": run_id, "dry_run": True, "would_run_again": [
                {"row": rows.get(v.step_key), "step": v.step_key, "kind": v.kind,
                 "tool": v.tool} for v in again]}))
            return 0
        if not again:
            display.line(f"retry {run_id} would run no recorded step again: it replays its "
                         "journal and goes on from its end (--from STEP restarts earlier)")
            return 0
        display.line(f"retry {run_id} would run {len(again)} recorded step(s) again:")
        for view in again:
            display.line(f"  #{rows.get(view.step_key)}  {view.tool or view.kind}  "
                         f"({view.step_key})")
        return 0

    return go


def fork(
    ctx: typer.Context,
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
    inv = Invocation.of(ctx, as_json)

    async def act(eng: Any) -> Any:
        overrides: dict[str, Any] = {}
        for item in sets:
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise UsageError(f"--set {item!r}: expected STEP=JSON")
            overrides[key] = parse_json_option(value, f"--set {key}")
        return await eng.fork(run_id, from_step, set=overrides, run_id_of_fork=new_run_id)

    go = driving(inv, db, tools, f"fork {run_id}", max_wait, follow, None, act)
    raise typer.Exit(run_async(inv, go, run_id=run_id))


def recover(
    ctx: typer.Context,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue every run whose worker is gone (and every run whose timer is due).

    Exit 0; each run's status is in the output (JSON: {"recovered": [outcome, ...]}).
    """
    inv = Invocation.of(ctx, as_json)
    display = Display.of(inv)

    async def go() -> int:
        async with inv.engine(db, tools) as eng:
            with live_status(inv, "recover") as live:
                eng.listeners.append(live.on_event)
                outcomes = await eng.recover()
        if as_json:
            stdout(dumps({"recovered": [o.to_json() for o in outcomes]}))
            return 0
        for outcome in outcomes:
            render_outcome(display, outcome)
        display.line(f"recovered {len(outcomes)} run(s)")
        return 0

    raise typer.Exit(run_async(inv, go))


def worker(
    ctx: typer.Context,
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
    inv = Invocation.of(ctx, as_json)

    async def go() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # not the main thread (test runners)
                pass
        settled: dict[str, None] = {}  # run ids in the order their drives ended
        async with inv.engine(db, tools, concurrency=concurrency, lease_ttl=lease_ttl) as eng:
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

    raise typer.Exit(run_async(inv, go))
