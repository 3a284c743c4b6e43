"""The tool-output budget: what a person or model is shown of a big output.

The journal always keeps the full value; this only shapes the *projected* text. Lines
follow Rust's ``str::lines`` (the original's rule), sizes are UTF-8 bytes (or
``ceil(bytes / 4)`` tokens), and every cut lands on a character boundary.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from shlex import quote
from typing import Any

from lashflow.json_text import compact_any as compact, line as json_line

from ..slotted import Frozen

__all__ = [
    "DEFAULT_HINT", "ToolOutputBudgetConfig", "ToolOutputBudgetMode", "budget_text", "hint_for",
    "project_output", "rust_lines",
]

DEFAULT_HINT = "The output was truncated; read it in full with `lashflow output RUN STEP`."


def hint_for(run_id: str, step_key: str) -> str:
    """The hint with the real run and step filled in (what the dispatcher uses)."""
    return f"The output was truncated; read it in full with `lashflow output {quote(run_id)} {quote(step_key)}`."


class ToolOutputBudgetMode(str, enum.Enum):
    BYTES = "bytes"
    TOKENS = "tokens"  # approximate tokens: ceil(utf8 bytes / 4)


class ToolOutputBudgetConfig(Frozen):
    """Size cap ``limit`` (bytes, or tokens in TOKENS mode) and line cap ``max_lines``."""

    __slots__ = ("limit", "max_lines", "mode")
    limit: int
    max_lines: int
    mode: ToolOutputBudgetMode

    def __init__(
            self,
            limit: int = 16 * 1024,
            max_lines: int = 400,
            mode: ToolOutputBudgetMode = ToolOutputBudgetMode.BYTES,
    ) -> None:
        setter = object.__setattr__
        setter(self, "limit", limit)
        setter(self, "max_lines", max_lines)
        setter(self, "mode", mode)
        if self.limit < 0 or self.max_lines < 0:
            raise ValueError("budget limits cannot be negative")

    @property
    def byte_window(self) -> int:
        return self.limit * 4 if self.mode is ToolOutputBudgetMode.TOKENS else self.limit

    @property
    def unit(self) -> str:
        return self.mode.value

    def size(self, nbytes: int) -> int:
        """``nbytes`` in this budget's unit (tokens round up)."""
        return -(-nbytes // 4) if self.mode is ToolOutputBudgetMode.TOKENS else nbytes


_DEFAULT = ToolOutputBudgetConfig()


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(_utf8(text))


def _line_count(text: str) -> int:
    if not text:
        return 0
    newlines = text.count("\n")
    return newlines if text.endswith("\n") else newlines + 1


def _head_lines(text: str) -> Iterator[str]:
    """Rust ``str::lines``: split on LF, strip one CR before each LF, no empty last line."""
    start, end_of_text = 0, len(text)
    while start < end_of_text:
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        line = text[start:end]
        yield line[:-1] if line.endswith("\r") else line
        start = end + 1


def _tail_lines(text: str) -> Iterator[str]:
    """The same lines as ``_head_lines``, last first, without splitting the whole text."""
    if not text:
        return
    terminated = text.endswith("\n")
    stop = len(text) - 1 if terminated else len(text)
    while True:
        start = text.rfind("\n", 0, stop) + 1
        line = text[start:stop]
        yield line[:-1] if terminated and line.endswith("\r") else line
        if start == 0:
            return
        stop, terminated = start - 1, True


def rust_lines(text: str) -> list[str]:
    """All lines of ``text`` as Rust's ``str::lines`` gives them."""
    return list(_head_lines(text))


def _cut_prefix(data: bytes, limit: int) -> str:
    end = min(limit, len(data))
    while 0 < end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass")


def _cut_suffix(data: bytes, limit: int) -> str:
    start = max(0, len(data) - limit)
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode("utf-8", "surrogatepass")


def budget_text(
    text: str, config: ToolOutputBudgetConfig = _DEFAULT, *, tail: bool = False, hint: str = DEFAULT_HINT
) -> str:
    """Budget one string: untouched if under both caps, else preview + marker + hint."""
    nbytes = _nbytes(text)
    nlines = _line_count(text)
    if nlines <= config.max_lines and config.size(nbytes) <= config.limit:
        return text
    window = config.byte_window
    if window == 0:
        return f"...{config.size(nbytes)} {config.unit} truncated..."
    if config.max_lines == 0:
        return f"...{nlines} lines truncated..."

    kept: list[str] = []
    used = 0
    size_cap_hit = False
    lines = _tail_lines(text) if tail else _head_lines(text)
    for _, line in zip(range(config.max_lines), lines):
        data = _utf8(line)
        sep = 1 if kept else 0
        if len(data) + sep <= window - used:
            kept.append(line)
            used += len(data) + sep
            continue
        if not kept:
            piece = (_cut_suffix if tail else _cut_prefix)(data, window)
            if piece:
                kept.append(piece)
        size_cap_hit = True
        break
    if tail:
        kept.reverse()
    preview = "\n".join(kept)

    # Every line kept yet still over budget: only the size cap can have bound (the
    # dropped bytes are CRs and a final newline); otherwise say which cap stopped us.
    if size_cap_hit or len(kept) == nlines:
        marker = f"...{config.size(nbytes - _nbytes(preview))} {config.unit} truncated..."
    else:
        marker = f"...{nlines - len(kept)} lines truncated..."
    if not preview:
        return f"{marker}\n\n{hint}"
    if tail:
        return f"{marker}\n\n{hint}\n\n{preview}"
    return f"{preview}\n\n{marker}\n\n{hint}"


class _Text(str):
    """Already-rendered JSON punctuation on the render stack."""

    __slots__ = ()


def _render_structured(value: Any, leaf: Callable[[str], str]) -> str:
    """Compact JSON of ``value`` with every string leaf passed through ``leaf``.

    Iterative (an explicit stack), so deeply nested values cannot exhaust recursion.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            out.append(item)
        elif isinstance(item, str):
            out.append(json_line(leaf(item)))
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Text("}"))
            entries = list(item.items())
            for index in range(len(entries) - 1, -1, -1):
                key, child = entries[index]
                key_text = key if isinstance(key, str) else compact(key)
                stack.append(child)
                stack.append(_Text(("," if index else "") + json_line(key_text) + ":"))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(_Text("]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_Text(","))
        else:
            out.append(compact(item))
    return "".join(out)


def project_output(
    value: Any, config: ToolOutputBudgetConfig = _DEFAULT, *, tail: bool = False, hint: str = DEFAULT_HINT
) -> str:
    """The budgeted text of a successful output.

    A string is budgeted as a whole; a structured value renders as compact JSON with
    each string leaf budgeted on its own; any other leaf is its compact JSON.
    """
    if isinstance(value, str):
        return budget_text(value, config, tail=tail, hint=hint)
    if isinstance(value, (dict, list, tuple)):
        return _render_structured(value, lambda text: budget_text(text, config, tail=tail, hint=hint))
    return compact(value)
