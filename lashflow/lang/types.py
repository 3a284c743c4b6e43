"""Static (link-time) types: gradual typing, checked where the types are known.

Types are small immutable values. ``any``, ``dict``, named references, tool result
wrappers and unions containing one of them are *gradual*: accepted everywhere and never
the cause of an error. Rendering follows the original's ``format_type_expr`` so link
messages match it character for character (``{  }`` for the empty object).
"""

from __future__ import annotations

from typing import Any, Iterable, Union

from lashflow.lang.record import record


@record(frozen=True)
class Scalar:
    name: str  # str int float bool null dict any

    def render(self) -> str:
        return self.name


@record(frozen=True)
class StrLit:
    """A string literal: a ``str`` that remembers its value (for enum checks)."""

    value: str

    def render(self) -> str:
        return "str"


@record(frozen=True)
class Enum:
    members: tuple[str, ...]

    def render(self) -> str:
        return "enum[" + ", ".join(quote(m) for m in self.members) + "]"


@record(frozen=True)
class ListT:
    item: "SType"

    def render(self) -> str:
        return f"list[{self.item.render()}]"


@record(frozen=True)
class Field:
    name: str
    type: "SType"
    optional: bool = False


@record(frozen=True)
class Obj:
    fields: tuple[Field, ...]
    open: bool = False  # from a schema without `additionalProperties: false`

    def get(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def render(self) -> str:
        parts = [f"{f.name}: {f.type.render()}{'?' if f.optional else ''}" for f in self.fields]
        return "{ " + ", ".join(parts) + " }"


@record(frozen=True)
class UnionT:
    members: tuple["SType", ...]

    def render(self) -> str:
        return " | ".join(m.render() for m in self.members)


@record(frozen=True)
class ProcessT:
    input: "SType"
    output: "SType"

    def render(self) -> str:
        return f"Process<{self.input.render()}, {self.output.render()}>"


@record(frozen=True)
class TriggerT:
    item: "SType"

    def render(self) -> str:
        return f"TriggerHandle<{self.item.render()}>"


@record(frozen=True)
class Ref:
    """A named type that is not resolved statically (gradual)."""

    name: str

    def render(self) -> str:
        return self.name


@record(frozen=True)
class Resource:
    """A module authority: a host module value (``tools``) or a parameter typed ``Tools``."""

    type_name: str
    module: str | None = None

    def render(self) -> str:
        return self.type_name


@record(frozen=True)
class Handle:
    """A process handle from ``start``; awaiting it gives a wrapper of ``output``."""

    output: "SType"

    def render(self) -> str:  # as the original shows it: the output, or anything
        return join([self.output, ANY]).render()


@record(frozen=True)
class Wrapper:
    """A tool/process result wrapper ``{ok, value|error}``; ``?`` yields ``inner``."""

    inner: "SType"

    def render(self) -> str:
        return "any"  # the original types a call's result as its operation's output: any


SType = Union[Scalar, StrLit, Enum, ListT, Obj, UnionT, ProcessT, TriggerT, Ref, Resource,
              Handle, Wrapper]

ANY = Scalar("any")
STR = Scalar("str")
INT = Scalar("int")
FLOAT = Scalar("float")
BOOL = Scalar("bool")
NULL = Scalar("null")
DICT = Scalar("dict")
LIST_ANY = ListT(ANY)

# The static type of each scalar type name (the names are listed in ``lang.names``).
SCALAR_TYPES: dict[str, Scalar] = {"str": STR, "int": INT, "float": FLOAT, "bool": BOOL,
                                   "dict": DICT, "any": ANY}


def quote(text: str) -> str:
    """A literal in a type or message: between double quotes, as written (the original
    escapes nothing there)."""
    return f'"{text}"'


def is_gradual(t: SType) -> bool:
    if isinstance(t, Scalar):
        return t.name in ("any", "dict")
    if isinstance(t, (Ref, Wrapper, Handle)):
        return True
    if isinstance(t, UnionT):
        return any(is_gradual(m) for m in t.members)
    return False


def is_scalar(t: SType) -> bool:
    """str/int/float/bool/null/enum (the operands ``- * / % <`` ... accept)."""
    if isinstance(t, Scalar):
        return t.name in ("str", "int", "float", "bool", "null")
    if isinstance(t, (StrLit, Enum)):
        return True
    if isinstance(t, UnionT):
        return all(is_scalar(m) for m in t.members)
    return False


def category(t: SType) -> str:
    """The equality category of 5.5: scalar / list / object / process / trigger."""
    if is_scalar(t):
        return "scalar"
    if isinstance(t, ListT):
        return "list"
    if isinstance(t, Obj):
        return "object"
    if isinstance(t, ProcessT):
        return "process"
    if isinstance(t, TriggerT):
        return "trigger"
    if isinstance(t, UnionT):
        cats = {category(m) for m in t.members}
        return cats.pop() if len(cats) == 1 else "mixed"
    return "other"


def widen(t: SType) -> SType:
    """Forget literal values (a variable holding "a" is a ``str``)."""
    if isinstance(t, StrLit):
        return STR
    return t


def join(types: Iterable[SType]) -> SType:
    """The union of several types, flattened and de-duplicated (order kept). Two members
    that read the same are one, as in the original, whose types are what they print as
    (``list[any]`` of a tool's result and ``list[any]`` are one type there)."""
    out: list[SType] = []
    seen: set[str] = set()
    for t in types:
        t = widen(t)
        members = t.members if isinstance(t, UnionT) else (t,)
        for m in members:
            shown = m.render()
            if shown not in seen:
                seen.add(shown)
                out.append(m)
    if not out:
        return ANY
    if len(out) == 1:
        return out[0]
    if INT in out and FLOAT in out:
        out.remove(INT)
        if len(out) == 1:
            return out[0]
    return UnionT(tuple(out))


class Mismatch(Exception):
    """``check_assignable`` failure; ``message`` overrides the generic wording if set."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "")
        self.message = message


def _unchecked(t: SType) -> bool:
    """``any``, an unresolved named type, or a tool or process result: fits anywhere."""
    return t == ANY or isinstance(t, (Ref, Wrapper, Handle))


def check_assignable(actual: SType, expected: SType) -> None:
    """Raise ``Mismatch`` if a value of ``actual`` type cannot be used as ``expected``.
    As in the original, only ``any`` is unchecked here: ``dict`` fits an object type (and
    takes one) but nothing else, and a union fits if each of its members does."""
    if _unchecked(actual) or _unchecked(expected) or actual == expected:
        return
    if isinstance(actual, UnionT):
        for member in actual.members:  # each may be; an `any` member does not excuse the rest
            check_assignable(member, expected)
        return
    if isinstance(expected, UnionT):
        for member in expected.members:
            try:
                check_assignable(actual, member)
                return
            except Mismatch:
                pass
        if isinstance(actual, StrLit):
            raise Mismatch(
                f"expected {expected.render()}, got incompatible literal {quote(actual.value)}")
        raise Mismatch()
    if expected == DICT or actual == DICT:
        if isinstance(actual, Obj) or isinstance(expected, Obj):
            return
        raise Mismatch()
    if isinstance(expected, Scalar):
        if isinstance(actual, Scalar):
            if actual.name == expected.name:
                return
            if actual.name == "int" and expected.name == "float":
                return
            raise Mismatch()
        if isinstance(actual, (StrLit, Enum)) and expected.name == "str":
            return
        raise Mismatch()
    if isinstance(expected, Enum):
        if actual == STR:  # as in the original: text may be any member; the run checks it
            return
        if isinstance(actual, StrLit):
            if actual.value in expected.members:
                return
            raise Mismatch(
                f"expected {expected.render()}, got incompatible literal {quote(actual.value)}"
            )
        if isinstance(actual, Enum) and set(actual.members) <= set(expected.members):
            return
        raise Mismatch()
    if isinstance(expected, StrLit):
        if isinstance(actual, StrLit) and actual.value == expected.value:
            return
        raise Mismatch()
    if isinstance(expected, ListT):
        if isinstance(actual, ListT):
            check_assignable(actual.item, expected.item)
            return
        raise Mismatch()
    if isinstance(expected, Obj):
        if not isinstance(actual, Obj):
            raise Mismatch()
        for f in expected.fields:
            have = actual.get(f.name)
            if have is None:
                if f.optional:
                    continue
                raise Mismatch()
            if have.optional and not f.optional:
                raise Mismatch()
            check_assignable(have.type, f.type)
        return
    if isinstance(expected, Resource):
        if isinstance(actual, Resource) and actual.type_name == expected.type_name:
            return
        raise Mismatch()
    if isinstance(expected, ProcessT):
        if isinstance(actual, ProcessT):  # as the original checks them: each side fits
            check_assignable(actual.input, expected.input)
            check_assignable(actual.output, expected.output)
            return
        raise Mismatch()
    if isinstance(expected, TriggerT):
        if isinstance(actual, TriggerT):
            return
        raise Mismatch()
    raise Mismatch()


def from_schema(schema: Any, depth: int = 0) -> SType:
    """A static type from a tool's JSON Schema (unknown shapes are gradual)."""
    if not isinstance(schema, dict) or depth > 20:
        return ANY
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return Enum(tuple(schema["enum"]))
    if "const" in schema and isinstance(schema["const"], str):
        return Enum((schema["const"],))
    for key in ("anyOf", "oneOf"):
        if key in schema and isinstance(schema[key], list):
            return join(from_schema(s, depth + 1) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return join(from_schema({**schema, "type": k}, depth + 1) for k in kind)
    if kind == "string":
        return STR
    if kind == "integer":
        return INT
    if kind == "number":
        return FLOAT
    if kind == "boolean":
        return BOOL
    if kind == "null":
        return NULL
    if kind == "array":
        return ListT(from_schema(schema.get("items"), depth + 1))
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return DICT
        required = set(schema.get("required") or ())
        fields = tuple(
            Field(name, from_schema(sub, depth + 1), name not in required)
            for name, sub in props.items()
        )
        return Obj(fields, open=schema.get("additionalProperties", True) is not False)
    return ANY
