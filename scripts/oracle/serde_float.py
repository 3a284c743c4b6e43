"""The number the original's JSON reader makes of a JSON number's text.

The original reads JSON with serde_json without its exact float parsing: the digits go
into a 64-bit integer (digits beyond its range only raise the exponent), which is turned
into a float and then multiplied or divided by a power of ten. Two roundings where one is
due, so a number of many digits can come out one unit in the last place away from the
nearest float (``-999999999999999.9`` reads as ``-1e15``). lashflow reads the nearest
float; docs/adr/0025 ``json-number-rounding``. This reproduces the original's steps for
the comparison only, to tell that difference from any other."""

from __future__ import annotations

import re

_U64_MAX = 2**64 - 1
_POW10 = [float(f"1e{k}") for k in range(309)]
_NUMBER = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$")


class OutOfRange(ValueError):
    """serde_json's ``number out of range``."""


def _from_parts(significand: int, exponent: int) -> float:
    f = float(significand)
    while True:
        if abs(exponent) < len(_POW10):
            pow10 = _POW10[abs(exponent)]
            if exponent >= 0:
                f *= pow10
                if f - f != 0.0:
                    raise OutOfRange()
            else:
                f /= pow10
            return f
        if f == 0.0:
            return f
        if exponent >= 0:
            raise OutOfRange()
        f /= 1e308
        exponent += 308


def _overflows(significand: int, digit: int) -> bool:
    return significand >= _U64_MAX // 10 and (significand > _U64_MAX // 10
                                               or digit > _U64_MAX % 10)


def serde_number(text: str) -> int | float:
    """The value serde_json reads from ``text`` (a valid JSON number): an int where it
    reads an integer that fits 64 bits, else a float."""
    match = _NUMBER.match(text)
    if match is None:
        raise ValueError(text)
    sign, whole, fraction, exp_text = match.groups()
    significand, exponent = 0, 0
    floating = fraction is not None or exp_text is not None
    overflowed = False  # past 64 bits, each further digit of the whole part is a power of ten
    for ch in whole:
        digit = ord(ch) - 48
        if overflowed or _overflows(significand, digit):
            overflowed = floating = True
            exponent += 1
        else:
            significand = significand * 10 + digit
    for ch in fraction or "":
        digit = ord(ch) - 48
        if _overflows(significand, digit):
            break  # the rest of the fraction is ignored
        significand = significand * 10 + digit
        exponent -= 1
    if exp_text is not None:
        exponent += int(exp_text)
    if not floating:
        return -significand if sign else significand
    value = _from_parts(significand, exponent) if significand else 0.0
    return -value if sign else value
