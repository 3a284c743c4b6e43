"""Value model: stringification, JSON mapping, truthiness, equality, coercion."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lashflow.interp.errors import LashRuntimeError
from lashflow.interp.values import (
    Resource, display, equal, float_text, from_json, json_number, json_text, num, number_text, text, to_json,
    truthy, type_name,
)


@pytest.mark.parametrize("x, shown", [
    (3.0, "3"), (-0.0, "0"), (-0.5, "-0.5"), (0.1 + 0.2, "0.30000000000000004"),
    (1e22, "10000000000000000000000"), (1e-7, "0.0000001"), (2.0 ** 64, "18446744073709552000"),
    (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "NaN"), (123456.789, "123456.789"),
])
def test_number_display_never_uses_exponents(x, shown):
    assert number_text(x) == shown


@pytest.mark.parametrize("x, shown", [
    (3.0, "3"), (1e22, "1e22"), (1e-7, "1e-7"), (1e-5, "0.00001"), (1.5e300, "1.5e300"),
    (1e19, "10000000000000000000"), (-1e19, "-1e19"), (0.30000000000000004, "0.30000000000000004"),
    (1e16, "10000000000000000"), (2.5, "2.5"), (math.nan, "null"), (math.inf, "null"),
])
def test_json_numbers_follow_serde(x, shown):
    assert json_number(x) == shown


def test_display_forms():
    assert display({"z": 1.0, "a": [1.0, 2.5, "s"], "m": None}) == '{"a":[1,2.5,"s"],"m":null,"z":1}'
    assert display(True) == "true" and display(None) == "null"
    assert display((1.0, "x")) == '(1, "x")'
    assert display((1.0,)) == "(1,)"
    assert display(()) == "()"
    assert display("raw") == "raw"
    assert display([1e22]) == "[1e22]"
    # keys in the original's order (it writes them unsorted)
    assert display(Resource("Tools", "tools")) == '{"__resource__":true,"type":"Tools","alias":"tools"}'
    assert json_text("é\n") == '"é\\n"'


def test_truthiness():
    for falsy in (None, False, 0.0, -0.0, math.nan, "", ()):
        assert truthy(falsy) is False
    for true in (True, 1.0, "a", [], {}, (0.0,), Resource("Tools", "tools"), -1.0):
        assert truthy(true) is True


def test_equality_has_no_cross_type_coercion():
    assert not equal(1.0, True)
    assert not equal("1", 1.0)
    assert equal(1.0, 1.0)
    assert not equal((1.0, 2.0), [1.0, 2.0])
    assert equal({"a": 1.0, "b": [2.0]}, {"b": [2.0], "a": 1.0})
    assert equal([], [])
    assert not equal({"a": 1.0}, {"a": 1.0, "b": 2.0})
    assert not equal(math.nan, math.nan)
    assert not equal([True], [1.0])


def test_numeric_coercion():
    assert num(True) == 1.0 and num(False) == 0.0 and num(None) == 0.0
    assert num(" 7 ") == 7.0 and num("") == 0.0 and num("2.5") == 2.5 and num("1e3") == 1000.0
    with pytest.raises(LashRuntimeError, match="^expected a number$"):
        num("abc")
    with pytest.raises(LashRuntimeError, match="^expected a number$"):
        num("1_000")
    with pytest.raises(LashRuntimeError, match="^expected a number, got list$"):
        num([1.0])


def test_text_coercion():
    assert text(12.0) == "12" and text(None) == "null" and text(True) == "true"
    with pytest.raises(LashRuntimeError, match="^expected text, got list$"):
        text([])


def test_type_names():
    names = [type_name(v) for v in (None, True, 1.0, "s", [], (), {}, Resource("T", "t"))]
    assert names == ["null", "bool", "number", "string", "list", "tuple", "record", "resource"]


def test_json_in_converts_numbers_and_sorts_keys():
    v = from_json({"b": 1, "a": {"d": 2, "c": [3, 2.5, None, True]}})
    assert list(v) == ["a", "b"] and list(v["a"]) == ["c", "d"]
    assert type(v["b"]) is float and v["a"]["c"][3] is True
    assert from_json({"__resource__": True, "type": "Tools", "alias": "tools"}) == Resource("Tools", "tools")


def test_json_out():
    assert to_json((1.0, 2.5, math.inf)) == [1, 2.5, None]
    out = to_json({"n": 3.0})
    assert type(out["n"]) is int
    assert to_json(Resource("Tools", "tools")) == {"__resource__": True, "alias": "tools", "type": "Tools"}


json_data = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2 ** 53), max_value=2 ** 53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=20,
)


def _same_json(a, b):
    """JSON equality: numbers by value (0 and 0.0 are one JSON number), bools strict,
    objects regardless of key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None)
@given(json_data)
def test_json_survives_tool_output_to_value_to_json(data):
    """A tool's JSON output, read as a value and written back, is the same JSON."""
    back = to_json(from_json(data))
    assert _same_json(back, data)
    assert _same_json(json.loads(json.dumps(back)), data)
    assert _same_json(json.loads(json_text(from_json(data))), data)


def test_tuples_nest_as_tuples_and_numbers_in_them_have_no_exponent():
    assert display(((1.0, 2.0), ("a",), ())) == '((1, 2), ("a",), ())'
    assert display((1e-7, 7e25, [1e-7])) == "(0.0000001, 70000000000000000000000000, [1e-7])"


def test_number_text_as_the_reference_prints_it():
    """Text coercion (``join``, ``trim``...) prints numbers as Rust does: ``-0`` for
    negative zero, digits for huge integers, and an exact tie between two shortest
    decimals rounded up (Python's repr rounds it to even)."""
    assert [float_text(x) for x in (-0.0, 2.0**64, 1e21)] == \
        ["-0", "18446744073709552000", "1000000000000000000000"]
    tie = 178500000000127.5 - 353.372  # exactly ...774.125
    assert repr(tie) == "178499999999774.12" and float_text(tie) == "178499999999774.13"
