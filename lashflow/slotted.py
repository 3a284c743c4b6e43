"""``Slotted``: value classes written out by hand, with what a dataclass gave them.

A dataclass compiles its methods from generated text when its module is imported (about
2.5 M instructions a class, more when frozen), and every `lashflow resume` imports the
store's rows, the interpreter's effects and the engine's outcomes before its first step
(ADR 0044). These classes are built on every step, so each writes its own ``__slots__``
and ``__init__`` (as fast as a generated one, and compiled once into the bytecode
cache); ``Slotted`` adds what a dataclass added beside it, reading the field names from
``__slots__``: equality field by field within one class, the same repr, no hash
(``Frozen``: no assignment, and a hash). ``replace`` is ``dataclasses.replace`` for them.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, TypeVar

S = TypeVar("S", bound="Slotted")
# each class's field values as one tuple, read in C (pickling a commit reads thousands)
_FIELDS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


class Slotted:
    """Base of a value class whose ``__slots__`` name its fields, in ``__init__``'s order."""

    __slots__: tuple[str, ...] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable values, as a dataclass's

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in type(self).__slots__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Slotted)
        return self._values() == other._values()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class and field values (``__init__`` takes them in order): a
        store's writer process receives commits this way (ADR 0050)."""
        cls = type(self)
        fields = _FIELDS.get(cls)
        if fields is None:
            names = cls.__slots__
            getter = attrgetter(*names)
            fields = _FIELDS[cls] = getter if len(names) > 1 else lambda v: (getter(v),)
        return cls, fields(self)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__slots__)
        return f"{type(self).__qualname__}({shown})"


class Frozen(Slotted):
    """A ``Slotted`` whose fields are not assigned after ``__init__`` (which sets them
    with ``object.__setattr__``), and which hashes, as a frozen dataclass."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # Slotted's is None
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


def slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each slot ``cls`` declares, in ``__slots__`` order. A ``Frozen``
    class built on every call sets its fields through them: about 35 ns a field against
    70 for ``object.__setattr__``, which looks the name up on the class each time."""
    return tuple(cls.__dict__[name].__set__ for name in cls.__dict__["__slots__"])


def replace(original: S, /, **changes: Any) -> S:
    """A copy of ``original`` with ``changes``, made through its ``__init__``."""
    fields = {name: getattr(original, name) for name in type(original).__slots__}
    fields.update(changes)
    return type(original)(**fields)


__all__ = ["Frozen", "Slotted", "replace", "slot_setters"]
