"""``lashflow`` command line: typer + rich over the public Python API, no logic of its own.

Every user mistake ends as one line ``error[code]: message`` on stderr (plus a caret
excerpt for source errors) and exit code 2; ``--json`` prints exactly one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional, TypeVar

import typer

from .errors import InputInvalid, LashflowError, UsageError

T = TypeVar("T")

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="lashflow: durable workflows written in Lashlang.")

EXIT_BY_STATUS = {"finished": 0, "failed": 1, "waiting": 3, "cancelled": 4, "needs_attention": 5,
                  "queued": 0, "running": 0}

DbOption = typer.Option(None, "--db", envvar="LASHFLOW_DB",
                        help="sqlite:///file.db, a plain path, or postgresql://user@host:port/db")
JsonOption = typer.Option(False, "--json", help="Print exactly one JSON object.")
ToolsOption = typer.Option([], "--tools", help="Tool module name or .py path (repeatable).")


# --------------------------------------------------------------------------- plumbing


def _stdout(text: str) -> None:
    sys.stdout.write(text + "\n")


def _stderr(text: str) -> None:
    sys.stderr.write(text + "\n")


def _error_json(exc: LashflowError) -> dict[str, Any]:
    data: dict[str, Any] = {"code": exc.code, "message": exc.message}
    diagnostic = getattr(exc, "diagnostic", None)
    if diagnostic is not None:
        data["line"], data["column"] = diagnostic.line, diagnostic.column
    for key in ("kind", "line", "column"):
        if key in exc.details and exc.details[key] is not None:
            data[key] = exc.details[key]
    if "winner" in exc.details and exc.details["winner"] is not None:
        data["winner"] = exc.details["winner"]
    return data


def _reject(exc: LashflowError, as_json: bool, source: str | None = None,
            filename: str | None = None) -> "typer.Exit":
    """Report a refused command (nothing ran) and return the exit to raise."""
    if as_json:
        _stdout(json.dumps({"run_id": exc.details.get("run_id"), "status": "rejected",
                            "error": _error_json(exc)}))
    else:
        diagnostic = getattr(exc, "diagnostic", None)
        if diagnostic is not None and source is not None:
            _stderr(f"error[{exc.code}]: " + diagnostic.render(source, filename or "<input>"))
        else:
            _stderr(f"error[{exc.code}]: {exc.message}")
    return typer.Exit(2)


def _run_async(factory: Callable[[], Awaitable[T]], as_json: bool,
               source: str | None = None, filename: str | None = None) -> T:
    try:
        return asyncio.run(factory())  # type: ignore[arg-type]
    except LashflowError as exc:
        raise _reject(exc, as_json, source, filename) from None
    except KeyboardInterrupt:
        _stderr("interrupted: the journal keeps every committed step; `lashflow recover` continues")
        raise typer.Exit(130) from None


def _parse_json_option(text: str | None, option: str) -> Any:
    if text is None:
        return None
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputInvalid(f"{option}: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputInvalid(f"{option} is not valid JSON: {exc.msg} at line {exc.lineno} "
                           f"column {exc.colno}") from None


def _engine(db: str | None, tools: list[str] | None = None, **options: Any) -> Any:
    from .runtime.engine import Engine

    return Engine(db=db, modules=tools or (), **options)


def _print_outcome(outcome: Any, as_json: bool) -> int:
    from .tools import project_output

    data = outcome.to_json()
    if as_json:
        _stdout(json.dumps(data, ensure_ascii=False))
        return EXIT_BY_STATUS.get(data["status"], 0)
    for text in outcome.prints:
        _stdout(text)
    status = data["status"]
    _stderr(f"run {outcome.run_id} {status}")
    if status == "finished":
        _stdout(project_output(outcome.result) if not isinstance(outcome.result, str)
                else json.dumps(outcome.result, ensure_ascii=False))
    if outcome.error is not None:
        where = f" at line {outcome.error.line}, column {outcome.error.column}" \
            if outcome.error.line else ""
        kind = f" {outcome.error.kind}" if outcome.error.kind else ""
        _stderr(f"error[{outcome.error.code}]{kind}: {outcome.error.message}{where}")
    for wait in outcome.waiting:
        what = {"completion": f"completion key for {wait.tool}",
                "sleep": f"timer until {_when(wait.until)}",
                "signal": f"signal `{wait.signal}`",
                "child": f"child run {wait.child_run_id}"}.get(wait.kind, wait.kind)
        _stderr(f"  waiting on {what} (step {wait.step})")
        _stderr(f"    {wait.resolve}")
    return EXIT_BY_STATUS.get(status, 0)


def _when(moment: float | None) -> str:
    if moment is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))


async def _settle(engine: Any, outcome: Any, max_wait: float, follow: bool) -> Any:
    """Keep driving through short sleeps (and, with --follow, through any wait)."""
    while outcome.status.value == "waiting":
        sleeps = [w.until for w in outcome.waiting if w.kind == "sleep" and w.until is not None]
        others = [w for w in outcome.waiting if w.kind != "sleep"]
        now = engine.clock.now()
        if sleeps and not others and min(sleeps) - now <= max_wait:
            await asyncio.sleep(max(0.0, min(sleeps) - now))
            outcome = await engine.resume(outcome.run_id)
            continue
        if not follow:
            return outcome
        await asyncio.sleep(0.2)
        record = await engine.get_record(outcome.run_id)
        if record.status != "waiting" or _wait_ready(engine, record):
            outcome = await engine.resume(outcome.run_id)
        else:
            outcome = await engine.get(outcome.run_id)
    return outcome


def _wait_ready(engine: Any, record: Any) -> bool:
    now = engine.clock.now()
    return record.wake_at is not None and record.wake_at <= now


def _read_for_errors(file: Path) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- commands


@app.command()
def run(
    file: Path = typer.Argument(..., help="The .lash file to run."),
    process: Optional[str] = typer.Option(None, "--process", "-p", help="Process to run."),
    input: Optional[str] = typer.Option(None, "--input", "-i", help="Input JSON, or @file.json."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Idempotent run id."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    detach: bool = typer.Option(False, "--detach", help="Store the run as queued; do not drive it."),
    max_wait: float = typer.Option(30.0, "--max-wait", help="Drive through sleeps ending within this many seconds."),
    follow: bool = typer.Option(False, "--follow", help="Keep waiting until every wait is resolved."),
) -> None:
    """Start a run and drive it until it settles or parks."""
    source = _read_for_errors(file)

    async def go() -> int:
        data = _parse_json_option(input, "--input")
        async with _engine(db, tools) as engine:
            if detach:
                record = await engine.create(file, process, data, run_id)
                return _print_outcome(await engine.get(record.run_id), as_json)
            outcome = await engine.run(file, process, data, run_id)
            outcome = await _settle(engine, outcome, max_wait, follow)
            return _print_outcome(outcome, as_json)

    raise typer.Exit(_run_async(go, as_json, source, str(file)))


@app.command()
def submit(
    file: Path = typer.Argument(...),
    process: Optional[str] = typer.Option(None, "--process", "-p"),
    input: Optional[str] = typer.Option(None, "--input", "-i"),
    run_id: Optional[str] = typer.Option(None, "--run-id"),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Enqueue a run without driving it (a worker or `lashflow recover` picks it up)."""
    source = _read_for_errors(file)

    async def go() -> int:
        data = _parse_json_option(input, "--input")
        async with _engine(db, tools) as engine:
            record = await engine.create(file, process, data, run_id)
            return _print_outcome(await engine.get(record.run_id), as_json)

    raise typer.Exit(_run_async(go, as_json, source, str(file)))


@app.command()
def check(
    file: Path = typer.Argument(..., help="The .lash file to check."),
    tools: list[str] = ToolsOption,
    as_json: bool = JsonOption,
) -> None:
    """Parse and link a file against the tools it would run with; run nothing."""
    from .lang import check as check_source
    from .tools import ToolRegistry  # noqa: F401  (registry through the engine's runner)

    source = _read_for_errors(file)
    if source is None:
        raise _reject(UsageError(f"no such file: {file}", code="file_not_found"), as_json)

    async def catalog() -> Any:
        async with _engine(":memory:", tools) as engine:
            beside = file.with_suffix(".py")
            if beside.exists():
                engine.load_tools(str(beside))
            return engine.tool_runner.catalog()

    cat = _run_async(catalog, as_json)
    diagnostics = check_source(source, cat)
    if as_json:
        _stdout(json.dumps({"ok": not diagnostics, "diagnostics": [
            {"code": d.code, "message": d.message, "line": d.line, "column": d.column,
             "hint": d.hint} for d in diagnostics]}))
    else:
        for d in diagnostics:
            _stderr(f"error[{d.code}]: " + d.render(source, str(file)))
        if not diagnostics:
            _stderr(f"{file}: ok")
    raise typer.Exit(2 if diagnostics else 0)


@app.command()
def resume(
    run_id: str = typer.Argument(...),
    source: Optional[Path] = typer.Option(None, "--source", help="Continue under edited code."),
    retry_interrupted: bool = typer.Option(False, "--retry-interrupted",
                                           help="Run an interrupted non-idempotent attempt again."),
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
    max_wait: float = typer.Option(30.0, "--max-wait"),
    follow: bool = typer.Option(False, "--follow"),
) -> None:
    """Continue one run from its journal."""
    text = _read_for_errors(source) if source else None

    async def go() -> int:
        async with _engine(db, tools) as engine:
            outcome = await engine.resume(run_id, source, retry_interrupted=retry_interrupted)
            outcome = await _settle(engine, outcome, max_wait, follow)
            return _print_outcome(outcome, as_json)

    raise typer.Exit(_run_async(go, as_json, text, str(source) if source else None))


@app.command()
def recover(
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue every run whose worker is gone (and every due timer)."""

    async def go() -> int:
        async with _engine(db, tools) as engine:
            outcomes = await engine.recover()
        if as_json:
            _stdout(json.dumps({"recovered": [o.to_json() for o in outcomes]}))
        else:
            for o in outcomes:
                _stderr(f"run {o.run_id} {o.status.value}")
            _stderr(f"recovered {len(outcomes)} run(s)")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command()
def complete(
    key: str = typer.Argument(..., help="The completion key (lfk_...)."),
    result: Optional[str] = typer.Option(None, "--result", help="The tool's result as JSON."),
    error: Optional[str] = typer.Option(None, "--error", help="Resolve as an error with this message."),
    resume_run: bool = typer.Option(False, "--resume", help="Drive the run on after delivery."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Resolve a completion key: first writer wins."""
    from .tools import ToolResult

    async def go() -> int:
        if (result is None) == (error is None):
            raise UsageError("give exactly one of --result JSON or --error MESSAGE")
        value = ToolResult.err(error) if error is not None else ToolResult.ok(
            _parse_json_option(result, "--result"))
        async with _engine(db) as engine:
            status = await engine.complete(key, value, resume=resume_run)
            if resume_run:
                run_id = engine.tool_runner.last_delivered_run
                return _print_outcome(await engine.get(run_id), as_json)
        if as_json:
            _stdout(json.dumps({"status": status.value, "delivered": True}))
        else:
            _stderr(f"delivered; run is {status.value}")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command()
def signal(
    run_id: str = typer.Argument(...),
    name: str = typer.Argument(...),
    payload: Optional[str] = typer.Option(None, "--payload", help="Signal payload as JSON."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Deliver a signal to a run (and drive it on if it was waiting for it)."""

    async def go() -> int:
        data = _parse_json_option(payload, "--payload")
        async with _engine(db) as engine:
            status = await engine.signal(run_id, name, data)
        if as_json:
            _stdout(json.dumps({"run_id": run_id, "status": status.value}))
        else:
            _stderr(f"signal {name} delivered; run {run_id} is {status.value}")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command()
def cancel(
    run_id: str = typer.Argument(...),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Cancel a run: at once if parked, at its next effect if running."""

    async def go() -> int:
        async with _engine(db) as engine:
            status = await engine.cancel(run_id)
        if as_json:
            _stdout(json.dumps({"run_id": run_id, "status": status.value}))
        else:
            _stderr(f"run {run_id} {status.value}")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command("list")
def list_runs(
    status: Optional[str] = typer.Option(None, "--status", help="Only runs with this status."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """List runs."""

    async def go() -> int:
        async with _engine(db) as engine:
            outcomes = await engine.list(status)
        if as_json:
            _stdout(json.dumps({"runs": [o.to_json() for o in outcomes]}))
        else:
            for o in outcomes:
                _stdout(f"{o.run_id}  {o.status.value}")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command()
def show(
    run_id: str = typer.Argument(...),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A run's status and its journal, step by step."""

    async def go() -> int:
        async with _engine(db) as engine:
            outcome = await engine.get(run_id)
            steps = await engine.steps(run_id)
        if as_json:
            data = outcome.to_json()
            data["steps"] = [{"step": s.step_key, "kind": s.kind, "tool": s.tool,
                              "status": s.status, "attempts": len(s.attempts),
                              "preview": s.projected} for s in steps]
            _stdout(json.dumps(data, ensure_ascii=False))
            return 0
        _stdout(f"run {outcome.run_id}: {outcome.status.value}")
        for s in steps:
            preview = (s.projected or "").replace("\n", " ")
            if len(preview) > 80:
                preview = preview[:77] + "..."
            _stdout(f"  {s.step_key:<28} {s.kind:<11} {s.tool or '':<24} {s.status:<8} "
                    f"attempts={len(s.attempts)} {preview}")
        if outcome.error is not None:
            _stdout(f"  error[{outcome.error.code}]: {outcome.error.message}")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command()
def waiting(
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """What every parked run waits on, with the command that would resolve it."""

    async def go() -> int:
        async with _engine(db) as engine:
            waits = await engine.waiting()
        if as_json:
            _stdout(json.dumps({"waiting": [dict(w.to_json(), run_id=r) for r, w in waits]}))
        else:
            for run_id, w in waits:
                _stdout(f"{run_id}  {w.kind:<10} {w.step}  {w.resolve}")
        return 0

    raise typer.Exit(_run_async(go, as_json))


@app.command()
def output(
    run_id: str = typer.Argument(...),
    step: str = typer.Argument(...),
    db: Optional[str] = DbOption,
) -> None:
    """The full, unbudgeted output of one step."""

    async def go() -> int:
        async with _engine(db) as engine:
            for s in await engine.steps(run_id):
                if s.step_key == step:
                    value = s.outcome
                    if isinstance(value, dict) and "wrapper" in value:
                        value = value["wrapper"]
                    if isinstance(value, dict) and value.get("ok") is True:
                        value = value.get("value")
                    _stdout(value if isinstance(value, str) else json.dumps(value, indent=2,
                                                                            ensure_ascii=False))
                    return 0
        raise LashflowError(f"run {run_id} has no step {step}", code="unknown_step")

    raise typer.Exit(_run_async(go, False))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
