"""``Type { ... }`` values and the ``validate`` builtin.

A Type value is the record ``{"$lash_type": <JSON schema>}``; ``validate`` checks the
small schema subset those records use and reports the first failure with a JSONPath.
"""

from __future__ import annotations

from typing import Any, Callable

from lashflow.lang import ast
from lashflow.lang.names import SCALAR_JSON_TYPES
from lashflow.interp.errors import type_error, value_error
from lashflow.interp.limits import tick
from lashflow.interp.values import display

TYPE_KEY = "$lash_type"


Resolve = Callable[[str], Any]


def schema_of(texpr: Any, resolve: Resolve) -> dict[str, Any]:
    """The JSON schema of a type expression; named refs are runtime Type variables."""
    if isinstance(texpr, ast.TypeName):
        if texpr.name in SCALAR_JSON_TYPES:
            json_type = SCALAR_JSON_TYPES[texpr.name]
            return {} if json_type is None else {"type": json_type}
        value = resolve(texpr.name)
        if type(value) is dict and type(value.get(TYPE_KEY)) is dict:
            return value[TYPE_KEY]
        raise type_error(f"`{texpr.name}` is not a Type value")
    if isinstance(texpr, ast.TypeNull):
        return {"type": "null"}
    if isinstance(texpr, ast.TypeStringLiteral):
        return {"type": "string", "enum": [texpr.value]}
    if isinstance(texpr, ast.TypeEnum):
        return {"type": "string", "enum": list(texpr.members)}
    if isinstance(texpr, ast.TypeList):
        return {"type": "array", "items": schema_of(texpr.item, resolve)}
    if isinstance(texpr, ast.TypeUnion):
        return {"anyOf": [schema_of(m, resolve) for m in texpr.members]}
    if isinstance(texpr, ast.TypeObject):
        return {
            "type": "object",
            "properties": {f.name: schema_of(f.type, resolve) for f in texpr.fields},
            "required": [f.name for f in texpr.fields if not f.optional],
            "additionalProperties": False,
        }
    return {}  # Process<..>, TriggerHandle<..>


def _kind(v: Any) -> str:
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "boolean"
    if t is float:
        return "number"
    if t is str:
        return "string"
    if t is list or t is tuple:
        return "array"
    return "object"


def _matches_type(v: Any, name: str) -> bool:
    t = type(v)
    if name == "integer":
        return t is float and v.is_integer()
    if name == "number":
        return t is float and v - v == 0.0
    if name == "string":
        return t is str
    if name == "boolean":
        return t is bool
    if name == "null":
        return v is None
    if name == "object":
        return t is dict
    if name == "array":
        return t is list or t is tuple
    return True


def _describe(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " | ".join(_describe(s) for s in schema["anyOf"])
    if "enum" in schema:  # a literal or enum member of a union, as the original names it
        return f"enum[{', '.join(schema['enum'])}]"
    return schema.get("type", "any")


def first_failure(v: Any, schema: dict[str, Any], path: str = "$") -> tuple[str, str] | None:
    """``(path, reason)`` of the first mismatch in declaration/item order, or None."""
    variants = schema.get("anyOf")
    if variants is not None:
        for sub in variants:
            if first_failure(v, sub, path) is None:
                return None
        names = ", ".join(_describe(s) for s in variants)
        return path, f"expected one of [{names}], got {_kind(v)}"
    name = schema.get("type")
    if name is None:
        return None
    if not _matches_type(v, name):
        return path, f"expected {name}, got {_kind(v)}"
    members = schema.get("enum")
    if members is not None and v not in members:
        return path, f"expected one of [{', '.join(members)}], got {display(v)}"
    if name == "object":
        tick(1)  # shared sub-records can make the walk exponential: every visit costs
        required = schema.get("required", [])
        for field, sub in schema.get("properties", {}).items():
            if field not in v:
                if field in required:
                    return path, f"missing required field `{field}`"
                continue
            failure = first_failure(v[field], sub, f"{path}.{field}")
            if failure is not None:
                return failure
    elif name == "array" and "items" in schema:
        tick(2 * len(v))
        for i, item in enumerate(v):
            failure = first_failure(item, schema["items"], f"{path}[{i}]")
            if failure is not None:
                return failure
    return None


def validate(v: Any, t: Any) -> Any:
    if type(t) is not dict or type(t.get(TYPE_KEY)) is not dict:
        raise type_error("`validate` requires a Type literal as the second argument")
    failure = first_failure(v, t[TYPE_KEY])
    if failure is not None:
        raise value_error(f"validation failed: {failure[0]}: {failure[1]}")
    return v
