"""Click/typer usage errors (unknown option, missing argument ...) become the same one-line
``error[usage_error]: ...`` as every other mistake, exit 2; never a box."""

from __future__ import annotations

import sys
from typing import Any, Sequence

from typer.core import TyperGroup

from ..errors import UsageError
from .exits import EXIT_REJECTED, error_json, error_text, internal_error
from .output import dumps, stderr, stdout


class LashflowGroup(TyperGroup):
    """The root command group: typer's, with usage errors reported the lashflow way."""

    # click declares main with overloads; this one keeps both call forms
    def main(self, args: Sequence[str] | None = None,  # type: ignore[override]
             prog_name: str | None = None,
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
            return internal_error(exc)
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
