"""The CLI's contract, kept the same way by every command: exit codes by run status,
``error[code]: message`` on stderr (never a traceback), and with ``--json`` exactly one
JSON object on stdout, errors included."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from shlex import quote
from typing import TYPE_CHECKING, Any, Awaitable, Callable, NoReturn, TypeVar

from ..errors import LashflowError
from ..states import RunStatus
from .context import Invocation
from .output import dumps, stderr, stdout

if TYPE_CHECKING:  # imported where an exit is raised: `resume`'s lean entry never needs it
    import typer

T = TypeVar("T")

EXIT_BY_STATUS: dict[str, int] = {
    RunStatus.FINISHED: 0, RunStatus.FAILED: 1, RunStatus.WAITING: 3, RunStatus.CANCELLED: 4,
    RunStatus.NEEDS_ATTENTION: 5, RunStatus.PAUSED: 6, RunStatus.QUEUED: 0, RunStatus.RUNNING: 0}
EXIT_REJECTED = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in lashflow, not a mistake of the user
EXIT_INTERRUPTED = 130


def error_json(exc: LashflowError) -> dict[str, Any]:
    """The ``error`` object every command prints: code, message and, when known, kind/line/column."""
    data: dict[str, Any] = {"code": exc.code, "message": exc.message}
    diagnostic = getattr(exc, "diagnostic", None)
    if diagnostic is not None and diagnostic.line is not None:
        data["line"], data["column"] = diagnostic.line, diagnostic.column
    for key in ("kind", "line", "column", "path"):
        if exc.details.get(key) is not None:
            data[key] = exc.details[key]
    winner = exc.details.get("winner", getattr(exc, "winner", None))
    if winner is not None:
        data["winner"] = winner.to_json() if hasattr(winner, "to_json") else winner
    hint = getattr(exc, "hint", None) or exc.details.get("hint")
    if hint:
        data["hint"] = hint
    return data


def error_text(exc: LashflowError, source: str | None = None, filename: str | None = None) -> str:
    """``error[code]: message``, plus the caret excerpt when the error has a source place."""
    diagnostic = getattr(exc, "diagnostic", None)
    if diagnostic is not None and source is not None:
        return caret_text(diagnostic, source, filename)
    text = f"error[{exc.code}]: {' '.join(exc.message.splitlines())}"
    hint = exc.details.get("hint")
    return f"{text} ({hint})" if hint else text


def caret_text(diagnostic: Any, source: str, filename: str | None) -> str:
    """``error[code]: message`` then ``--> file:line:col``, the line and a caret."""
    text = diagnostic.render(source, filename or "<input>")
    return text if text.startswith("error[") else f"error[{diagnostic.code}]: {text}"


def reject(exc: LashflowError, as_json: bool, source: str | None = None,
           filename: str | None = None, run_id: str | None = None) -> "typer.Exit | LeanExit":
    """Report a refused command (nothing ran) and return the exit to raise."""
    if as_json:
        stdout(dumps({"run_id": exc.details.get("run_id", run_id), "status": "rejected",
                      "error": error_json(exc)}))
    else:
        stderr(error_text(exc, source, filename))
    return exit_with(EXIT_REJECTED)


class LeanExit(Exception):
    """A command's exit where typer does not run the command (`resume`'s lean entry)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def exit_with(code: int) -> "typer.Exit | LeanExit":
    """The exit to raise from a command: typer's under the typer application, else
    (the lean entry, which never imports typer) a ``LeanExit`` it reads the code from."""
    typer = sys.modules.get("typer")
    return LeanExit(code) if typer is None else typer.Exit(code)


def is_exit(exc: BaseException) -> bool:
    """Whether ``exc`` is a command's exit rather than a failure."""
    typer = sys.modules.get("typer")
    return isinstance(exc, LeanExit) or (typer is not None and isinstance(exc, typer.Exit))


def internal_error(exc: Exception) -> int:
    """A bug escaped a command: one line and ``EXIT_INTERNAL`` (the traceback with
    ``LASHFLOW_DEBUG``)."""
    if os.environ.get("LASHFLOW_DEBUG"):
        raise exc
    stderr(f"error[internal_error]: {type(exc).__name__}: {exc} "
           "(set LASHFLOW_DEBUG=1 for the traceback)")
    return EXIT_INTERNAL


def fail(code: str, message: str, as_json: bool, **details: Any) -> NoReturn:
    """Refuse at once with a CLI-level error (bad arguments the engine never sees)."""
    raise reject(LashflowError(message, code=code, **details), as_json)


def freeze_startup_heap() -> None:
    """For a long-lived process (worker, serve), once it is up: what start-up made and
    keeps for good (imported modules, tool modules, the app) moves out of the garbage
    collector's reach, so a full collection no longer walks it. In a server that full
    walk is a pause of tens of milliseconds at unpredictable moments, in the middle of
    a fan-out's calls or a webhook's answer (docs/performance.md)."""
    gc.collect()
    gc.freeze()


def run_async(inv: Invocation, factory: Callable[[], Awaitable[T]], source: str | None = None,
              filename: str | None = None, run_id: str | None = None) -> T:
    """Run one command's coroutine; every failure becomes a one-line error and an exit.
    With ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` set, spans and metrics are
    exported (lashflow.telemetry.setup) and flushed before the command exits."""
    flush: Callable[[], None] | None = None
    try:
        if "OTEL_TRACES_EXPORTER" in os.environ or "OTEL_METRICS_EXPORTER" in os.environ:
            from ..telemetry.setup import configure_from_environment

            flush = configure_from_environment()
        return asyncio.run(factory())  # type: ignore[arg-type]  # an Awaitable, run wants a Coroutine
    except LashflowError as exc:
        raise reject(exc, inv.as_json, source, filename, run_id) from None
    except BrokenPipeError:  # `lashflow list | head -1`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise exit_with(0) from None
    except KeyboardInterrupt:
        known = run_id or inv.first_run
        target = quote(known) if known else "RUN"
        stderr("interrupted: every committed step is kept in the journal; "
               f"`lashflow resume {target}` or `lashflow recover` continues")
        raise exit_with(EXIT_INTERRUPTED) from None
    except Exception as exc:  # a bug: still one line, the traceback only on request
        if is_exit(exc) or os.environ.get("LASHFLOW_DEBUG"):
            raise
        internal = LashflowError(f"{type(exc).__name__}: {exc} (set LASHFLOW_DEBUG=1 for the "
                                 "traceback)", code="internal_error")
        reject(internal, inv.as_json, run_id=run_id)
        raise exit_with(EXIT_INTERNAL) from None
    finally:
        if flush is not None:
            flush()
