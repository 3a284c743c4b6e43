"""Generate docs/cli.md from the typer app, so the CLI reference cannot drift from the code.

    python scripts/gen_cli_docs.py          # rewrite docs/cli.md
    python scripts/gen_cli_docs.py --check  # exit 1 if docs/cli.md is not current

``tests/cli/test_cli_docs.py`` runs the check.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli.md"

INTRO = """\
# CLI reference

Generated from the typer app by `scripts/gen_cli_docs.py`; do not edit by hand
(`tests/cli/test_cli_docs.py` fails when this file is stale).

Conventions shared by every command:

- **Exit codes** of `run`, `resume` and `complete --resume`: `0` finished, `1` failed,
  `2` rejected (nothing ran: a usage, parse, link, input, lookup or database error),
  `3` waiting, `4` cancelled, `5` needs attention, `6` paused. Other commands exit `0` or `2`.
  `70` is a bug in lashflow (`error[internal_error]`), `130` an interrupt (Ctrl-C).
- **Errors** are one line on stderr, `error[code]: message`, plus the source line and a
  caret for parse and link errors. Never a traceback (`LASHFLOW_DEBUG=1` shows one for
  internal errors).
- **`--json`** prints exactly one JSON object on stdout, errors included:
  `{"run_id", "status", "result"?, "error"?, "waiting"?, "prints"?}` where `status` is a
  run status or `"rejected"`, `error` is `{"code", "message", "kind"?, "line"?,
  "column"?}` and each `waiting` entry is `{"kind", "step", "tool"?, "key"?, "until"?,
  "signal"?, "child_run_id"?, "resolve"}` (`resolve` is the command that resolves it).
  `list` prints `{"runs": [...]}`, `waiting` `{"waiting": [...]}`, `recover` and
  `worker --once` `{"recovered": [...]}`, `show` the outcome plus `steps`.
- **`--db URL`** (or `$LASHFLOW_DB`): `sqlite:///relative.db`, `sqlite:////abs/path.db`,
  a plain file path, or `postgresql://user@host:port/db`. Default:
  `.lashflow/lashflow.db` under the current directory.
- **Output**: rich tables and a live status on a terminal, plain lines when piped.
- **Read-only commands** (`list`, `waiting`, `show`, `output`, `graph --run`) and those
  that act on an existing run or key (`complete`, `signal`, `cancel`) never create a
  database: where there is none they say where they looked (`list` and `waiting`:
  "nothing yet", exit 0; the others: `unknown_run` / `unknown_completion_key`, exit 2).
  On PostgreSQL they do not create the tables either.
- **Times** are ISO 8601 with the offset of the local time zone; `lashflow --utc COMMAND`
  (or `LASHFLOW_UTC=1`) prints them in UTC.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _param_row(param: Any, ctx: Any) -> tuple[str, str]:
    help_text = getattr(param, "help", None) or ""
    if param.param_type_name == "argument":
        name = f"`{param.metavar or param.name.upper()}`"
        return name, help_text + (" (required)" if param.required else "")
    record = param.get_help_record(ctx)
    names = record[0] if record else ", ".join(param.opts)
    extra = []
    if not param.is_flag and param.default not in (None, (), []) and param.show_default is not False:
        extra.append(f"default: `{param.default}`")
    if param.envvar:
        extra.append(f"env: `${param.envvar}`")
    if extra:
        help_text += f" ({'; '.join(extra)})"
    return f"`{names}`", help_text


def render() -> str:
    """The whole reference as Markdown."""
    import typer

    from lashflow.cli import app

    group = typer.main.get_command(app)
    root = group.make_context("lashflow", [], resilient_parsing=True)
    out = [INTRO]
    out.append("| command | does |\n|---|---|")
    names = group.list_commands(root)
    for name in names:
        command = group.get_command(root, name)
        first = (command.help or "").strip().split("\n\n")[0]
        out.append(f"| [`lashflow {name}`](#lashflow-{name}) | {_cell(first)} |")
    out.append("")
    for name in names:
        _command(out, group.get_command(root, name), name, root)
    return "\n".join(out).rstrip() + "\n"


def _command(out: list[str], command: Any, name: str, parent: Any) -> None:
    """One command's section; a group (``schedule``) lists its subcommands, then each."""
    ctx = command.make_context(name.split()[-1], [], parent=parent, resilient_parsing=True)
    subcommands = command.list_commands(ctx) if hasattr(command, "list_commands") else []
    arguments = " ".join(p.metavar or p.name.upper() for p in command.params
                         if p.param_type_name == "argument")
    usage = "COMMAND [ARGS]..." if subcommands else "[OPTIONS]"
    out.append(f"## `lashflow {name}`\n")
    out.append(f"```\nlashflow {name} {usage}{' ' + arguments if arguments else ''}\n```\n")
    out.append((command.help or "").strip() + "\n")
    if subcommands:
        out.append("| command | does |\n|---|---|")
        for sub in subcommands:
            first = (command.get_command(ctx, sub).help or "").strip().split("\n\n")[0]
            anchor = f"lashflow-{name}-{sub}".replace(" ", "-")
            out.append(f"| [`lashflow {name} {sub}`](#{anchor}) | {_cell(first)} |")
        out.append("")
        for sub in subcommands:
            _command(out, command.get_command(ctx, sub), f"{name} {sub}", ctx)
        return
    rows = [_param_row(p, ctx) for p in command.get_params(ctx) if p.name != "help"]
    out.append("| argument / option | meaning |\n|---|---|")
    out.extend(f"| {_cell(n)} | {_cell(h)} |" for n, h in rows)
    out.append("")


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    text = render()
    if "--check" in argv:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            print(f"{DOC.relative_to(ROOT)} is stale: run python scripts/gen_cli_docs.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
