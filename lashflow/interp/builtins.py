"""The 23 builtins of the language (docs/language.md), with their messages and arities.

Each builtin is a plain function over values; ``BUILTINS`` maps a name to the function
and its accepted argument counts. Arity is checked where the call is compiled (the
count is static) and reported at run time, as the reference does.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from lashflow.errors import LimitExceeded
from lashflow.interp.errors import type_error, value_error
from lashflow.interp.json_parse import parse_json_text
from lashflow.interp.limits import ACTIVE, charge, check_seq, check_str, tick
from lashflow.interp.schema import validate
from lashflow.interp.values import (
    RUST_WHITESPACE, as_index, display, equal, from_json, num, text, type_name,
)


def len_(x: Any) -> float:
    t = type(x)
    if t is str or t is list or t is tuple or t is dict:
        return float(len(x))
    if x is None:
        return 0.0
    raise type_error("`len` requires a string, tuple, list, record, or null; use `.size` for images")


def empty(x: Any) -> bool:
    t = type(x)
    if t is str or t is list or t is tuple or t is dict:
        return len(x) == 0
    if x is None:
        return True
    raise type_error("`empty` requires a string, tuple, list, record, or null")


def keys(r: Any) -> list[Any]:
    if type(r) is dict:
        charge(len(r))
        return list(r)
    if r is None:
        return []
    raise type_error("`keys` requires a record or null")


def values(r: Any) -> list[Any]:
    if type(r) is dict:
        charge(len(r))
        return list(r.values())
    if r is None:
        return []
    raise type_error("`values` requires a record or null")


def trim(s: Any) -> str:
    src = text(s)
    charge(len(src))
    return src.strip(RUST_WHITESPACE)


def to_string(x: Any) -> str:
    return check_str(display(x))


def to_int(x: Any) -> float:
    """Truncation keeps the sign, as the original's ``f64::trunc``: ``to_int(-0.5)`` is
    -0.0, which reads ``0`` as a value and ``-0`` where text is coerced (``trim``)."""
    f = num(x)
    return math.copysign(math.trunc(f), f) if f - f == 0.0 else f


def to_float(x: Any) -> float:
    return num(x)


def json_parse(s: Any) -> Any:
    src = text(s)
    tick(len(src) // 2)  # parsed, then converted node by node
    return from_json(parse_json_text(src))


def contains(h: Any, n: Any) -> bool:
    t = type(h)
    if t is str:
        charge(len(h))
        return text(n) in h
    if t is list or t is tuple:
        tick(len(h))
        for item in h:
            if equal(item, n):
                return True
        return False
    if t is dict:
        return text(n) in h
    if h is None:
        return False
    raise type_error(
        "`contains` requires a string/string, tuple/value, list/value, record/key, or null/value pair"
    )


def starts_with(s: Any, p: Any) -> bool:
    src, prefix = text(s), text(p)  # the subject is checked first, as the reference does
    charge(len(prefix))
    return src.startswith(prefix)


def ends_with(s: Any, p: Any) -> bool:
    src, suffix = text(s), text(p)
    charge(len(suffix))
    return src.endswith(suffix)


def split(s: Any, sep: Any) -> list[Any]:
    src, on = text(s), text(sep)
    charge(len(src))
    if on == "":  # Rust: empty pattern matches around every char
        return check_seq(["", *src, ""])
    return check_seq(src.split(on))


def join(xs: Any, sep: Any) -> str:
    if type(xs) is not list and type(xs) is not tuple:
        raise type_error("`join` requires a tuple or list as the first argument")
    tick(2 * len(xs))
    return check_str(text(sep).join([text(x) for x in xs]))


_U64_END = 2.0**64


def find(s: Any, needle: Any, start: Any = 0.0) -> float | None:
    # The start is coerced like any number (null is 0, numeric text counts) and checked
    # before the text arguments; a 64-bit index is the largest accepted.
    at_least = num(start)
    if not at_least.is_integer() or at_least < 0 or at_least > _U64_END:
        raise type_error("`find` start must be a non-negative integer")
    src, pat = text(s), text(needle)
    begin = int(at_least)
    if begin > len(src):
        return None
    charge(len(src) - begin)
    at = src.find(pat, begin)
    return None if at < 0 else float(at)


def _rust_lines(src: str) -> list[str]:
    lines = src.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def grep_text(s: Any, needle: Any) -> list[Any]:
    src, pat = text(s), text(needle)
    if pat == "":
        raise value_error("`grep_text` needle must not be empty")
    hits = []
    charge(len(src))
    lines = _rust_lines(src)
    tick(len(lines))
    for number, line in enumerate(lines, start=1):
        at = line.find(pat)
        if at >= 0:
            hits.append({
                "line": float(number), "text": line, "match": pat,
                "start": float(at), "end": float(at + len(pat)),
            })
    return hits


def slice_(x: Any, start: Any, end: Any) -> Any:
    first = None if start is None else as_index(start)  # bounds are checked first
    last = None if end is None else as_index(end)
    t = type(x)
    if t is not str and t is not list and t is not tuple:
        raise type_error("`slice` requires a string, tuple, or list")
    n = len(x)

    def bound(k: int | None, default: int) -> int:
        if k is None:
            return default
        if k < 0:
            k += n
        return min(max(k, 0), n)

    lo, hi = bound(first, 0), bound(last, n)
    charge(hi - lo)
    return x[lo:hi] if lo < hi else x[0:0]


def push(xs: Any, item: Any) -> list[Any]:
    if type(xs) is not list:
        raise type_error("`push` requires a list as the first argument")
    charge(len(xs))
    out = xs + [item]
    return check_seq(out)


_I64_HIGH = 2**63 - 1


def _range_int(v: Any) -> int:
    """A bound as a 64-bit integer: beyond that range it is refused; exactly 2^63 (the
    f64 nearest to the largest i64) stands for that largest i64."""
    if type(v) is not float:
        raise type_error(f"`range` bounds must be finite integers, got {type_name(v)}")
    if not v.is_integer() or not -(2.0**63) <= v <= 2.0**63:
        raise type_error("`range` bounds must be finite integers")
    return min(int(v), _I64_HIGH)


def range_(*args: Any) -> list[Any]:
    ints = [_range_int(a) for a in args]
    if len(ints) == 1:
        ints = [0, ints[0], 1]
    elif len(ints) == 2:
        ints.append(1)
    lo, hi, step = ints
    if step == 0:
        raise value_error("`range` step must not be 0")
    r = range(lo, hi, step)
    limit = ACTIVE.limits.max_range_items
    if len(r) > limit:
        raise LimitExceeded(f"`range` would create more than {limit} items")
    tick(len(r) // 4)
    return check_seq([float(i) for i in r])


def range_bounds(args: list[Any]) -> range:
    """The Python range of a ``range(...)`` call (used by ``for`` without building a list)."""
    ints = [_range_int(a) for a in args]
    if len(ints) == 1:
        ints = [0, ints[0], 1]
    elif len(ints) == 2:
        ints.append(1)
    if ints[2] == 0:
        raise value_error("`range` step must not be 0")
    r = range(*ints)
    limit = ACTIVE.limits.max_range_items
    if len(r) > limit:
        raise LimitExceeded(f"`range` would create more than {limit} items")
    return r


def _div_operand(name: str, role: str, v: Any) -> float:
    if type(v) is not float:
        raise type_error(f"`{name}` {role} must be a finite integer, got {type_name(v)}")
    if not v.is_integer():
        raise type_error(f"`{name}` {role} must be a finite integer")
    return v


def _rounded(rounding: Callable[[float], int], quotient: float) -> float:
    """``rounding`` of a float quotient as a float, keeping the sign of a zero (``-0.5``
    rounds up to ``-0``, which text shows as ``-0`` where the original shows it)."""
    return math.copysign(0.0, quotient) if -1.0 < quotient < 1.0 and rounding(quotient) == 0 \
        else float(rounding(quotient))


# Both round the quotient of the two numbers as they are (floats), as the original does:
# beyond 2^53 that can differ from the exact integer quotient by one.
def ceil_div(a: Any, b: Any) -> float:
    x, y = _div_operand("ceil_div", "dividend", a), _div_operand("ceil_div", "divisor", b)
    if y == 0:
        raise value_error("`ceil_div` divisor must not be 0")
    return _rounded(math.ceil, x / y)


def floor_div(a: Any, b: Any) -> float:
    x, y = _div_operand("floor_div", "dividend", a), _div_operand("floor_div", "divisor", b)
    if y == 0:
        raise value_error("`floor_div` divisor must not be 0")
    return _rounded(math.floor, x / y)


_ASCII_DIGITS = frozenset("0123456789")
_USIZE_MAX = 2**64 - 1


def format_(template: Any = None, *args: Any) -> str:
    if type(template) is not str:
        raise type_error(f"`format` template must be a string, got {type_name(template)}")
    out: list[str] = []
    used = [False] * len(args)
    mode = ""  # "seq" for `{}`, "idx" for `{N}`
    next_seq = 0
    i, n = 0, len(template)
    while i < n:
        c = template[i]
        if c == "{":
            if i + 1 < n and template[i + 1] == "{":
                out.append("{")
                i += 2
                continue
            close = i + 1
            while close < n and template[close] in _ASCII_DIGITS:
                close += 1
            if close >= n:
                raise value_error("unmatched `{` in format string")
            if template[close] != "}":
                raise value_error("invalid format placeholder")
            body = template[i + 1:close]
            if body == "":
                if mode == "idx":
                    raise value_error("can't mix `{}` and indexed format placeholders")
                mode, k = "seq", next_seq
                next_seq += 1
                if k >= len(args):
                    raise value_error("format slot `{}` is out of range")
            else:
                if mode == "seq":
                    raise value_error("can't mix `{}` and indexed format placeholders")
                mode, k = "idx", int(body)
                if k > _USIZE_MAX:
                    raise value_error(f"bad format slot `{body}`")
                if k >= len(args):
                    raise value_error(f"format slot `{body}` is out of range")
            out.append(display(args[k]))
            used[k] = True
            i = close + 1
        elif c == "}":
            if i + 1 < n and template[i + 1] == "}":
                out.append("}")
                i += 2
                continue
            raise value_error("unmatched `}` in format string")
        else:
            j = i + 1
            while j < n and template[j] not in "{}":
                j += 1
            out.append(template[i:j])
            i = j
    for k, was_used in enumerate(used):
        if not was_used:
            raise value_error(f"format argument `{k}` is unused")
    return check_str("".join(out))


# name -> (function, accepted argument counts or None for "at least one", arity message)
BUILTINS: dict[str, tuple[Callable[..., Any], tuple[int, ...] | None, str | None]] = {
    "len": (len_, (1,), None),
    "empty": (empty, (1,), None),
    "keys": (keys, (1,), None),
    "values": (values, (1,), None),
    "trim": (trim, (1,), None),
    "to_string": (to_string, (1,), None),
    "to_int": (to_int, (1,), None),
    "to_float": (to_float, (1,), None),
    "json_parse": (json_parse, (1,), None),
    "contains": (contains, (2,), None),
    "starts_with": (starts_with, (2,), None),
    "ends_with": (ends_with, (2,), None),
    "split": (split, (2,), None),
    "join": (join, (2,), None),
    "find": (find, (2, 3), "`find` takes 2 or 3 arg(s), got {n}"),
    "grep_text": (grep_text, (2,), None),
    "slice": (slice_, (3,), None),
    "push": (push, (2,), None),
    "range": (range_, (1, 2, 3), "`range` takes 1, 2, or 3 arg(s), got {n}"),
    "ceil_div": (ceil_div, (2,), None),
    "floor_div": (floor_div, (2,), None),
    "format": (format_, None, "`format` requires at least a template string"),
    "validate": (validate, (2,), None),
}


def arity_error(name: str, count: int) -> str | None:
    """The TypeError message for calling ``name`` with ``count`` args, or None if fine."""
    fn, counts, message = BUILTINS[name]
    if counts is None:
        return message if count == 0 else None
    if count in counts:
        return None
    if message is not None:
        return message.format(n=count)
    return f"`{name}` takes {counts[0]} arg(s), got {count}"
