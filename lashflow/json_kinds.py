"""The name of a JSON value's kind in messages (``got string``): one spelling for the
input check, tool validation and anything else that tells a user what it received."""

from __future__ import annotations

from typing import Any


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
