"""``json_parse``'s reading of JSON text, with the original's rules for numbers.

Python's ``json`` reads ``-0`` as the integer 0 and ``1e400`` as infinity; the original
(serde_json into 64-bit floats) reads ``-0`` as negative zero and refuses a number beyond a
float's range with ``number out of range at line L column C``, C being the byte column of
the number's last character. Those two rules are the only ones added here."""

from __future__ import annotations

import json
import re
from typing import Any

from lashflow.interp.errors import LashRuntimeError, value_error

# A string (skipped whole) or a number, as JSON writes them.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?')
_MAX_DIGITS = 309  # 10**309 is beyond every 64-bit float


class _OutOfRange(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid number `{name}`")


def _read_int(text: str) -> int | float:
    if text == "-0":
        return -0.0
    if len(text) >= _MAX_DIGITS:
        try:
            float(int(text))
        except (OverflowError, ValueError):
            raise _OutOfRange(text) from None
    return int(text)


def _read_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # inf: the digits are beyond a float's range
        raise _OutOfRange(text)
    return value


def _out_of_range(source: str, number: str) -> LashRuntimeError:
    """The error at the first number written ``number`` (the first one out of range:
    the scan stops at the first)."""
    end = len(source)
    for match in _TOKEN.finditer(source):
        if match.group() == number:
            end = match.end()
            break
    line_start = source.rfind("\n", 0, end) + 1
    line = source.count("\n", 0, end) + 1
    column = len(source[line_start:end].encode("utf-8", "surrogatepass"))
    return value_error(f"invalid json: number out of range at line {line} column {column}")


def parse_json_text(source: str) -> Any:
    """JSON data of ``source``; a ``ValueError`` runtime error when it is not JSON."""
    try:
        return json.loads(source, parse_constant=_reject_constant, parse_int=_read_int,
                          parse_float=_read_float)
    except _OutOfRange as exc:
        raise _out_of_range(source, exc.text) from None
    except json.JSONDecodeError as exc:
        raise value_error(f"invalid json: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise value_error(f"invalid json: {exc}") from None
