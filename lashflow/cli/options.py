"""Options several commands share, and the readers of option values (JSON, ages, times,
source files) that refuse a bad value with one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import typer

from ..durable.selection import parse_age, parse_when  # noqa: F401 (the CLI's names)
from ..errors import LashflowError, NoDatabase, UsageError
from ..json_input import read_json
from .exits import fail
from .sources import read_source, source_or_none  # noqa: F401 (the CLI's names)

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
MaxWaitOption = typer.Option(30.0, "--max-wait", metavar="SECONDS",
                             help="Keep driving through sleeps that end within this many seconds.")
FollowOption = typer.Option(False, "--follow", "-f",
                            help="Keep driving through every wait until it is resolved from "
                                 "elsewhere (signal, complete, another worker).")
RunIdArgument = typer.Argument(..., metavar="RUN", help="The run.", show_default=False)
FileOrProcessArgument = typer.Argument(..., metavar="FILE|PROCESS",
                                       help="The .lash file to run, or the name of a deployed "
                                            "process (its latest version).", show_default=False)


def run_log(fmt: str, write: Any) -> Any:
    """The listener that writes one line per run transition (see RunLog)."""
    from ..telemetry.runlog import RunLog

    return RunLog(write, fmt)


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


def ResultOption(help: str) -> Any:  # noqa: N802 (reads as the other options do)
    return typer.Option(None, "--result", metavar="JSON|@FILE", help=help)


def ErrorOption(help: str) -> Any:  # noqa: N802
    return typer.Option(None, "--error", metavar="MESSAGE", help=help)


def result_of(result: str | None, error: str | None) -> Any:
    """``--result JSON`` read, for a command that takes it or ``--error MESSAGE``, exactly
    one of them (else ``usage_error``); None when it was ``--error``."""
    if (result is None) == (error is None):
        raise UsageError("give exactly one of --result JSON or --error MESSAGE")
    return parse_json_option(result, "--result")


def deployed(file: Path, process: str | None) -> tuple[Path | None, str | None]:
    """``(file, process)`` for the engine: a bare name that is no file (``fulfill``) is
    a deployed process, started on its latest version."""
    name = str(file)
    if not file.exists() and file.suffix != ".lash" and "/" not in name and process is None:
        return None, name
    return file, process


def no_run(run_id: str | None) -> Callable[[NoDatabase], LashflowError]:
    """``absent`` for a command about one run."""
    from ..errors import UnknownRun

    return lambda missing: UnknownRun(f"no run with id {run_id!r} ({missing})")


def no_key(missing: NoDatabase) -> LashflowError:
    """``absent`` for ``complete``: the key cannot exist where no database does."""
    from ..tools.completion import UnknownCompletionKey

    return UnknownCompletionKey(f"unknown completion key ({missing})")
