"""The compiled encoder writes exactly the bytes of the standard one (ADR 0034): journal
rows and argument hashes must not change with the library that writes them."""

from __future__ import annotations

import enum
import math
import random
import struct
import sys
import zlib
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lashflow import json_text
from lashflow.json_text import (
    canonical, compact, standard_canonical, standard_compact, standard_stored, stored,
)
from lashflow.states import TEXT
from lashflow.store.rows import _detail

PAIRS: list[tuple[str, Callable[[Any], str], Callable[[Any], str]]] = [
    ("compact", compact, standard_compact),
    ("stored", stored, standard_stored),
    ("canonical", canonical, standard_canonical),
]


def _same(fast: Callable[[Any], str], standard: Callable[[Any], str], value: Any) -> None:
    try:
        expected = standard(value)
    except (TypeError, ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            fast(value)
        return
    assert fast(value) == expected, value


def test_the_compiled_encoder_is_in_use() -> None:
    # a dependency since ADR 0034: an environment installed before it needs
    # `pip install -e '.[dev]'` again (or `pip install orjson`)
    assert json_text.orjson is not None, "orjson is not installed: pip install -e '.[dev]'"
    for _, fast, standard in PAIRS:
        assert fast is not standard


def _doubles(count: int) -> list[float]:
    """Every exponent from 1e-320 to 1e308, and random bit patterns (NaN, infinities,
    subnormals, negative zero among them)."""
    rnd = random.Random(34)
    out = [0.0, -0.0, 5e-324, sys.float_info.max, sys.float_info.min, 1e16, 1e-4, 1e-5, 0.1,
           1 / 3, 2.0 ** 53, 1e22, 1733300000.123456, math.nan, math.inf, -math.inf]
    for exponent in range(-320, 309):
        out += [rnd.random() * 10.0 ** exponent, -rnd.randint(1, 10 ** 17) * 10.0 ** (exponent - 17)]
    out += [struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0] for _ in range(count)]
    return out


@pytest.mark.parametrize("name,fast,standard", PAIRS, ids=[p[0] for p in PAIRS])
def test_floats_alone_and_inside_containers(name: str, fast: Any, standard: Any) -> None:
    doubles = _doubles(20_000)
    for number in doubles:
        _same(fast, standard, number)
    for start in range(0, len(doubles), 7):
        chunk = doubles[start:start + 7]
        _same(fast, standard, chunk)
        _same(fast, standard, {"t": chunk[0], "rest": chunk[1:], "s": "e-0.0000null"})


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


EDGES: list[Any] = [
    None, True, False, 0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 2 ** 64, -2 ** 64, 10 ** 400,
    "", "plain", "é漢😀", "\u2028\u2029\x7f", "\x00\x01\x1f\b\f\n\r\t\\\"/", "\ud800", "a\udfffb",
    {"b": 1, "a": 2, "é": 3, "z": 4, "😀": 5, "\uffff": 6, "A": 7, "": 8},
    {1: "int key"}, {None: 1}, {1.5: 1}, {True: 1}, {"\ud800": 1}, (1, 2, (3,)), [(), {}],
    {1, 2}, b"bytes", Colour.RED, Text("sub"), {Text("k"): Text("v")}, [Colour.RED],
    {"null": None, "x": "null"}, ["e-", "0.0000"], object(),
]


@pytest.mark.parametrize("name,fast,standard", PAIRS, ids=[p[0] for p in PAIRS])
def test_edges(name: str, fast: Any, standard: Any) -> None:
    for value in EDGES:
        _same(fast, standard, value)
        _same(fast, standard, [value])
        _same(fast, standard, {"k": value})


@pytest.mark.parametrize("name,fast,standard", PAIRS, ids=[p[0] for p in PAIRS])
def test_nesting_deeper_than_the_compiled_encoder_takes(name: str, fast: Any, standard: Any) -> None:
    for depth in (200, 254, 255, 256, 300, 600):
        value: Any = 1
        for _ in range(depth):
            value = {"a": [value]}
        _same(fast, standard, value)


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-2 ** 70, max_value=2 ** 70) | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=5), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_generated_values(value: Any) -> None:
    for _, fast, standard in PAIRS:
        _same(fast, standard, value)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["args", "width", "retry", "x"]), json_values, max_size=3),
       st.lists(st.none() | st.text() | st.floats() | st.integers(), min_size=5, max_size=5)
       | st.none())
def test_a_step_detail_with_its_folded_attempt(detail: dict[str, Any], folded: Any) -> None:
    expected = dict(detail, crc=zlib.crc32(b"outcome"), scrc=7)
    if folded is not None:
        expected["a1"] = folded
    try:
        text = standard_stored(expected)
    except ValueError:
        with pytest.raises(Exception):
            _detail(detail, "outcome", folded, 7)
        return
    assert _detail(detail, "outcome", folded, 7) == text


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(TEXT.values())), st.floats(), st.floats())
def test_the_usual_folded_attempt_a_status_and_two_times(status: str, started: float,
                                                         finished: float) -> None:
    folded = [status, None, None, started, finished]
    expected = {"args": {"i": 0}, "crc": zlib.crc32(b"outcome"), "scrc": 7, "a1": folded}
    try:
        text = standard_stored(expected)
    except ValueError:
        with pytest.raises(Exception):
            _detail({"args": {"i": 0}}, "outcome", folded, 7)
        return
    assert _detail({"args": {"i": 0}}, "outcome", folded, 7) == text
