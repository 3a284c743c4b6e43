"""Names of the language's types that several stages share, in a module light enough
for any of them to import (no dataclasses, nothing to build).

``SCALAR_JSON_TYPES``: the scalar type names and the JSON Schema type a value of each must
have (None: any JSON). The JSON Schema spellings (``string``, ``integer``, ``number``,
``boolean``, ``object``) are accepted in source and normalised by the parser to these
names, so the linker, the input check and Type schemas look them up here and nowhere else.
"""

from __future__ import annotations

from typing import Iterable

SCALAR_JSON_TYPES: dict[str, str | None] = {
    "str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
    "any": None,
}
JSON_TYPE_ALIASES: dict[str, str] = {json: name for name, json in SCALAR_JSON_TYPES.items()
                                     if json is not None}


def resource_type_name(module: str) -> str:
    """The type of a tool module's authority: ``tools`` -> ``Tools``,
    ``workspace.default`` -> ``WorkspaceDefault``. Used by the linker, the compiler and
    the input check alike, so a parameter typed with it links, checks and runs."""
    return "".join(part[:1].upper() + part[1:] for part in module.split("."))


def did_you_mean(name: str, candidates: Iterable[object]) -> str | None:
    """``did you mean `x`?`` for the closest known name, if one is close enough."""
    import difflib

    close = difflib.get_close_matches(name, [str(c) for c in candidates], n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None
