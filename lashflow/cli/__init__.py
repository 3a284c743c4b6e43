"""``lashflow`` command line: typer over the public ``Engine`` API, presentation only.

Each command parses its arguments, calls the engine and hands the answer to ``render``
(rich on a terminal, plain lines otherwise, one JSON object with ``--json``). Every user
mistake ends as one line ``error[code]: message`` on stderr (plus a caret excerpt for
source errors) and exit code 2 (``exits``). What one invocation chose and learned travels
in an ``Invocation`` (``context``), never in module globals.

Modules: ``application`` (the typer app, in command order), ``run`` / ``operate`` /
``reads`` / ``tooling`` / ``serve`` / ``versions`` (commands by theme), ``options`` (shared options and
value readers), ``render`` and ``live`` (output), ``exits`` and ``usage`` (the error
contract), ``output`` (writing lines), ``context`` (the invocation).
"""

from __future__ import annotations

from .application import app, main

__all__ = ["app", "main"]
