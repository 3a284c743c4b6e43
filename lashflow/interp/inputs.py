"""Checking a run's input JSON against the process parameters before anything runs.

Missing, extra or ill-typed parameters are refused with ``input_invalid`` and the JSON
path of the first problem, so the caller knows which field to fix.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputInvalid
from ..json_kinds import check_json_text, json_kind
from ..json_text import ascii_compact
from ..lang import ast
from ..lang.names import SCALAR_JSON_TYPES



def _shown(value: Any) -> str:
    """A wrong string quoted (shortened, escaped), any other value by its kind."""
    if isinstance(value, str):
        return ascii_compact(value if len(value) <= 40 else value[:40] + "...")
    return json_kind(value)


def render_type(t: ast.TypeExpr) -> str:
    """Short human rendering for error messages."""
    if isinstance(t, ast.TypeName):
        return t.name
    if isinstance(t, ast.TypeNull):
        return "null"
    if isinstance(t, ast.TypeStringLiteral):
        return f'"{t.value}"'
    if isinstance(t, ast.TypeEnum):
        return "enum[" + ", ".join(f'"{m}"' for m in t.members) + "]"
    if isinstance(t, ast.TypeList):
        return f"list[{render_type(t.item)}]"
    if isinstance(t, ast.TypeUnion):
        return " | ".join(render_type(m) for m in t.members)
    if isinstance(t, ast.TypeObject):
        fields = ", ".join(f"{f.name}: {render_type(f.type)}{'?' if f.optional else ''}"
                           for f in t.fields)
        return "{ " + fields + " }"
    return "any"


class InputChecker:
    """Checks JSON against type expressions, resolving ``type`` declarations by name."""

    def __init__(self, module: ast.Module, resource_types: dict[str, str]) -> None:
        self.types = {decl.name: decl.type for decl in module.types}
        self.resource_types = resource_types  # resource type name -> its tool module

    def problem(self, value: Any, t: ast.TypeExpr, path: str, depth: int = 0) -> str | None:
        if depth > 64:
            return None
        if isinstance(t, ast.TypeName):
            if t.name not in SCALAR_JSON_TYPES:
                if t.name in self.types:
                    return self.problem(value, self.types[t.name], path, depth + 1)
                module = self.resource_types.get(t.name)
                if module is not None and value != module:
                    return (f"{path}: expected the module name \"{module}\" (a {t.name} is "
                            f"that module's authority), got {_shown(value)}")
                return None
            scalar = SCALAR_JSON_TYPES[t.name]
            if scalar is None:
                return None
            if scalar == "integer":
                ok = (isinstance(value, int) and not isinstance(value, bool)) or (
                    isinstance(value, float) and value.is_integer())
            elif scalar == "number":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            else:
                ok = json_kind(value) == scalar
            return None if ok else f"{path}: expected {t.name}, got {json_kind(value)}"
        if isinstance(t, ast.TypeNull):
            return None if value is None else f"{path}: expected null, got {json_kind(value)}"
        if isinstance(t, ast.TypeStringLiteral):
            return None if value == t.value else f'{path}: expected "{t.value}"'
        if isinstance(t, ast.TypeEnum):
            if isinstance(value, str) and value in t.members:
                return None
            return f"{path}: expected one of [{', '.join(t.members)}], got {value!r}"
        if isinstance(t, ast.TypeList):
            if not isinstance(value, list):
                return f"{path}: expected a list, got {json_kind(value)}"
            for index, item in enumerate(value):
                found = self.problem(item, t.item, f"{path}[{index}]", depth + 1)
                if found:
                    return found
            return None
        if isinstance(t, ast.TypeUnion):
            problems = [self.problem(value, m, path, depth + 1) for m in t.members]
            if any(p is None for p in problems):
                return None
            return f"{path}: expected {render_type(t)}, got {json_kind(value)}"
        if isinstance(t, ast.TypeObject):
            if not isinstance(value, dict):
                return f"{path}: expected an object, got {json_kind(value)}"
            for f in t.fields:
                if f.name not in value:
                    if not f.optional:
                        return f"{path}: missing required field `{f.name}`"
                    continue
                found = self.problem(value[f.name], f.type, f"{path}.{f.name}", depth + 1)
                if found:
                    return found
            return None
        return None


def check_input(module: ast.Module, process: ast.ProcessDecl | None, data: Any,
                resource_types: dict[str, str]) -> None:
    """Raise ``InputInvalid`` unless ``data`` is a JSON object fitting the parameters."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputInvalid(f"$: the run input must be a JSON object, got {json_kind(data)}", path="$")
    check_json_text(data)
    if process is None:
        return  # a main block takes its input keys as globals
    checker = InputChecker(module, resource_types)
    names = [p.name for p in process.params]
    for param in process.params:
        if param.name not in data:
            raise InputInvalid(f"$.{param.name}: missing parameter `{param.name}` of process "
                               f"`{process.name}` (expects {render_type(param.type)})",
                               path=f"$.{param.name}")
        found = checker.problem(data[param.name], param.type, f"$.{param.name}")
        if found:
            raise InputInvalid(found, path=found.split(":", 1)[0])
    for key in data:
        if key not in names:
            raise InputInvalid(f"$.{key}: process `{process.name}` has no parameter `{key}` "
                               f"(parameters: {', '.join(names) or 'none'})", path=f"$.{key}")
