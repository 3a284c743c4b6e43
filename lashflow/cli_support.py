"""Plumbing shared by the ``lashflow`` commands: exits, one-line errors, option parsing.

The CLI's contract lives here so every command keeps it the same way: exit codes
by run status, ``error[code]: message`` on stderr (never a traceback), and with ``--json``
exactly one JSON object on stdout, errors included.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from shlex import quote
from typing import Any, AsyncIterator, Awaitable, Callable, NoReturn, Sequence, TypeVar
from urllib.parse import urlsplit, urlunsplit

import typer
from typer.core import TyperGroup

from .errors import LashflowError, NoDatabase, UsageError
from .json_input import read_json

T = TypeVar("T")

EXIT_BY_STATUS = {"finished": 0, "failed": 1, "waiting": 3, "cancelled": 4, "needs_attention": 5,
                  "queued": 0, "running": 0}
EXIT_REJECTED = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in lashflow, not a mistake of the user
EXIT_INTERRUPTED = 130


_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
            if chr(code) not in "\n\t"}


def printable(text: str) -> str:
    """``text`` with control characters (ESC, CR, BEL...) shown as ``\\xNN``: a run id,
    signal name or print text from a workflow can never move the cursor, recolour or
    rewrite what a terminal shows (newlines and tabs stay)."""
    return text.translate(_CONTROL)


def stdout(text: str = "", *, raw: bool = False) -> None:
    """Write one line to the *current* stdout (test runners swap it per invocation);
    ``raw`` only for what the user asked for byte-exact (``lashflow output``)."""
    sys.stdout.write((text if raw else printable(text)) + "\n")


def stderr(text: str = "") -> None:
    sys.stderr.write(printable(text) + "\n")


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


# --------------------------------------------------------------------------- errors


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
           filename: str | None = None, run_id: str | None = None) -> "typer.Exit":
    """Report a refused command (nothing ran) and return the exit to raise."""
    if as_json:
        stdout(dumps({"run_id": exc.details.get("run_id", run_id), "status": "rejected",
                      "error": error_json(exc)}))
    else:
        stderr(error_text(exc, source, filename))
    return typer.Exit(EXIT_REJECTED)


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


def run_async(factory: Callable[[], Awaitable[T]], as_json: bool, source: str | None = None,
              filename: str | None = None, run_id: str | None = None) -> T:
    """Run one command's coroutine; every failure becomes a one-line error and an exit.
    With ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` set, spans and metrics are
    exported (lashflow.telemetry.setup) and flushed before the command exits."""
    flush: Callable[[], None] | None = None
    try:
        if "OTEL_TRACES_EXPORTER" in os.environ or "OTEL_METRICS_EXPORTER" in os.environ:
            from .telemetry.setup import configure_from_environment

            flush = configure_from_environment()
        return asyncio.run(factory())  # type: ignore[arg-type]
    except LashflowError as exc:
        raise reject(exc, as_json, source, filename, run_id) from None
    except BrokenPipeError:  # `lashflow list | head -1`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(0) from None
    except KeyboardInterrupt:
        known = run_id or (CURRENT_RUN[0] if CURRENT_RUN else None)
        target = quote(known) if known else "RUN"
        stderr("interrupted: every committed step is kept in the journal; "
               f"`lashflow resume {target}` or `lashflow recover` continues")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except typer.Exit:
        raise
    except Exception as exc:  # a bug: still one line, the traceback only on request
        if os.environ.get("LASHFLOW_DEBUG"):
            raise
        internal = LashflowError(f"{type(exc).__name__}: {exc} (set LASHFLOW_DEBUG=1 for the "
                                 "traceback)", code="internal_error")
        reject(internal, as_json, run_id=run_id)
        raise typer.Exit(EXIT_INTERNAL) from None
    finally:
        if flush is not None:
            flush()


# --------------------------------------------------------------------------- options


def parse_json_option(text: str | None, option: str) -> Any:
    """``--input``/``--result``/``--payload``: inline JSON or ``@file.json``."""
    if text is None:
        return None
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"{option} @{path}: no such file", code="file_not_found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{option} @{path}: cannot read it: {exc}",
                             code="file_not_found") from None
    return read_json(text, option)


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str, option: str) -> float:
    """An age such as ``90s``, ``30m``, ``2h``, ``7d``, ``1w``, in seconds."""
    raw = text.strip()
    unit = raw[-1:].lower()
    if unit in _AGE_UNITS and raw[:-1].replace(".", "", 1).isdigit():
        return float(raw[:-1]) * _AGE_UNITS[unit]
    raise UsageError(f"{option} {text!r} is not an age: use 90s, 30m, 2h, 7d or 1w")


def parse_when(text: str | None, option: str, now: float) -> float | None:
    """``--since``/``--until``: an ISO 8601 time (no offset: local time) or an age such as
    ``90s``, ``30m``, ``2h``, ``7d``, ``1w`` (that long before ``now``)."""
    if text is None:
        return None
    raw = text.strip()
    if raw[-1:].lower() in _AGE_UNITS and raw[:-1].replace(".", "", 1).isdigit():
        return now - parse_age(raw, option)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise UsageError(f"{option} {text!r} is neither an ISO 8601 time "
                         "(2026-12-03T10:00:00+01:00) nor an age (30m, 2h, 7d)") from None
    return moment.timestamp()


def read_source(file: Path) -> str:
    """A ``.lash`` file's text, or a one-line ``file_not_found``/``usage_error``/
    ``limit_exceeded`` (over the source size limit)."""
    from .durable.programs import read_source_file

    return read_source_file(file)


def source_or_none(file: Path | None) -> str | None:
    """The text for caret excerpts, if the file is readable (errors are reported later)."""
    if file is None:
        return None
    try:
        return read_source(file)
    except LashflowError:
        return None


@asynccontextmanager
async def engine(db: str | None, tools: Sequence[str] = (), *,
                 absent: Callable[[NoDatabase], LashflowError] | None = None,
                 **options: Any) -> AsyncIterator[Any]:
    """An open ``Engine`` over the public API (imported late: ``--help`` stays fast).
    Commands that only read, or act on runs that must exist, pass ``create=False``;
    ``absent`` turns "no database here" into the error the command would give anyway
    (an unknown run, an unknown key), which then names where lashflow looked."""
    from .durable.engine import Engine

    DB_OPTION[:] = [db_option(db)]
    try:
        async with Engine(db=db, modules=list(tools), **options) as eng:
            eng.listeners.append(_note_run)
            yield eng
    except NoDatabase as missing:
        if absent is None:
            raise
        raise absent(missing) from None


def no_run(run_id: str | None) -> Callable[[NoDatabase], LashflowError]:
    """``absent`` for a command about one run."""
    from .errors import UnknownRun

    return lambda missing: UnknownRun(f"no run with id {run_id!r} ({missing})")


def no_key(missing: NoDatabase) -> LashflowError:
    """``absent`` for ``complete``: the key cannot exist where no database does."""
    return LashflowError(f"unknown completion key ({missing})", code="unknown_completion_key")


DB_OPTION: list[str] = [""]
"""`` --db URL`` for printed commands when the database is not the default one (a
command pasted into another shell must reach the same database)."""

CURRENT_RUN: list[str] = []
"""The first run this command drove: what the Ctrl-C hint names."""


def _note_run(event: dict[str, Any]) -> None:
    if not CURRENT_RUN and event.get("run_id"):
        CURRENT_RUN.append(event["run_id"])


def db_option(db: str | None) -> str:
    from .store import DEFAULT_DB, resolve_db_url

    url = resolve_db_url(db)
    if url == DEFAULT_DB:
        return ""
    parts = urlsplit(url)
    if parts.password:  # never print a password: the reader fills it in
        url = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@",
                                                                    ":PASSWORD@")))
    return f" --db {quote(url)}"


# --------------------------------------------------------------------------- usage errors


class LashflowGroup(TyperGroup):
    """Click/typer usage errors (unknown option, missing argument ...) become the same
    one-line ``error[usage_error]: ...`` as every other mistake, exit 2; never a box."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(args=argv, prog_name=prog_name or "lashflow",
                                complete_var=complete_var, standalone_mode=False, **extra)
        except Exception as exc:
            code = self._usage(exc, argv)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    @staticmethod
    def _usage(exc: Exception, argv: list[str]) -> int:
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            if os.environ.get("LASHFLOW_DEBUG"):
                raise exc
            stderr(f"error[internal_error]: {type(exc).__name__}: {exc} "
                   "(set LASHFLOW_DEBUG=1 for the traceback)")
            return EXIT_INTERNAL
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            stdout(ctx.get_help())
            return 0
        message = exc.format_message()
        hint = None
        if ctx is not None and ctx.command_path:
            hint = f"see `{ctx.command_path.replace(ctx.find_root().info_name or '', 'lashflow', 1)} --help`"
        if "--db" in argv and ctx is not None and ctx.parent is None and "No such option" in message:
            hint = "--db goes after the command: `lashflow list --db URL`"
        error = UsageError(message, hint=hint)
        if "--json" in argv:
            stdout(dumps({"run_id": None, "status": "rejected", "error": error_json(error)}))
        else:
            stderr(error_text(error))
        return EXIT_REJECTED if exc.exit_code in (1, 2) else int(exc.exit_code)


def nothing_yet(display: Any, missing: Exception, empty: dict[str, Any]) -> int:
    """A listing where no database exists yet: empty, saying where lashflow looked."""
    if display.as_json:
        stdout(dumps(dict(empty, note=str(missing))))
    else:
        display.line(f"nothing yet: {missing}")
    return 0
