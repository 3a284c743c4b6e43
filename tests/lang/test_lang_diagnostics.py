"""Diagnostic rendering and shape."""

from __future__ import annotations

from lashflow.errors import LashflowError
from lashflow.lang import Diagnostic, LangError, check, parse


def test_render_has_message_location_line_caret_and_hint() -> None:
    source = "x = 1\ntotal = if big { 1 } else { 2 }\n"
    [diag] = check(source)
    text = diag.render(source, "order.lash")
    assert text.splitlines() == [
        "unexpected `if`",
        "--> order.lash:2:9",
        "  | total = if big { 1 } else { 2 }",
        "  |         ^~",
        "hint: use `cond ? yes : no` for inline conditionals",
    ]


def test_columns_count_characters_not_bytes() -> None:
    source = 'x = "ééé"\nnaïve = 1'
    [diag] = check(source)
    assert (diag.message, diag.line, diag.column, diag.offset) == ("unexpected `ï`", 2, 3, 12)
    assert diag.render(source).splitlines()[-1] == "  |   ^"


def test_render_at_end_of_input_and_without_location() -> None:
    source = "if true {\n  x = 1\n"
    [diag] = check(source)
    assert diag.render(source, "f.lash").splitlines()[:2] == [
        "expected `}`, found end of input", "--> f.lash:3:1"]
    bare = Diagnostic("link_error", "something")
    assert bare.render("x", "f.lash") == "something"


def test_lang_error_is_a_lashflow_error_with_code() -> None:
    try:
        parse("x = (")
    except LangError as exc:
        assert isinstance(exc, LashflowError)
        assert exc.code == "parse_error" and exc.diagnostic.code == "parse_error"
        assert str(exc) == "unexpected end of input"
        assert (exc.line, exc.column) == (1, 6)
    else:  # pragma: no cover
        raise AssertionError("no error")


def test_to_dict() -> None:
    [diag] = check("x = if")
    assert diag.to_dict() == {"code": "parse_error", "message": "unexpected `if`", "line": 1,
                              "column": 5, "hint": "use `cond ? yes : no` for inline conditionals"}
