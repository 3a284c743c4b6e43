"""``@record``: the syntax tree's classes, made without ``dataclasses``.

A dataclass compiles its ``__init__``, ``__repr__`` and ``__eq__`` from generated text
when its module is imported: about 2 M instructions a class, and the syntax tree has
over fifty, all loaded by every process that resumes a run (ADR 0040). A record shares
one ``__init__``, ``__eq__`` and ``__repr__`` among all its classes, each reading the
class's field names, so defining one costs a class creation. What a record keeps of a
dataclass with ``slots=True``: positional and keyword construction with defaults and
``field(default_factory=...)``, equality field by field (same class only), the repr,
``__match_args__``, ``__slots__``, with ``hashable=True`` a hash of the fields, and with
``frozen=True`` that too and no assignment after ``__init__``; copies and pickles.
``fields_of`` names a record's fields (``dataclasses.fields`` does not know records) or a
dataclass's.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from operator import attrgetter
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made anew for each instance (a list, say)."""
    return _Factory(default_factory)


def fields_of(node: Any) -> tuple[str, ...]:
    """The field names, in order, of a record or a dataclass instance; ``()`` for
    anything else (for walking trees that hold both)."""
    names = getattr(type(node), "__record_fields__", None)
    if type(names) is tuple:
        return names
    if hasattr(type(node), "__dataclass_fields__") and not isinstance(node, type):
        import dataclasses

        return tuple(f.name for f in dataclasses.fields(node))
    return ()


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    names: tuple[str, ...] = cls.__record_fields__
    given = len(args)
    if given > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} positional arguments but "
                        f"{given} were given")
    setter = object.__setattr__
    for name, value in zip(names, args):
        setter(self, name, value)
    if given == len(names) and not kwargs:
        return
    defaults: dict[str, Any] = cls.__record_defaults__
    for name in names[given:]:
        if name in kwargs:
            value = kwargs.pop(name)
        elif name in defaults:
            value = defaults[name]
            if type(value) is _Factory:
                value = value.make()
        else:
            raise TypeError(f"{cls.__name__}() missing required argument: '{name}'")
        setter(self, name, value)
    if kwargs:
        raise TypeError(f"{cls.__name__}() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")


def _values(self: Any) -> tuple[Any, ...]:
    return type(self).__record_values__(self)


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _getstate(self: Any) -> tuple[Any, ...]:
    return _values(self)


def _setstate(self: Any, state: tuple[Any, ...]) -> None:
    for name, value in zip(type(self).__record_fields__, state):
        object.__setattr__(self, name, value)


def _frozen(self: Any, name: str, *value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _repr(self: Any) -> str:
    cls = type(self)
    shown = ", ".join(f"{name}={value!r}"
                      for name, value in zip(cls.__record_fields__, _values(self)))
    return f"{cls.__qualname__}({shown})"


def _make(cls: type, hashable: bool, frozen: bool) -> type:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    body = {key: value for key, value in cls.__dict__.items()
            if key not in names and key not in ("__dict__", "__weakref__")}
    body["__record_defaults__"] = {name: cls.__dict__[name] for name in names
                                   if name in cls.__dict__}
    if len(names) == 1:
        only = attrgetter(names[0])
        body["__record_values__"] = lambda node: (only(node),)
    else:
        body["__record_values__"] = attrgetter(*names) if names else (lambda node: ())
    body.update(__slots__=names, __record_fields__=names, __match_args__=names,
                __init__=_init, __eq__=_eq, __repr__=_repr, __getstate__=_getstate,
                __setstate__=_setstate,
                __hash__=_hash if hashable or frozen else None)
    if frozen:
        body.update(__setattr__=_frozen, __delattr__=_frozen)
    return type(cls)(cls.__name__, cls.__bases__, body)


@overload
def record(cls: T, /) -> T: ...
@overload
def record(*, hashable: bool = False, frozen: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(eq_default=True, field_specifiers=(field,))
def record(cls: Any = None, /, *, hashable: bool = False, frozen: bool = False) -> Any:
    """The class rebuilt as a record (see the module's docstring). ``frozen``: fields
    cannot be assigned after ``__init__`` (``FrozenInstanceError``), and it hashes."""
    if cls is None:
        return lambda later: _make(later, hashable, frozen)
    return _make(cls, hashable, frozen)


__all__ = ["field", "fields_of", "record"]
