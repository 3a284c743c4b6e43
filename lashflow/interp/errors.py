"""Errors a running Lashlang program can raise, each with the code a user sees.

Kept apart from the interpreter so builtins and operators can raise them without
importing the VM.
"""

from __future__ import annotations

from typing import Any

from lashflow.errors import LashflowError, position_of


class LashRuntimeError(LashflowError):
    """A runtime error: ``kind`` is ``TypeError``, ``ValueError``, ``UndefinedVariable``,
    ``NonListIteration`` (or ``UnknownBuiltin`` for unlinked programs).

    ``span`` is a ``(start, end)`` character range, filled by the VM with the failing
    instruction's source when the raiser did not know it; ``line``/``column`` are
    1-based and set once the VM knows the module source.
    """

    code = "runtime_error"

    def __init__(self, kind: str, message: str, span: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.span = span
        self.line: int | None = None
        self.column: int | None = None

    def locate(self, source: str | None, span: tuple[int, int] | None) -> "LashRuntimeError":
        """Attach a span (unless one is known) and its line/column in ``source``."""
        if self.span is None:
            self.span = span
        if source is not None and self.span is not None and self.line is None:
            pos = position_of(source, self.span[0])
            self.line, self.column = pos.line, pos.column
        return self


def type_error(message: str) -> LashRuntimeError:
    return LashRuntimeError("TypeError", message)


def value_error(message: str) -> LashRuntimeError:
    return LashRuntimeError("ValueError", message)


class ProcessFailed(LashflowError):
    """``fail v``: the run ends on the failure path; ``message`` is the text of ``v``
    (a string as-is, anything else its compact sorted JSON), ``value`` its JSON."""

    code = "process_failed"

    def __init__(self, message: str, value: Any = None,
                 span: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.value = value
        self.span = span  # where the ``fail`` statement is in the source
