"""``lashflow fmt``: idempotent, meaning-preserving (same tree, same effect sites, hence
the same step keys) and losing no comment, over every program in the repository and
over generated programs with comments and line breaks strewn between their tokens."""

from __future__ import annotations

import random
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lashflow.lang import LangError, parse
from lashflow.lang.format import FormatError, comments_of, format_source, program_shape
from lashflow.lang.printer import Unprintable, print_module
from lashflow.lang.sites import assign_sites, nodes
from lashflow.lang.tokens import tokenize

from lash_corpus import ROOT, lash_files, programs

sys.path.insert(0, str(ROOT / "tests" / "hardening"))
from hardening_programs import runnable_programs, syntax_modules  # noqa: E402


def sites(source: str) -> list[str]:
    module = assign_sites(parse(source))
    found = []
    for body in [module.main, *(p.body.body for p in module.processes)]:
        for stmt in body:
            found += [n.site for n in nodes(stmt) if getattr(n, "site", "")]
    return found


def comment_texts(source: str) -> Counter[str]:
    return Counter(c.text for c in comments_of(source, tokenize(source)))


def assert_formats_well(source: str) -> str:
    out = format_source(source)
    assert format_source(out) == out, "not idempotent"
    assert program_shape(parse(out)) == program_shape(parse(source))
    assert sites(out) == sites(source)
    assert comment_texts(out) == comment_texts(source)
    return out


CORPUS = programs()


def test_the_corpus_is_everything() -> None:
    names = [name for name, _ in CORPUS]
    assert any(n.startswith("processes/") for n in names)
    assert sum(n.startswith("language.md") for n in names) >= 10
    assert sum(n.startswith("conformance") for n in names) >= 20


@pytest.mark.parametrize("source", [s for _, s in CORPUS], ids=[n for n, _ in CORPUS])
def test_every_program_in_the_repository(source: str) -> None:
    try:
        parse(source)
    except LangError:
        with pytest.raises(LangError):  # the guide's error example stays an error
            format_source(source)
        return
    assert_formats_well(source)


def test_the_repository_files_are_formatted() -> None:
    for path in lash_files():
        text = path.read_text(encoding="utf-8")
        assert format_source(text) == text, f"run: lashflow fmt {path.relative_to(ROOT)}"


def strew(text: str, rnd: random.Random) -> str:
    """``text`` with comments, blank lines and line breaks put between random tokens
    (newlines mean nothing in Lashlang and a comment ends at one, so the program is the
    same)."""
    out: list[str] = []
    previous = 0
    for n, tok in enumerate(tokenize(text)):
        out.append(text[previous:tok.start_pos])
        roll = rnd.random()
        if roll < 0.12:
            out.append(f"  # note {n}\n")
        elif roll < 0.16:
            out.append(f"\n\n// para {n}\n")
        elif roll < 0.3:
            out.append("\n")
        out.append(text[tok.start_pos:tok.end_pos])
        previous = tok.end_pos
    return "".join(out) + text[previous:]


GENERATED = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))


@GENERATED
@given(st.one_of(syntax_modules(), runnable_programs()), st.randoms(use_true_random=False))
def test_generated_programs_with_comments_everywhere(module, rnd) -> None:  # type: ignore[no-untyped-def]
    try:
        text = print_module(module)
    except Unprintable:
        return
    assert_formats_well(strew(text, rnd))


def test_the_layout() -> None:
    source = (
        "# head\n\n\n"
        "type User = {   # a user\n  name: str,    # the name\n  age: int?\n}\n"
        "process p(a: int,   b: str) -> dict { # opener\n"
        "  x = await tools.f({\n      a: 1, # one\n\n      b: [1,2,\n        3]\n  })?\n"
        "  if x.ok && !(a > 1 || b == 's') { y = x.value ; z = 2 } else {\n    # nothing\n  }\n"
        "  let w = 1 + # inside\n      2.50\n"
        "  finish c ? x? : (r?)   // tail\n"
        "  # end of body\n"
        "}\n"
    )
    assert assert_formats_well(source) == (
        "# head\n\n"
        "type User = {  # a user\n  name: str,   # the name\n  age: int?\n}\n"
        "process p(a: int, b: str) -> dict {  # opener\n"
        "  x = await tools.f({\n    a: 1,  # one\n\n    b: [1, 2, 3]\n  })?\n"
        "  if x.ok and not (a > 1 or b == 's') { y = x.value; z = 2 } else {\n    # nothing\n  }\n"
        "  # inside\n  w = 1 + 2.50\n"
        "  finish c ? x? : r?  // tail\n"
        "  # end of body\n"
        "}\n"
    )


def test_an_unwrap_a_ternary_would_swallow_keeps_its_parentheses() -> None:
    source = "v = (tools.g(1)?)\nfinish v == 1 ? 'a' : 'b'\n"
    assert assert_formats_well(source) == source
    # and one nothing follows loses them
    assert format_source("v = (tools.g(1)?)\nfinish v\n") == "v = tools.g(1)?\nfinish v\n"


def test_a_condition_ending_in_a_brace_word_is_parenthesised() -> None:
    source = "Type = 1\nif (x == Type) { finish 1 }\n"
    assert assert_formats_well(source) == source


def test_literals_stay_as_written() -> None:
    source = "a = r\"C:\\new\"\nb = '''two\n  lines'''\nc = 3.\nd = 'it\\'s'\n"
    assert assert_formats_well(source) == source


def test_an_empty_file_and_a_comment_only_file() -> None:
    assert format_source("") == ""
    assert format_source("\n\n  # only\n\n") == "# only\n"


def test_a_program_that_does_not_parse_is_a_diagnostic() -> None:
    with pytest.raises(LangError) as caught:
        format_source("x = (\n")
    assert caught.value.code == "parse_error"


def test_format_error_is_a_user_facing_error() -> None:
    assert FormatError("m").code == "format_error"
