"""JSON encoding of interpreter state for snapshots (REFERENCE.md 9.3).

Plain JSON loses what the value model distinguishes (tuples vs lists, record key order
in stores that reorder objects, resources, non-finite numbers, empty slots, loop
cursors), so every non-scalar is tagged: ``{"t": [...]}`` tuple, ``{"r": [[k, v]...]}``
record, ``{"res": [type, alias]}``, ``{"f": "inf"}``, ``{"unset": 1}``, ``{"lc": ...}``
list cursor, ``{"rc": ...}`` range cursor, ``{"aj": ...}`` await join. Lists stay lists.
"""

from __future__ import annotations

import math
from typing import Any

from lashflow.interp.instructions import AwaitJoin, ListCursor, RangeCursor
from lashflow.interp.values import UNSET, Resource


def encode(v: Any) -> Any:
    t = type(v)
    if t is float:
        if v - v == 0.0:
            return v
        return {"f": "nan" if v != v else ("inf" if v > 0 else "-inf")}
    if t is str or t is bool or v is None:
        return v
    if t is list:
        return [encode(x) for x in v]
    if t is dict:
        return {"r": [[k, encode(x)] for k, x in v.items()]}
    if t is tuple:
        return {"t": [encode(x) for x in v]}
    if t is Resource:
        return {"res": [v.type, v.alias]}
    if v is UNSET:
        return {"unset": 1}
    if t is ListCursor:
        return {"lc": [encode(v.items), v.i, encode(v.saved)]}
    if t is RangeCursor:
        return {"rc": [v.start, v.step, v.n, v.i, encode(v.saved)]}
    if t is AwaitJoin:
        return {"aj": [encode(v.value), [encode(x) for x in v.results]]}
    raise TypeError(f"cannot snapshot {v!r}")


def decode(v: Any) -> Any:
    t = type(v)
    if t is float or t is str or t is bool or v is None:
        return v
    if t is int:
        return float(v)
    if t is list:
        return [decode(x) for x in v]
    if t is not dict or len(v) != 1:
        raise ValueError(f"not a snapshot value: {v!r}")
    (tag, data), = v.items()
    if tag == "r":
        return {k: decode(x) for k, x in data}
    if tag == "t":
        return tuple(decode(x) for x in data)
    if tag == "f":
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[data]
    if tag == "res":
        return Resource(data[0], data[1])
    if tag == "unset":
        return UNSET
    if tag == "lc":
        return ListCursor(decode(data[0]), data[1], decode(data[2]))
    if tag == "rc":
        return RangeCursor(data[0], data[1], data[2], data[3], decode(data[4]))
    if tag == "aj":
        return AwaitJoin(decode(data[0]), [decode(x) for x in data[1]])
    raise ValueError(f"unknown snapshot tag {tag!r}")
