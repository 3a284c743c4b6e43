"""pydantic validation errors condensed to one line per field, with JSON paths.

pydantic's own text spans several lines per field and ends each with a URL; a user
reading a failed run (or an HTTP client reading a 400) wants where and what:
``$.order.total: expected number, got string``.
"""

from __future__ import annotations

from typing import Any

from ..json_kinds import json_kind

_EXPECTED = {
    "string_type": "expected string", "float_type": "expected number",
    "float_parsing": "expected number", "int_type": "expected integer",
    "int_parsing": "expected integer", "int_from_float": "expected integer",
    "bool_type": "expected boolean", "bool_parsing": "expected boolean",
    "dict_type": "expected object", "model_type": "expected object",
    "model_attributes_type": "expected object", "list_type": "expected list",
    "missing": "missing", "extra_forbidden": "not allowed here",
}


def json_path(loc: tuple[Any, ...], root: str = "$") -> str:
    path = root
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def condensed(exc: Any, root: str = "$") -> str:
    """``exc`` (a pydantic ``ValidationError``) as one line per problem."""
    lines = []
    for error in exc.errors(include_url=False):
        what = _EXPECTED.get(error["type"])
        if what is None:
            message = str(error["msg"])
            what = message[:1].lower() + message[1:]
        elif what.startswith("expected") and "input" in error:
            what += f", got {json_kind(error['input'])}"
        lines.append(f"{json_path(tuple(error['loc']), root)}: {what}")
    return "\n".join(lines)
