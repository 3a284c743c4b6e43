"""Diagnostics: the one shape every parse and link problem takes.

A diagnostic carries a stable ``code`` (``parse_error`` / ``link_error``), the exact message
of the original implementation, and a 1-based line/column counted in characters, so the
CLI, the engine and the tests all agree on where a problem is.
"""

from __future__ import annotations

from typing import Any

from lashflow.errors import LashflowError, position_of
from lashflow.lang.record import record

PARSE_ERROR = "parse_error"
LINK_ERROR = "link_error"


@record(frozen=True)
class Diagnostic:
    """One problem in a source file; ``offset``/``end`` are character offsets."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None
    offset: int | None = None
    hint: str | None = None
    end: int | None = None

    @classmethod
    def at(
        cls,
        code: str,
        message: str,
        source: str,
        offset: int | None,
        *,
        end: int | None = None,
        hint: str | None = None,
    ) -> "Diagnostic":
        """Build a diagnostic whose line/column are computed from ``offset``."""
        if offset is None:
            return cls(code, message, hint=hint)
        offset = max(0, min(offset, len(source)))
        pos = position_of(source, offset)
        return cls(code, message, pos.line, pos.column, offset, hint, end)

    def render(self, source: str = "", filename: str = "<source>") -> str:
        """The message, ``--> file:line:col``, the source line with a caret, and the hint.

        The CLI puts ``error[code]: `` in front of it."""
        out = [self.message]
        if self.line is not None and self.column is not None:
            out.append(f"--> {filename}:{self.line}:{self.column}")
            lines = source.split("\n")
            if 0 < self.line <= len(lines):
                text = lines[self.line - 1].rstrip("\r")
                out.append(f"  | {text}")
                width = 1
                if self.end is not None and self.offset is not None and self.end > self.offset:
                    width = max(1, min(self.end - self.offset, len(text) - self.column + 1))
                pad = "".join("\t" if ch == "\t" else " " for ch in text[: self.column - 1])
                out.append(f"  | {pad}^{'~' * (width - 1)}")
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape used by ``lashflow check --json`` and the API error payloads."""
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.line is not None:
            data["line"] = self.line
            data["column"] = self.column
        if self.hint:
            data["hint"] = self.hint
        return data

    def __str__(self) -> str:
        return self.message


class LangError(LashflowError):
    """A parse or link failure; ``diagnostic`` says what and where."""

    code = PARSE_ERROR

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(
            diagnostic.message,
            code=diagnostic.code,
            line=diagnostic.line,
            column=diagnostic.column,
        )
        self.diagnostic = diagnostic
        self.line = diagnostic.line
        self.column = diagnostic.column
        self.hint = diagnostic.hint


def parse_error(
    source: str, message: str, offset: int | None, *, end: int | None = None, hint: str | None = None
) -> LangError:
    return LangError(Diagnostic.at(PARSE_ERROR, message, source, offset, end=end, hint=hint))


def link_error(
    source: str, message: str, offset: int | None = None, *, end: int | None = None,
    hint: str | None = None,
) -> LangError:
    return LangError(Diagnostic.at(LINK_ERROR, message, source, offset, end=end, hint=hint))
