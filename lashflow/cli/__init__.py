"""``lashflow`` command line: typer over the public ``Engine`` API, presentation only.

Each command parses its arguments, calls the engine and hands the answer to ``render``
(rich on a terminal, plain lines otherwise, one JSON object with ``--json``). Every user
mistake ends as one line ``error[code]: message`` on stderr (plus a caret excerpt for
source errors) and exit code 2 (``exits``). What one invocation chose and learned travels
in an ``Invocation`` (``context``), never in module globals.

Modules: ``application`` (the typer app, in command order), ``run`` / ``operate`` /
``reads`` / ``tooling`` / ``serve`` / ``versions`` (commands by theme), ``options`` (shared options and
value readers), ``render`` and ``live`` (output), ``exits`` and ``usage`` (the error
contract), ``output`` (writing lines), ``context`` (the invocation), ``lean`` (`resume`
without building the typer application: the path after a crash).
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    """Console-script entry point (``lashflow`` and ``python -m lashflow``)."""
    from .lean import lean_main

    code = lean_main(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .application import main as full

    full()


def __getattr__(name: str) -> Any:
    """``app`` is built on first use: `resume`'s lean path never builds it."""
    if name == "app":
        from .application import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]
