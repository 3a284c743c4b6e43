"""`lashflow resume` without the typer application.

After a crash, the time to a resumed run's next step is mostly start-up; building the
typer application imports typer and click and every command module (about a fifth of
what `resume` executes before its first step). The common form of `resume` (a run id
and the options below) is read here and handed to the same code the typer command
calls (``driving.resume_command``). Anything else (`--help`, an unknown or misspelt
option, a value that does not parse, a root option such as `--utc`) returns None and
the full application reads the command line, so its errors and help stay its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

FLAGS = {"--json": "as_json", "--retry-interrupted": "retry_interrupted", "--follow": "follow",
         "-f": "follow"}
VALUED = {"--db": "db", "--tools": "tools", "-t": "tools", "--max-wait": "max_wait",
          "--source": "source"}


def read_resume(argv: Sequence[str]) -> dict[str, object] | None:
    """``resume``'s arguments as its typer command would receive them, or None when the
    command line is not a plain ``resume`` (the typer application then reads it)."""
    if not argv or argv[0] != "resume":
        return None
    options: dict[str, object] = {"as_json": False, "retry_interrupted": False,
                                  "follow": False, "db": None, "tools": [],
                                  "max_wait": 30.0, "source": None}
    run_ids: list[str] = []
    rest = list(argv[1:])
    while rest:
        token = rest.pop(0)
        if token in FLAGS:
            options[FLAGS[token]] = True
            continue
        name, eq, value = token.partition("=")
        if name in VALUED and not (eq and not name.startswith("--")):  # "-t=x": typer's
            if not eq:
                if not rest or rest[0].startswith("-"):
                    return None
                value = rest.pop(0)
            if not _take(options, VALUED[name], value):
                return None
            continue
        if token.startswith("-") or not token:
            return None  # --help, --, an unknown option: typer's to answer
        run_ids.append(token)
    if len(run_ids) != 1:
        return None
    if options["db"] is None:  # as typer's envvar: an empty variable counts as unset
        options["db"] = os.environ.get("LASHFLOW_DB") or None
    options["run_id"] = run_ids[0]
    return options


def _take(options: dict[str, object], key: str, value: str) -> bool:
    if key == "tools":
        tools = options["tools"]
        assert isinstance(tools, list)
        tools.append(value)
    elif key == "max_wait":
        try:
            options[key] = float(value)
        except ValueError:
            return False
    elif key == "source":
        options[key] = Path(value)
    else:
        options[key] = value
    return True


def lean_main(argv: Sequence[str]) -> int | None:
    """Run ``argv`` if it is a plain ``resume``; its exit code, or None if it is not."""
    read = read_resume(argv)
    if read is None:
        return None
    from .context import Invocation
    from .driving import resume_command
    from .exits import internal_error, is_exit

    try:
        # the options were read into one dict of mixed values (each key's type is set by
        # read_resume, which mypy cannot see through a dict): the ignores below are that
        return resume_command(Invocation(as_json=bool(read["as_json"])), str(read["run_id"]),
                              read["source"],  # type: ignore[arg-type]
                              bool(read["retry_interrupted"]), read["tools"],  # type: ignore[arg-type]
                              read["db"], float(read["max_wait"]),  # type: ignore[arg-type]
                              bool(read["follow"]))
    except Exception as exc:
        if is_exit(exc):  # the exit an error makes (typer's, imported for it)
            # is_exit checked the class by name, so mypy sees only Exception here
            return int(exc.exit_code)  # type: ignore[attr-defined]
        return internal_error(exc)


__all__ = ["lean_main", "read_resume"]
