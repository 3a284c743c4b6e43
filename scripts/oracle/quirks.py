"""lashflow's linker with some of the original's own typing defects put back.

docs/adr/0025 lists places where the original's linker is wrong and lashflow keeps its
answer. A program can show such a defect only indirectly: the original reports a link
error lashflow does not, or a different one first. ``link_as_original(source, quirks)``
links the program with lashflow's linker changed in exactly the named ways and gives its
first message (None if it links), so a rule can check that the original's message is
explained by those defects and nothing else.

Quirks (each named after its ADR class):

- ``plus-typed-number``: every ``a + b`` is a number (its operands checked as usual).
- ``int-and-float-typing``: arithmetic and negation give ``float``; ``int`` joined with
  ``float`` stays the union ``float | int``.
- ``empty-list-item-typed-null``: ``[]`` and ``()`` are ``list[null]``.
- ``literal-over-union-variable``: a string literal stored over a variable or element
  whose type is a union (or an enum) must fit that type.
- ``process-input-never-fits``: a process with no parameter or with several, used as a
  value, fits no ``Process<I, O>`` type (not even its own, nor ``Process<any, any>``).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Iterator

QUIRKS = ("plus-typed-number", "int-and-float-typing", "empty-list-item-typed-null",
          "literal-over-union-variable", "process-input-never-fits")


class _Unfitting:
    """The input of a process value under ``process-input-never-fits``: it reads as the
    real input type but fits nothing."""

    def __init__(self, shown: Any) -> None:
        self.shown = shown

    def render(self) -> str:
        return str(self.shown.render())


def walk(node: Any) -> Iterator[Any]:
    """Every AST node under ``node`` (record fields, lists, tuples)."""
    from lashflow.lang.record import fields_of

    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (list, tuple)):
            todo.extend(n)
        elif fields_of(n):
            yield n
            todo.extend(getattr(n, f) for f in fields_of(n))


def parsed(source: str) -> Any:
    from lashflow.lang import parse
    from lashflow.lang.diagnostics import LangError

    try:
        return parse(source)
    except LangError:
        return None


def _union_join(types: Any) -> Any:
    """``types.join`` without folding ``int`` into ``float``."""
    from lashflow.lang import types as T

    out: list[Any] = []
    for t in types:
        for m in (t.members if isinstance(t, T.UnionT) else (T.widen(t),)):
            if m not in out:
                out.append(m)
    return T.ANY if not out else out[0] if len(out) == 1 else T.UnionT(tuple(out))


def _literal_fits(linker: Any, e: Any, expected: Any) -> None:
    """The original's check of string literals against the type they are stored over."""
    from lashflow.lang import ast as A
    from lashflow.lang import types as T

    def refuse(value: str) -> Exception:
        return linker.fail(f"expected {expected.render()}, got incompatible literal \"{value}\"", e)

    if isinstance(e, A.String):
        if isinstance(expected, T.Enum) and e.value not in expected.members:
            raise refuse(e.value)
        if isinstance(expected, T.UnionT) and not any(
                m in (T.ANY, T.STR) or (isinstance(m, T.Enum) and e.value in m.members)
                for m in expected.members):
            raise refuse(e.value)
    elif isinstance(e, A.Ternary):  # each branch is stored, so each literal is checked
        _literal_fits(linker, e.then, expected)
        _literal_fits(linker, e.otherwise, expected)
    elif isinstance(e, A.RecordLit) and isinstance(expected, T.Obj):
        for key, value in e.entries:
            field = expected.get(key)
            if field is not None:
                _literal_fits(linker, value, field.type)
    elif isinstance(e, (A.ListLit, A.TupleLit)) and isinstance(expected, T.ListT):
        for item in e.items:
            _literal_fits(linker, item, expected.item)


def link_as_original(source: str, quirks: frozenset[str], missing: str | None = None) -> str | None:
    """The first link message of ``source`` on lashflow's linker with ``quirks``; None if
    it links, ``"does not parse"`` if it does not parse."""
    from lashflow.lang import ast as A
    from lashflow.lang import types as T
    from lashflow.lang.catalog import Catalog
    from lashflow.lang.diagnostics import LangError
    from lashflow.lang.linker import Linker, _index_type

    module = parsed(source)
    if module is None:
        return "does not parse"

    class Original(Linker):
        def binary(self, e: A.Binary, env: Any) -> T.SType:
            result = super().binary(e, env)
            if e.op == "+" and "plus-typed-number" in quirks:
                return T.FLOAT
            if "int-and-float-typing" in quirks and result == T.INT:
                return T.FLOAT
            return result

        def expr(self, e: Any, env: Any) -> T.SType:
            if ("empty-list-item-typed-null" in quirks and isinstance(e, (A.ListLit, A.TupleLit))
                    and not e.items):
                return T.ListT(T.NULL)
            result = super().expr(e, env)
            if "int-and-float-typing" in quirks and isinstance(e, A.Unary) and e.op == "-":
                return T.FLOAT
            return result

        def field_type(self, t: T.SType, name: str, node: Any) -> T.SType:
            if isinstance(t, T.Resource):  # read at run time only (resource-field-read-at-link)
                return T.ANY
            return super().field_type(t, name, node)

        def input_type(self, name: str) -> Any:
            real = super().input_type(name)
            if "process-input-never-fits" in quirks and len(self.params[name]) != 1:
                return _Unfitting(real)
            return real

        def stmt(self, s: Any, env: Any) -> None:
            if "literal-over-union-variable" in quirks and isinstance(s, A.Assign):
                expected = env.get(s.name)
                for step in s.steps if expected is not None else ():
                    expected = (_index_type(expected) if isinstance(step, A.IndexStep)
                                else self.field_type(expected, step.name, step))
                if expected is not None:
                    _literal_fits(self, s.value, expected)
            super().stmt(s, env)

    operations = sorted({n.operation for n in walk(module) if isinstance(n, A.ReceiverCall)}
                        - {missing})  # (an operation the original found no tool for)
    kept, kept_check = T.join, T.check_assignable
    if "int-and-float-typing" in quirks:
        T.join = _union_join  # type: ignore[assignment]  # for this one check, restored below
    if "process-input-never-fits" in quirks:
        def check_assignable(actual: Any, expected: Any) -> None:
            if (isinstance(actual, T.ProcessT) and isinstance(actual.input, _Unfitting)
                    and isinstance(expected, T.ProcessT)):
                raise T.Mismatch()
            kept_check(actual, expected)
        T.check_assignable = check_assignable  # type: ignore[assignment]  # restored below
    try:
        Original(module, Catalog.permissive({"tools": operations or ["noop"]})).run()
    except LangError as exc:
        return exc.diagnostic.message
    finally:
        T.join, T.check_assignable = kept, kept_check  # type: ignore[assignment]
    return None


def explaining_quirk(source: str, message: str) -> str | None:
    """The first quirk of the smallest set of them under which lashflow's linker reports
    exactly ``message`` (the original's first link error), if there is one."""
    found = re.match(r"resource type `Tools` does not expose operation `([^`]*)`$", message)
    missing = found[1] if found else None
    wanted = ({message, f"module `tools` does not expose operation `{missing}`"}
              if missing is not None else {message})  # (`tools.r""`: the empty name)
    for size in range(1, len(QUIRKS) + 1):
        for combo in itertools.combinations(QUIRKS, size):
            if link_as_original(source, frozenset(combo), missing) in wanted:
                return combo[0]
    return None
