"""JSON helpers shared by results, outcomes and the budget projector."""

from __future__ import annotations

import json
from typing import Any

_PLAIN = (str, int, float, bool, type(None))


def jsonable(value: Any) -> Any:
    """Turn a tool's value into plain JSON data (pydantic models, dataclasses, tuples...).

    Plain JSON values take a fast path; anything else goes through pydantic's encoder,
    imported lazily so ``import lashflow`` stays light.
    """
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, list) and all(isinstance(v, _PLAIN) for v in value):
        return value
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


def compact(value: Any) -> str:
    """Compact JSON text (no spaces, non-ASCII kept as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
