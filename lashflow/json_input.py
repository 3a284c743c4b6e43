"""The one way lashflow reads JSON text a user hands in: ``--input``, ``--set``,
``--result``, ``--payload``, every HTTP body and the console's JSON fields.

Python's ``json.loads`` takes ``NaN``, ``Infinity`` and ``1e999`` (an infinity) and gives
up on a 5,000-digit integer with a message about ``sys.set_int_max_str_digits``; stored,
a non-finite number makes the journal hold text no JSON reader takes back. Here each
such number is kept as a ``RefusedNumber`` while parsing, then ``check_json_text`` (the
same check the engine applies to what Python callers hand it) refuses the value with its
JSON path, along with lone surrogates and nesting beyond the limit. No I/O: the caller
reads the file or the request.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InputInvalid
from .json_kinds import MAX_INPUT_DEPTH, RefusedNumber, check_json_text

_LONGEST_INT = 400  # digits: far beyond a float's range (309 digits), below Python's limit


def _constant(spelled: str) -> RefusedNumber:
    return RefusedNumber(spelled, out_of_range=False)


def _float(spelled: str) -> float:
    number = float(spelled)
    if number - number != 0.0:  # 1e999: an infinity by overflow
        shown = spelled if len(spelled) <= 40 else spelled[:37] + "..."
        return RefusedNumber(shown, out_of_range=True)
    return number


def _int(spelled: str) -> int | float:
    if len(spelled) > _LONGEST_INT:  # before int(): Python refuses 4,300+ digits itself
        digits = len(spelled.lstrip("-"))
        return RefusedNumber(f"an integer of {digits:,} digits", out_of_range=True)
    return int(spelled)


_DECODER = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)


def read_json(text: str | bytes, what: str, *, max_depth: int = MAX_INPUT_DEPTH) -> Any:
    """Parse ``text`` as strict JSON or raise ``InputInvalid`` naming ``what`` (``--input``,
    ``the body``) and, for a value JSON cannot carry, its JSON path (``$.items[2]``)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputInvalid(f"{what} is not UTF-8 text (a bad byte at offset {exc.start})",
                               path="$") from None
    try:
        data = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise InputInvalid(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column "
                           f"{exc.colno}", path="$") from None
    except RecursionError:
        raise InputInvalid(f"{what} is nested too deep to read (lashflow takes up to "
                           f"{max_depth} levels)", path="$") from None
    try:
        check_json_text(data, max_depth)
    except InputInvalid as exc:
        raise InputInvalid(f"{what}: {exc.message}", path=exc.details.get("path", "$")) from None
    return data


__all__ = ["read_json"]
