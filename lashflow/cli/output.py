"""Writing lines: to the *current* stdout/stderr (test runners swap them per invocation),
with control characters shown, never obeyed."""

from __future__ import annotations

import os
import sys
from typing import Any
from ..json_text import line

_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
            if chr(code) not in "\n\t"}


def printable(text: str) -> str:
    """``text`` with control characters (ESC, CR, BEL...) shown as ``\\xNN``: a run id,
    signal name or print text from a workflow can never move the cursor, recolour or
    rewrite what a terminal shows (newlines and tabs stay)."""
    return text.translate(_CONTROL)


def stdout(text: str = "", *, raw: bool = False) -> None:
    """One line on stdout; ``raw`` only for what the user asked for byte-exact
    (``lashflow output``)."""
    sys.stdout.write((text if raw else printable(text)) + "\n")


def stderr(text: str = "") -> None:
    sys.stderr.write(printable(text) + "\n")


dumps = line  # the CLI's --json object (lashflow.json_text)


def is_terminal(stream: Any) -> bool:
    """A real terminal (or ``TTY_COMPATIBLE=1``, rich's own override, used by tests)."""
    forced = os.environ.get("TTY_COMPATIBLE", "")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
