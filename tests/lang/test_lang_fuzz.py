"""No input, however broken, gives anything but diagnostics (never a traceback or a hang).

Random text, random token soup and mutated conformance programs go through ``check``;
the only acceptable outcomes are an empty list or diagnostics with a code, a message and a
position inside the source.
"""

from __future__ import annotations

import pathlib
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lashflow.lang import Catalog, check

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "conformance"))
from test_conformance_static import OK_PROGRAMS  # noqa: E402

CATALOG = Catalog.permissive({"tools": ["read", "inc", "v", "quote", "get"]})
PROGRAMS = sorted(OK_PROGRAMS.values())

WORDS = [
    "{", "}", "(", ")", "[", "]", ",", ":", "@", "?", ".", "!", "=", "==", "!=", "|", "<", ">",
    "<=", "+", "-", "*", "/", "%", "&&", "||", "&", ";", "#", "//", "\n", " ", "x", "tools",
    "read", "1", "2.5", "3.", '"s"', "'t'", '"""', "r'", '"\\', "if", "else", "for", "in",
    "while", "finish", "fail", "yield", "wake", "let", "start", "sleep", "until", "Type", "type",
    "process", "signals", "label", "enum", "list", "Process", "TriggerHandle", "await", "not",
    "and", "or", "null", "true", "false", "print", "cancel", "submit", "call", "break",
    "continue", "wait_signal", "signal_run", "->", "parallel", "trigger", "int", "str", "ï",
    "é", "\u00a0", "\t", "`",
]

FAST = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_only_diagnostics(source: str) -> None:
    diags = check(source, CATALOG)
    for d in diags:
        assert d.code in ("parse_error", "link_error")
        assert d.message
        if d.offset is not None:
            assert 0 <= d.offset <= len(source)
            assert d.line is not None and d.line >= 1 and d.column is not None and d.column >= 1
        d.render(source, "fuzz.lash")


@FAST
@given(st.text(max_size=300))
def test_random_text(source: str) -> None:
    assert_only_diagnostics(source)


@FAST
@given(st.lists(st.sampled_from(WORDS), max_size=60).map(" ".join))
def test_random_token_soup(source: str) -> None:
    assert_only_diagnostics(source)


@FAST
@given(st.lists(st.sampled_from(WORDS), max_size=60).map("".join))
def test_random_glued_tokens(source: str) -> None:
    assert_only_diagnostics(source)


@st.composite
def mutated_program(draw: st.DrawFn) -> str:
    text = list(draw(st.sampled_from(PROGRAMS)))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if action == "delete" and text:
            at = min(pos, len(text) - 1)
            del text[at: at + draw(st.integers(1, 6))]
        elif action == "insert":
            text[pos:pos] = list(draw(st.sampled_from(WORDS)))
        else:
            start = draw(st.integers(0, len(text)))
            text[pos:pos] = text[start: start + draw(st.integers(1, 25))]
    return "".join(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_program())
def test_mutated_conformance_programs(source: str) -> None:
    assert_only_diagnostics(source)


@FAST
@given(st.integers(1, 3000), st.sampled_from(["(", "[", "{", "-", "not ", "a.", "f(", "x ? "]))
def test_deep_nesting(depth: int, opener: str) -> None:
    assert_only_diagnostics("x = " + opener * depth + "1")
