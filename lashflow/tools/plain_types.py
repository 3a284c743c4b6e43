"""Tools whose parameters are plain JSON types, checked without pydantic.

Most tools take ``int``, ``float``, ``str``, ``bool``, ``dict``, ``list`` or ``Any``.
For those, the JSON schema is written here (exactly what pydantic would produce; a test
keeps the two equal) and a call whose values already have the declared types is
accepted by an ``isinstance``-level check. Anything else -- another annotation, a value
pydantic would coerce or refuse, a missing or extra key -- goes to pydantic, so
behaviour and error messages are pydantic's. The point is start-up time: a resumed run
reaches its first step without importing pydantic or building models, and each call skips a model validation.
"""

from __future__ import annotations

import math
from typing import Any

from lashflow.tools._json import plain_json

REQUIRED: Any = ...  # the marker the decorator uses for a parameter without default

_EXACT = 2**53  # ints up to this size are exactly a float
_SCALARS: dict[Any, str] = {int: "integer", float: "number", str: "string", bool: "boolean"}
_DEFAULT_TYPES = (type(None), bool, int, float, str)  # immutable: safe to hand out as-is


def plain_schema(annotation: Any) -> dict[str, Any] | None:
    """The JSON schema of a plain annotation, or None if it is not one."""
    if annotation is Any:
        return {}
    kind = _SCALARS.get(annotation)
    if kind is not None:
        return {"type": kind}
    if annotation is dict:
        return {"additionalProperties": True, "type": "object"}
    if annotation is list:
        return {"items": {}, "type": "array"}
    return None


def _title(name: str) -> str:
    return name.title().replace("_", " ")


def plain_input_schema(model_name: str, fields: dict[str, tuple[Any, Any]]) -> dict[str, Any] | None:
    """The input model's schema if every field is plain with an immutable default."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, (annotation, default) in fields.items():
        schema = plain_schema(annotation)
        if schema is None:
            return None
        prop: dict[str, Any] = {}
        if default is REQUIRED:
            required.append(name)
        elif type(default) in _DEFAULT_TYPES:
            prop["default"] = default
        else:
            return None
        prop["title"] = _title(name)
        prop.update(schema)
        properties[name] = prop
    result: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        result["required"] = required
    result["title"] = model_name
    result["type"] = "object"
    return result


def _fits(annotation: Any, value: Any) -> bool:
    """True when pydantic would return ``value`` unchanged (up to copying containers)."""
    if annotation is Any:
        return True
    return type(value) is annotation


def fast_arguments(fields: dict[str, tuple[Any, Any]], data: Any) -> dict[str, Any] | None:
    """Keyword arguments for the tool, or None when pydantic must decide."""
    if type(data) is not dict or len(data) > len(fields):
        return None
    kwargs: dict[str, Any] = {}
    found = 0
    for name, (annotation, default) in fields.items():
        if name in data:
            value = data[name]
            if not _fits(annotation, value):
                if annotation is float and type(value) is int and abs(value) <= _EXACT:
                    value = float(value)  # what pydantic makes of `1` for a float (lax)
                else:
                    return None
            kwargs[name] = value
            found += 1
        elif default is REQUIRED:
            return None
        else:
            kwargs[name] = default
    if found != len(data):  # an unknown key: pydantic words the refusal
        return None
    return kwargs


def fast_output(annotation: Any, value: Any) -> bool:
    """True when ``value`` is already what pydantic would dump for a plain annotation
    (a scalar, or a ``dict``/``list`` of plain JSON data)."""
    if annotation is float:
        return type(value) is float and math.isfinite(value)
    if annotation is dict or annotation is list:
        return type(value) is annotation and plain_json(value)
    return annotation in (int, str, bool) and type(value) is annotation
