"""JSON helpers shared by results, outcomes and the budget projector."""

from __future__ import annotations

import math
import sys
from typing import Any

from lashflow.json_text import compact, loads

_PLAIN = (str, int, float, bool, type(None))


_JSON_ATOMS = frozenset({str, int, bool, type(None)})
_WALK_LIMIT = 10_000  # beyond this many values pydantic's own (compiled) walk is faster


def plain_json(value: Any) -> bool:
    """True when ``value`` is JSON data a JSON dump leaves as it is: dicts with ``str``
    keys, lists, strings, ints, bools, None and finite floats (no subclasses, tuples,
    sets, enums or models, which pydantic converts)."""
    stack = [value]
    for _ in range(_WALK_LIMIT):
        if not stack:
            return True
        item = stack.pop()
        kind = type(item)
        if kind in _JSON_ATOMS:
            continue
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict:
            for key, member in item.items():
                if type(key) is not str:
                    return False
                stack.append(member)
        elif kind is list:
            stack.extend(item)
        else:
            return False
    return not stack


def jsonable(value: Any) -> Any:
    """Turn a tool's value into plain JSON data (pydantic models, dataclasses, tuples...).

    Plain JSON values take a fast path; anything else goes through pydantic's encoder,
    imported lazily so ``import lashflow`` stays light.
    """
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, list) and all(isinstance(v, _PLAIN) for v in value):
        return list(value)  # a copy: the tool may go on changing its own list
    # pydantic_core copies plain data fastest, but its first import (~15 ms) must not
    # stall a batch's other calls: until something has imported it, plain data is
    # copied here (a JSON round trip, at C speed)
    if "pydantic_core" not in sys.modules and plain_json(value):
        try:
            return loads(compact(value))
        except RecursionError:  # nested too deep for the C encoder: pydantic's walk
            pass
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)

