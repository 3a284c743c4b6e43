"""JSON values as users hand them in: the name of a value's kind in messages (``got
string``, one spelling everywhere), and the check that a value can be journaled at all."""

from __future__ import annotations

from typing import Any

from .errors import InputInvalid


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


MAX_INPUT_DEPTH = 256  # nesting of a run input; deeper is refused before anything runs


def check_json_text(data: Any, max_depth: int = MAX_INPUT_DEPTH) -> None:
    """Refuse what JSON text cannot carry faithfully, before it reaches the journal: a
    string or key with a lone surrogate (not Unicode text: it cannot be stored as UTF-8)
    and nesting deeper than ``max_depth``. Iterative: any depth is walked safely. It runs
    on every tool output, so the common case (all is well) builds no paths at all."""
    if _clean(data, max_depth):
        return
    stack: list[tuple[Any, str, int]] = [(data, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > max_depth:
            shown = path if len(path) <= 60 else path[:57] + "..."
            raise InputInvalid(f"{shown}: nested deeper than {max_depth} levels", path=path)
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    _check_text(key, f"{path} (a key)")
                stack.append((item, f"{path}.{key}", depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise InputInvalid(f"{path}: a lone surrogate (\\u{ord(bad):04x}) is not Unicode text",
                           path=path.split(" ", 1)[0]) from None


def _clean(data: Any, max_depth: int) -> bool:
    """The fast pass of ``check_json_text``: True when there is nothing to report."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is str:
            if not value.isascii() and not _utf8(value):
                return False
        elif kind is dict:
            if depth >= max_depth:
                return False
            for key, item in value.items():
                if type(key) is str and not key.isascii() and not _utf8(key):
                    return False
                if type(item) in _NESTED:
                    stack.append((item, depth + 1))
        elif kind is list or kind is tuple:
            if depth >= max_depth:
                return False
            stack.extend((item, depth + 1) for item in value if type(item) in _NESTED)
    return True


_NESTED = frozenset([str, dict, list, tuple])


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
