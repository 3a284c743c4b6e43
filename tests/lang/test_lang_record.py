"""``@record`` behaves as the dataclass it replaces for the syntax tree and the static
types: construction, defaults, equality, repr, hashing, freezing, slots, matching."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from lashflow.lang import ast as A
from lashflow.lang import types as T
from lashflow.lang.record import field, fields_of, record


@record
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


@dataclasses.dataclass(slots=True)
class PointDC:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


@record(frozen=True)
class Pair:
    left: Any
    right: Any


@dataclasses.dataclass(frozen=True, slots=True)
class PairDC:
    left: Any
    right: Any


def test_construction_follows_the_dataclass() -> None:
    for cls in (Point, PointDC):
        assert repr(cls(1)).endswith("(x=1, y=0, tags=[])")
        assert repr(cls(1, 2, ["a"])).endswith("(x=1, y=2, tags=['a'])")
        assert repr(cls(x=1, tags=["b"])).endswith("(x=1, y=0, tags=['b'])")
        assert cls(1).tags is not cls(1).tags  # a fresh default each time
    assert repr(Point(3, y=4)) == "Point(x=3, y=4, tags=[])"


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "missing required argument: 'x'"),
    ((1, 2, [], 4), {}, "takes 3 positional arguments but 4 were given"),
    ((1,), {"z": 2}, "unexpected keyword argument 'z'"),
    ((1,), {"x": 2}, "unexpected keyword argument 'x'"),
])
def test_wrong_arguments_raise_type_error(args: tuple[Any, ...], kwargs: dict[str, Any],
                                          message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)


def test_equality_is_field_by_field_within_one_class() -> None:
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(1, 3)
    assert Point(1, 2) != PointDC(1, 2)
    assert A.Name("x") == A.Name("x", A.Span(0, 0), False)
    assert A.Name("x") != A.String("x")
    nan = float("nan")  # compared as tuples are: the same object is equal to itself
    assert Pair(nan, 1) == Pair(nan, 1) and PairDC(nan, 1) == PairDC(nan, 1)
    assert Pair(nan, 1) != Pair(float("nan"), 1)


def test_hashing_follows_the_dataclass_flags() -> None:
    with pytest.raises(TypeError):
        hash(Point(1))
    assert hash(A.Span(1, 2)) == hash(A.Span(1, 2))
    assert {A.Span(1, 2), A.Span(1, 2)} == {A.Span(1, 2)}
    assert hash(Pair(1, 2)) == hash(Pair(1, 2))
    assert len({T.Scalar("int"), T.Scalar("int"), T.Scalar("str")}) == 2


def test_frozen_records_refuse_assignment() -> None:
    pair = Pair(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.left = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del pair.right
    span = A.Span(1, 2)
    span.start = 5  # the tree's records are not frozen (the linker fills them in)
    assert span == A.Span(5, 2)


def test_slots_match_args_and_fields_of() -> None:
    point = Point(1)
    assert not hasattr(point, "__dict__")
    with pytest.raises(AttributeError):
        point.other = 1  # type: ignore[attr-defined]
    assert fields_of(point) == ("x", "y", "tags")
    assert fields_of(PointDC(1)) == ("x", "y", "tags")
    assert fields_of(Point) == () and fields_of(PointDC) == () and fields_of(3) == ()
    match A.Binary("+", A.Name("a"), A.Name("b")):
        case A.Binary("+", A.Name(left), A.Name(right)):
            assert (left, right) == ("a", "b")
        case _:
            pytest.fail("no match")


def test_every_tree_and_type_class_is_a_record_with_its_methods() -> None:
    for module in (A, T):
        classes = [obj for obj in vars(module).values()
                   if isinstance(obj, type) and obj.__module__ == module.__name__]
        for cls in classes:
            if issubclass(cls, Exception):
                continue
            assert cls.__slots__ == cls.__match_args__  # type: ignore[attr-defined]
            assert not dataclasses.is_dataclass(cls), cls
    module = A.Module("src")
    module.main.append(A.Break())
    assert A.Module("src").main == []
    assert module.process("none") is None


def test_records_copy_and_pickle_frozen_or_not() -> None:
    for value in (Point(1, 2, ["a"]), Pair(1, (2, 3)), T.Obj((T.Field("a", T.INT),)),
                  A.Name("x", A.Span(1, 2))):
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.copy(value) == value and copy.deepcopy(value) == value
