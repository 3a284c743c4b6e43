"""Operators, reads, path assignment and ``?`` (unwrapping a result wrapper).

These are the slow, general paths; the expression compiler inlines the float/float
fast paths and falls back here.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from lashflow.interp.errors import LashRuntimeError, type_error, value_error
from lashflow.interp.limits import (
    ACTIVE, LIST_ITEM_BYTES, charge, check_record, check_seq, check_str, tick, too_big,
)
from lashflow.interp.values import (
    UNSET, as_index, display, equal, num, text, truthy, type_name,
)

_refcount = getattr(sys, "getrefcount", None)


def undefined(name: str) -> LashRuntimeError:
    return LashRuntimeError("UndefinedVariable", f"unknown name `{name}`")


# --------------------------------------------------------------------------- arithmetic


def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is float and tb is float:
        return a + b
    if ta is str:
        right = b if tb is str else display(b)
        _fits("a string", len(a) + len(right), 1)
        return check_str(a + right)
    if tb is str:
        left = display(a)
        _fits("a string", len(left) + len(b), 1)
        return check_str(left + b)
    if ta is list or ta is tuple:
        if tb is ta:
            _fits("a list", len(a) + len(b), LIST_ITEM_BYTES)
            charge(len(a) + len(b))
            return check_seq(a + b)
        if tb is list or tb is tuple:
            raise type_error("can't concatenate list and tuple")  # one text for either order
    return num(a) + num(b)


def _fits(what: str, items: int, item_bytes: int) -> None:
    """Refuse an over-limit concatenation before building it: the peak memory of a
    run stays near the limit instead of at twice of it."""
    if items * item_bytes > ACTIVE.limits.max_value_bytes:
        raise too_big(what, items * item_bytes)


def sub(a: Any, b: Any) -> float:
    return num(a) - num(b)


def mul(a: Any, b: Any) -> float:
    return num(a) * num(b)


def div(a: Any, b: Any) -> float:
    x, y = num(a), num(b)
    try:
        return x / y
    except ZeroDivisionError:
        if x == 0.0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)


def mod(a: Any, b: Any) -> float:
    """C/Rust fmod: the result has the dividend's sign; x % 0 is NaN."""
    x, y = num(a), num(b)
    try:
        return math.fmod(x, y)
    except ValueError:
        return math.nan


def neg(a: Any) -> float:
    return -(a if type(a) is float else num(a))


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    if type(a) is str and type(b) is str:
        charge(min(len(a), len(b)))
        return a, b
    return num(a), num(b)


def lt(a: Any, b: Any) -> bool:
    x, y = _ordered(a, b)
    return x < y


def le(a: Any, b: Any) -> bool:
    x, y = _ordered(a, b)
    return x <= y


def gt(a: Any, b: Any) -> bool:
    x, y = _ordered(a, b)
    return x > y


def ge(a: Any, b: Any) -> bool:
    x, y = _ordered(a, b)
    return x >= y


def eq(a: Any, b: Any) -> bool:
    return equal(a, b)


def ne(a: Any, b: Any) -> bool:
    return not equal(a, b)


# `and`/`or` are not here: both compiled forms short-circuit.
BINARY = {
    "+": add, "-": sub, "*": mul, "/": div, "%": mod, "<": lt, "<=": le, ">": gt,
    ">=": ge, "==": eq, "!=": ne,
}


def not_(a: Any) -> bool:
    return not truthy(a)


UNARY = {"-": neg, "not": not_, "!": not_}


# --------------------------------------------------------------------------- reads


def get_field(v: Any, name: str) -> Any:
    if type(v) is dict:
        return v.get(name)
    if v is None:
        return None
    raise type_error(f"can't read `.{name}` from {type_name(v)}")


def get_index(v: Any, i: Any) -> Any:
    t = type(v)
    if t is list or t is tuple or t is str:
        k = as_index(i)
        n = len(v)
        if k < 0:
            k += n
        if 0 <= k < n:
            return v[k]
        return None
    if t is dict:
        return v.get(i if type(i) is str else text(i))
    if v is None:
        return None
    raise type_error(f"can't index {type_name(v)}")


# --------------------------------------------------------------------------- assignment


def _assign_key(container: Any, step: tuple[bool, Any], last: bool) -> Any:
    """Validate one path step against its container; returns the Python key."""
    is_field, key = step
    t = type(container)
    if t is dict:
        k = key if is_field or type(key) is str else text(key)
        if not last and k not in container:
            if is_field:
                raise value_error(f"can't assign through missing field `.{k}`")
            raise value_error(f"can't assign through missing key `{k}`")
        return k
    if t is list and not is_field:
        if type(key) is not float or not key.is_integer():
            raise type_error("list assignment index must be an integer")
        k = int(key)
        n = len(container)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise value_error("list assignment index out of bounds")
        return k
    through = "" if last else "through "  # a step on the way says what it went through
    if t is tuple and not is_field:
        raise type_error(f"can't assign {through}tuple indexes; tuples are immutable")
    if is_field:
        raise type_error(f"can't assign {through}`.{key}` on {type_name(container)}")
    raise type_error(f"can't assign {through}index on {type_name(container)}")


def _copy(container: Any) -> Any:
    if type(container) is dict:
        tick(len(container) // 4)  # rehashing costs more than copying a list
        return dict(container)
    charge(len(container))
    return list(container)


def assign_path(env: list[Any], slot: int, name: str, steps: list[tuple[bool, Any]], value: Any) -> None:
    """``name.step...step = value`` with value semantics.

    Containers along the path are mutated in place only when nothing else refers to
    them (CPython reference count: the owning slot or parent, the local and the call
    argument); any shared container is copied first, so aliases never change.
    """
    cur = env[slot]
    if cur is UNSET:
        raise undefined(name)
    last = len(steps) - 1
    if last < 0:
        env[slot] = value
        return
    key = _assign_key(cur, steps[0], last == 0)
    if _refcount is None or _refcount(cur) > 3:
        cur = _copy(cur)
    env[slot] = cur
    for i in range(1, last + 1):
        child = cur[key]
        next_key = _assign_key(child, steps[i], i == last)
        if _refcount is None or _refcount(child) > 3:
            child = _copy(child)
            cur[key] = child
        cur = child
        key = next_key
    if type(cur) is dict:
        new = key not in cur
        cur[key] = value
        if new:
            check_record(cur)
    else:
        cur[key] = value


# --------------------------------------------------------------------------- unwrap

MODULE_FAILURE = "`?` unwrapped failed module operation: "
RESULT_FAILURE = "`?` unwrapped failed tool result: "


def unwrap(v: Any, prefix: str = RESULT_FAILURE) -> Any:
    """Postfix ``?``: the ``value`` of an ok wrapper, else a ValueError."""
    if type(v) is not dict:
        raise type_error(f"`?` expected a tool result wrapper, got {type_name(v)}")
    ok = v.get("ok")
    if ok is True:
        if "value" not in v:
            raise type_error("`?` found a successful tool result wrapper missing `value`")
        return v["value"]
    if ok is False:
        err = v.get("error")
        raise value_error(prefix + ("unknown error" if err is None else display(err)))
    raise type_error("`?` expected a tool result wrapper with boolean `ok`")


def unwrap_module(v: Any) -> Any:
    return unwrap(v, MODULE_FAILURE)
