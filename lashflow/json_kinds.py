"""JSON values as users hand them in: the name of a value's kind in messages (``got
string``, one spelling everywhere), and the check that a value can be journaled at all."""

from __future__ import annotations

import sys
from typing import Any

from .errors import InputInvalid

FLOAT_MAX = sys.float_info.max  # a number beyond it is out of range (Lashlang numbers are floats)


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
    string or key with a lone surrogate (not Unicode text: it cannot be stored as UTF-8),
    NaN and the infinities (JSON has none: stored, they make every later read fail), a
    number beyond a 64-bit float's range (a 5,000-digit integer: the process would see
    infinity) and nesting deeper than ``max_depth``. Iterative: any depth is walked
    safely. It runs on every tool output, so the common case (all is well) builds no
    paths at all."""
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
        elif isinstance(value, (int, float)):
            _check_number(value, path)
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


class RefusedNumber(float):
    """What a JSON reader keeps in place of a number it must not keep (``NaN``,
    ``Infinity``, ``1e999``, a 5,000-digit integer): a non-finite float that remembers
    how the text spelled it, so ``check_json_text`` names it with its JSON path."""

    spelled: str
    out_of_range: bool

    def __new__(cls, spelled: str, *, out_of_range: bool) -> "RefusedNumber":
        number = super().__new__(cls, "inf" if out_of_range else "nan")
        number.spelled, number.out_of_range = spelled, out_of_range
        return number


def _check_number(number: int | float, path: str) -> None:
    if isinstance(number, RefusedNumber):
        shown, too_big = number.spelled, number.out_of_range
    elif isinstance(number, float):
        if number - number == 0.0:  # finite
            return
        shown, too_big = repr(number), False
    elif -FLOAT_MAX <= number <= FLOAT_MAX:
        return
    else:
        shown, too_big = f"an integer of {_digits(abs(number)):,} digits", True
    if too_big:
        raise InputInvalid(f"{path}: {shown} is out of range (a number must fit a 64-bit "
                           "float: up to about 1.8e308)", path=path)
    raise InputInvalid(f"{path}: {shown} is not a JSON number (JSON has no NaN or Infinity)",
                       path=path)


def _digits(number: int) -> int:
    """Decimal digits of a positive integer (``str()`` refuses 4,300 and more)."""
    digits = int(number.bit_length() * 0.30102999566398) + 1
    return digits - 1 if 10 ** (digits - 1) > number else digits


def _clean(data: Any, max_depth: int) -> bool:
    """The fast pass of ``check_json_text``: True when there is nothing to report. Each
    item's check is written out in the loop (no call per item): it runs on every tool
    output."""
    nested, atoms, top, bottom = _NESTED, _ATOMS, FLOAT_MAX, -FLOAT_MAX
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is str:
            if not value.isascii() and not _utf8(value):
                return False
        elif kind is dict or kind is list or kind is tuple:
            if depth >= max_depth:
                return False
            if kind is dict:
                for key in value:
                    if type(key) is str and not key.isascii() and not _utf8(key):
                        return False
            for item in value.values() if kind is dict else value:
                item_kind = type(item)
                if item_kind in nested:
                    stack.append((item, depth + 1))
                elif item_kind is float:
                    if item - item != 0.0:
                        return False
                elif item_kind is int:
                    if not bottom <= item <= top:
                        return False
                elif item_kind not in atoms and isinstance(item, (int, float)):
                    return False
        elif isinstance(value, (int, float)) and kind is not bool:
            if not -FLOAT_MAX <= value <= FLOAT_MAX:  # False for NaN too
                return False
    return True


_ATOMS = frozenset([bool, type(None)])
_NESTED = frozenset([str, dict, list, tuple])


def storable_text(text: str) -> bool:
    """Text every database stores as it is: no NUL (PostgreSQL refuses it in text) and
    no lone surrogate (not UTF-8). Names and ids must be; JSON strings may hold a NUL
    (JSON escapes it)."""
    return "\x00" not in text and _utf8(text)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
