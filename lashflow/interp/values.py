"""The Lashlang value model on plain Python objects.

null=None, bool=bool, number=float (always: JSON ints become floats on the way in, so
``type(v) is float`` and ``type(v) is bool`` never confuse each other), string=str,
list=list, tuple=tuple, record=dict (insertion-ordered), resource=``Resource``.
Values are never mutated once shared: see ``ops.assign_path`` for copy-on-write.
"""

from __future__ import annotations

import math
import re
from decimal import Context, Decimal
from json.encoder import encode_basestring
from typing import Any

from lashflow.interp.errors import type_error
from lashflow.interp.limits import ACTIVE, LIST_ITEM_BYTES, charge, tick, too_big


class _Unset:
    """Marks an empty variable slot (never a user-visible value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Resource:
    """A module authority passed as a value (``t: Tools``); calls on it go to ``alias``."""

    __slots__ = ("type", "alias")

    def __init__(self, type: str, alias: str) -> None:
        self.type = type
        self.alias = alias

    def __eq__(self, other: object) -> bool:
        return type(other) is Resource and other.type == self.type and other.alias == self.alias

    def __hash__(self) -> int:
        return hash((self.type, self.alias))

    def __repr__(self) -> str:
        return f"Resource({self.type!r}, {self.alias!r})"

    def to_json(self) -> dict[str, Any]:
        return {"__resource__": True, "alias": self.alias, "type": self.type}


_TYPE_NAMES = {
    type(None): "null", bool: "bool", float: "number", int: "number", str: "string",
    list: "list", tuple: "tuple", dict: "record", Resource: "resource",
}


def type_name(v: Any) -> str:
    """The type name used in runtime messages."""
    return _TYPE_NAMES.get(type(v), "value")


# --------------------------------------------------------------------------- truth, equality


def truthy(v: Any) -> bool:
    """false: null, false, 0, NaN, "", (); everything else (even [] and {}) is true."""
    if v is True:
        return True
    if v is False or v is None:
        return False
    t = type(v)
    if t is float:
        return v == v and v != 0.0
    if t is str or t is tuple:
        return len(v) > 0
    return True


def equal(a: Any, b: Any) -> bool:
    """Structural equality with no coercion across types (``1 == true`` is false,
    a tuple never equals a list, records compare regardless of key order)."""
    t = type(a)
    if t is not type(b):
        return False
    if t is list or t is tuple:
        if a is b:
            return True
        if len(a) != len(b):
            return False
        tick(1 + len(a))  # shared sub-lists can make this exponential: every visit costs
        for x, y in zip(a, b):
            if not equal(x, y):
                return False
        return True
    if t is dict:
        if a is b:
            return True
        if len(a) != len(b):
            return False
        tick(1 + len(a))
        for k, x in a.items():
            if k not in b or not equal(x, b[k]):
                return False
        return True
    return a == b


# --------------------------------------------------------------------------- coercions

_FLOAT_RE = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE
)

# Rust's char::is_whitespace (Unicode White_Space); Python's str.isspace differs.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def parse_float(s: str) -> float | None:
    """Rust ``str::parse::<f64>`` on trimmed text; empty text is 0."""
    charge(len(s))
    s = s.strip(RUST_WHITESPACE)
    if not s:
        return 0.0
    if not _FLOAT_RE.match(s):
        return None
    return float(s)


def num(v: Any) -> float:
    """Numeric coercion: number, bool (1/0), null (0), numeric text."""
    t = type(v)
    if t is float:
        return v
    if t is bool:
        return 1.0 if v else 0.0
    if v is None:
        return 0.0
    if t is str:
        f = parse_float(v)
        if f is None:
            raise type_error("expected a number")
        return f
    raise type_error(f"expected a number, got {type_name(v)}")


def text(v: Any) -> str:
    """Text coercion for builtins that expect text: string/null/bool/number only."""
    t = type(v)
    if t is str:
        return v
    if t is float:
        return float_text(v)
    if t is bool or v is None:
        return display(v)
    raise type_error(f"expected text, got {type_name(v)}")


def as_index(v: Any) -> int:
    """An index operand: numeric coercion, then it must be integral."""
    f = v if type(v) is float else num(v)
    if not f.is_integer():
        raise type_error("index must be an integer")
    return int(f)


# --------------------------------------------------------------------------- numbers as text

_I64_MIN = -(2.0**63)
_U64_END = 2.0**64


def is_json_int(x: float) -> bool:
    """Integral, finite and inside the i64/u64 range: written as integer digits."""
    return x.is_integer() and _I64_MIN <= x < _U64_END


def number_text(x: float) -> str:
    """How the language displays a number (``print``, ``to_string``, templates): integers
    in the i64/u64 range as their exact digits, anything else as ``float_text``."""
    if x.is_integer() and _I64_MIN <= x < _U64_END:
        return str(int(x))
    return float_text(x)


def float_text(x: float) -> str:
    """Rust's ``Display`` of an f64 (text coercion in builtins such as ``join``): the
    shortest digits that read back as ``x``, written out in full (never an exponent),
    ``-0`` for negative zero, ``NaN`` and ``inf``."""
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "inf" if x > 0 else "-inf"
    if x == 0.0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    if x.is_integer() and -1e16 < x < 1e16:  # the common case, and exact: no rounding
        return str(int(x))
    digits = _shortest(x)
    text = format(digits, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


_EXACT = Context(prec=1200)  # enough digits for any f64 written out exactly


def _shortest(x: float) -> Decimal:
    """The shortest decimal that reads back as ``x``. Python breaks an exact tie between
    two such decimals towards the even digit; Rust's formatter rounds it up (away from
    zero), so the last digit moves up one where the tie happens."""
    short = Decimal(repr(x))
    exact = Decimal(x)
    unit = Decimal((0, (1,), int(short.as_tuple().exponent)))
    gap = _EXACT.subtract(exact, short).copy_abs()
    if _EXACT.multiply(gap, 2) == unit and short.copy_abs() < exact.copy_abs():
        bigger = _EXACT.add(short, unit if x > 0 else unit.copy_negate())
        if float(bigger) == x:
            return bigger
    return short


def json_number(x: float) -> str:
    """serde_json/ryu text of a number: integers in range, else ryu's layout."""
    if x.is_integer() and _I64_MIN <= x < _U64_END:
        return str(int(x))
    if x != x or x in (math.inf, -math.inf):
        return "null"
    r = repr(x)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mantissa, _, exp = r.partition("e")
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    point = len(whole) + (int(exp) if exp else 0)  # value = 0.<whole+frac> * 10^point
    if whole == "0":  # 0.000123: leading zeros of frac move the point
        stripped = frac.lstrip("0")
        point = (int(exp) if exp else 0) - (len(frac) - len(stripped))
        digits = stripped
    digits = digits.rstrip("0") or "0"
    length, kk = len(digits), point
    k = kk - length
    if 0 <= k and kk <= 16:
        out = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        out = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        out = "0." + "0" * (-kk) + digits
    elif length == 1:
        out = f"{digits}e{kk - 1}"
    else:
        out = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + out


# --------------------------------------------------------------------------- text forms


class _Budget:
    """Counts output size of one serialisation so shared structures can't explode."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = ACTIVE.limits.max_value_bytes

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise too_big("serialising a value", ACTIVE.limits.max_value_bytes - self.left)


def json_text(v: Any) -> str:
    """Compact JSON with sorted record keys (tuples as arrays, non-finite as null)."""
    parts: list[str] = []
    _write_json(v, parts, _Budget())
    return "".join(parts)


def _write_json(v: Any, out: list[str], budget: _Budget) -> None:
    t = type(v)
    if t is str:
        s = encode_basestring(v)
        budget.spend(len(s))
        out.append(s)
    elif t is float:
        out.append(json_number(v))
        budget.spend(8)
    elif t is bool:
        out.append("true" if v else "false")
        budget.spend(5)
    elif v is None:
        out.append("null")
        budget.spend(4)
    elif t is list or t is tuple:
        budget.spend(2 + len(v))
        tick(2 * len(v))  # text is built item by item: as slow as a loop over them
        out.append("[")
        first = True
        for item in v:
            if not first:
                out.append(",")
            first = False
            _write_json(item, out, budget)
        out.append("]")
    elif t is dict:
        budget.spend(2 + len(v))
        tick(2 * len(v))
        out.append("{")
        first = True
        for key in sorted(v):
            if not first:
                out.append(",")
            first = False
            out.append(encode_basestring(key))
            out.append(":")
            _write_json(v[key], out, budget)
        out.append("}")
    elif t is Resource:  # keys in the original's order, not sorted
        budget.spend(40)
        out.append('{"__resource__":true,"type":' + encode_basestring(v.type)
                   + ',"alias":' + encode_basestring(v.alias) + "}")
    elif t is int:
        out.append(str(v))
    else:
        raise TypeError(f"not a Lashlang value: {v!r}")


def display(v: Any) -> str:
    """Stringification of 5.4: strings raw, numbers without exponent, tuples as
    ``(1, "a")``, everything else compact sorted JSON."""
    t = type(v)
    if t is str:
        return v
    if t is float:
        return number_text(v)
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "null"
    if t is tuple:
        tick(len(v))
        items = [encode_basestring(x) if type(x) is str else display(x) for x in v]
        if len(items) == 1:
            return "(" + items[0] + ",)"
        return "(" + ", ".join(items) + ")"
    return json_text(v)


def failure_text(v: Any) -> str:
    """The text of a ``fail`` value or tool error: its display text (a string as-is)."""
    return display(v)


# --------------------------------------------------------------------------- JSON objects


def to_json(v: Any) -> Any:
    """Value -> JSON-compatible Python data (what hosts, journals and tools see)."""
    return _to_json(v, _Budget())


def _to_json(v: Any, budget: _Budget) -> Any:
    t = type(v)
    if t is float:
        if v.is_integer() and _I64_MIN <= v < _U64_END:
            return int(v)
        return v if v - v == 0.0 else None
    if t is str:
        budget.spend(len(v) + 2)
        return v
    if t is list or t is tuple:
        budget.spend(LIST_ITEM_BYTES * len(v) + 2)
        return [_to_json(x, budget) for x in v]
    if t is dict:
        budget.spend(LIST_ITEM_BYTES * len(v) + 2)
        return {k: _to_json(x, budget) for k, x in v.items()}
    if t is Resource:
        return v.to_json()
    if v is None or t is bool:
        return v
    if t is int:
        return v
    raise TypeError(f"not a Lashlang value: {v!r}")


def from_json(obj: Any, ordered: bool = False) -> Any:
    """JSON-compatible data -> value: numbers become floats, objects get sorted keys
    (``ordered``: keep their order, for a child's input, which was a record of the
    parent's), ``{"__resource__": true, ...}`` revives a resource. Already-converted
    values pass."""
    t = type(obj)
    if t is float or t is str or t is bool or obj is None:
        return obj
    if t is int:
        try:
            return float(obj)
        except OverflowError:
            return math.inf if obj > 0 else -math.inf
    if t is list:
        return [from_json(x, ordered) for x in obj]
    if t is dict:
        if obj.get("__resource__") is True and type(obj.get("type")) is str and type(
            obj.get("alias")
        ) is str:
            return Resource(obj["type"], obj["alias"])
        return {k: from_json(obj[k], ordered) for k in (obj if ordered else sorted(obj))}
    if t is tuple:
        return tuple(from_json(x, ordered) for x in obj)
    if t is Resource:
        return obj
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return float(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, dict):
        return from_json(dict(obj), ordered)
    if isinstance(obj, (list, tuple)):
        return [from_json(x, ordered) for x in obj]
    raise TypeError(f"not JSON data: {obj!r}")
