"""Every builtin: behaviour, exact messages, arities."""

import pytest

from lashflow.errors import LimitExceeded
from lashflow.interp import builtins as B
from lashflow.interp.builtins import arity_error
from lashflow.interp.errors import LashRuntimeError
from lashflow.interp.limits import ACTIVE, Limits
from lashflow.interp.schema import schema_of, validate
from lashflow.lang import ast as A


def raises(kind, message, fn, *args):
    with pytest.raises(LashRuntimeError) as info:
        fn(*args)
    assert info.value.kind == kind
    assert info.value.message == message


def test_there_are_23_builtins():
    assert len(B.BUILTINS) == 23


@pytest.mark.parametrize("name, count, message", [
    ("len", 2, "`len` takes 1 arg(s), got 2"),
    ("contains", 1, "`contains` takes 2 arg(s), got 1"),
    ("slice", 2, "`slice` takes 3 arg(s), got 2"),
    ("find", 1, "`find` takes 2 or 3 arg(s), got 1"),
    ("range", 0, "`range` takes 1, 2, or 3 arg(s), got 0"),
    ("range", 4, "`range` takes 1, 2, or 3 arg(s), got 4"),
    ("format", 0, "`format` requires at least a template string"),
])
def test_arity_messages(name, count, message):
    assert arity_error(name, count) == message


def test_arities_accepted():
    assert arity_error("find", 3) is None and arity_error("format", 5) is None
    assert arity_error("range", 2) is None


def test_len_empty_keys_values():
    assert B.len_("héllo") == 5.0 and B.len_([1.0]) == 1.0 and B.len_(None) == 0.0
    assert B.len_({"a": 1.0}) == 1.0 and B.len_(()) == 0.0
    raises("TypeError", "`len` requires a string, tuple, list, record, or null; use `.size` for images",
           B.len_, 5.0)
    assert B.empty("") and B.empty(None) and not B.empty([0.0])
    raises("TypeError", "`empty` requires a string, tuple, list, record, or null", B.empty, 1.0)
    assert B.keys({"b": 1.0, "a": 2.0}) == ["b", "a"] and B.keys(None) == []
    assert B.values({"b": 1.0, "a": 2.0}) == [1.0, 2.0] and B.values(None) == []
    raises("TypeError", "`keys` requires a record or null", B.keys, [])
    raises("TypeError", "`values` requires a record or null", B.values, "x")


def test_text_builtins():
    assert B.trim("  hi \u3000") == "hi"
    assert B.trim(12.0) == "12"
    raises("TypeError", "expected text, got list", B.trim, [])
    assert B.to_string(12.0) == "12" and B.to_string((1.0, "x")) == '(1, "x")'
    assert B.starts_with(123.0, 12.0) and B.ends_with("hello", "lo")
    assert B.split("a,b,,c", ",") == ["a", "b", "", "c"]
    assert B.split("ab", "") == ["", "a", "b", ""]
    assert B.split("", "") == ["", ""]
    assert B.join(["a", 1.0, True, None], "-") == "a-1-true-null"
    assert B.join(("a", "b"), ", ") == "a, b"
    raises("TypeError", "`join` requires a tuple or list as the first argument", B.join, "ab", "")
    raises("TypeError", "expected text, got list", B.join, [[1.0]], "")


def test_conversions():
    assert B.to_int("3.9") == 3.0 and B.to_int(-2.5) == -2.0 and B.to_int(None) == 0.0
    assert B.to_int("") == 0.0
    assert B.to_float(" 7 ") == 7.0 and B.to_float("2.5") == 2.5
    raises("TypeError", "expected a number", B.to_int, "x")
    raises("TypeError", "expected a number, got list", B.to_float, [])


def test_json_parse():
    v = B.json_parse('{"b": 1, "a": {"d": 2, "c": 3}}')
    assert list(v) == ["a", "b"] and list(v["a"]) == ["c", "d"]
    assert B.json_parse("[1, 2.5, null]") == [1.0, 2.5, None]
    with pytest.raises(LashRuntimeError) as info:
        B.json_parse("{oops")
    assert info.value.kind == "ValueError" and info.value.message.startswith("invalid json: ")
    with pytest.raises(LashRuntimeError, match="^invalid json: "):
        B.json_parse("NaN")


def test_contains():
    assert B.contains("hello", "ell") and B.contains("a1", 1.0)
    assert B.contains([1.0, 2.0], 2.0) and not B.contains([1.0, 2.0], "2")
    assert B.contains(({"a": 1.0},), {"a": 1.0})
    assert B.contains({"k": 1.0}, "k") and not B.contains(None, 1.0)
    raises("TypeError", "`contains` requires a string/string, tuple/value, list/value, record/key, "
           "or null/value pair", B.contains, 1.0, 1.0)


def test_find():
    assert B.find("hello", "l") == 2.0 and B.find("hello", "l", 3.0) == 3.0
    assert B.find("hello", "z") is None and B.find("héllo", "l") == 2.0
    assert B.find("abc", "", 3.0) == 3.0 and B.find("abc", "", 4.0) is None
    assert B.find("abc", "a", 9.0) is None
    raises("TypeError", "`find` start must be a non-negative integer", B.find, "a", "a", -1.0)
    raises("TypeError", "`find` start must be a non-negative integer", B.find, "a", "a", 0.5)


def test_grep_text():
    hits = B.grep_text("one\r\ntwo lines\nthree\n", "t")
    assert hits == [
        {"line": 2.0, "text": "two lines", "match": "t", "start": 0.0, "end": 1.0},
        {"line": 3.0, "text": "three", "match": "t", "start": 0.0, "end": 1.0},
    ]
    assert list(hits[0]) == ["line", "text", "match", "start", "end"]
    raises("ValueError", "`grep_text` needle must not be empty", B.grep_text, "x", "")


def test_slice():
    assert B.slice_("héllo", 1.0, 3.0) == "él"
    assert B.slice_([1.0, 2.0, 3.0], -2.0, None) == [2.0, 3.0]
    assert B.slice_((1.0, 2.0, 3.0), None, 1.0) == (1.0,)
    assert B.slice_([1.0, 2.0], 5.0, 9.0) == [] and B.slice_([1.0, 2.0], 1.0, 0.0) == []
    raises("TypeError", "index must be an integer", B.slice_, [1.0], 0.5, None)
    raises("TypeError", "`slice` requires a string, tuple, or list", B.slice_, {}, 0.0, 1.0)


def test_push():
    xs = [1.0]
    assert B.push(xs, [2.0]) == [1.0, [2.0]] and xs == [1.0]
    raises("TypeError", "`push` requires a list as the first argument", B.push, (1.0,), 2.0)


def test_range():
    assert B.range_(3.0) == [0.0, 1.0, 2.0]
    assert B.range_(1.0, 4.0) == [1.0, 2.0, 3.0]
    assert B.range_(5.0, 0.0, -2.0) == [5.0, 3.0, 1.0]
    assert B.range_(3.0, 1.0) == []
    raises("TypeError", "`range` bounds must be finite integers, got string", B.range_, "3")
    raises("TypeError", "`range` bounds must be finite integers", B.range_, 1.5)
    raises("ValueError", "`range` step must not be 0", B.range_, 0.0, 3.0, 0.0)
    with pytest.raises(LimitExceeded, match=r"`range` would create more than 1000000 items"):
        B.range_(1000001.0)
    assert len(B.range_(1000000.0)) == 1000000


def test_range_limit_is_configurable():
    ACTIVE.reset(Limits(max_range_items=10))
    try:
        with pytest.raises(LimitExceeded, match="more than 10 items"):
            B.range_(11.0)
    finally:
        ACTIVE.reset(Limits())


def test_ceil_and_floor_div():
    assert B.ceil_div(-10.0, 3.0) == -3.0 and B.floor_div(-10.0, 3.0) == -4.0
    assert B.ceil_div(10.0, 3.0) == 4.0 and B.floor_div(10.0, 3.0) == 3.0
    raises("TypeError", "`ceil_div` dividend must be a finite integer, got string", B.ceil_div, "1", 2.0)
    raises("TypeError", "`floor_div` divisor must be a finite integer", B.floor_div, 1.0, 2.5)
    raises("ValueError", "`floor_div` divisor must not be 0", B.floor_div, 1.0, 0.0)
    raises("ValueError", "`ceil_div` divisor must not be 0", B.ceil_div, 1.0, 0.0)


def test_format():
    assert B.format_("a={} b={}", 1.0, "x") == "a=1 b=x"
    assert B.format_("b={1} a={0}", "A", "B") == "b=B a=A"
    assert B.format_("{{literal}} {}", [1.0, 2.0]) == "{literal} [1,2]"
    assert B.format_("plain") == "plain"
    assert B.format_("{}", {"k": None}) == '{"k":null}'
    raises("TypeError", "`format` template must be a string, got number", B.format_, 1.0)
    raises("ValueError", "can't mix `{}` and indexed format placeholders", B.format_, "{} {0}", 1.0)
    raises("ValueError", "unmatched `{` in format string", B.format_, "a {", 1.0)
    raises("ValueError", "unmatched `}` in format string", B.format_, "a }")
    raises("ValueError", "invalid format placeholder", B.format_, "{x}", 1.0)
    raises("ValueError", "format slot `{}` is out of range", B.format_, "{} {}", 1.0)
    raises("ValueError", "format slot `3` is out of range", B.format_, "{3}", 1.0)
    raises("ValueError", "format argument `0` is unused", B.format_, "plain", 1.0)
    raises("ValueError", "format argument `1` is unused", B.format_, "{0}", 1.0, 2.0)


def _type(fields):
    return {"$lash_type": schema_of(A.TypeObject(fields), lambda name: None)}


def test_validate_accepts_and_reports_paths():
    T = _type([
        A.TypeField("name", A.TypeName("str")),
        A.TypeField("tags", A.TypeList(A.TypeName("str"))),
        A.TypeField("age", A.TypeName("int"), optional=True),
        A.TypeField("kind", A.TypeEnum(["a", "b"])),
        A.TypeField("note", A.TypeUnion([A.TypeName("str"), A.TypeNull()])),
    ])
    good = {"name": "x", "tags": ["t"], "kind": "a", "note": None, "extra": 1.0}
    assert validate(good, T) is good
    cases = [
        ({**good, "age": 1.5}, "validation failed: $.age: expected integer, got number"),
        ({**good, "name": 1.0}, "validation failed: $.name: expected string, got number"),
        ({k: v for k, v in good.items() if k != "note"}, "validation failed: $: missing required field `note`"),
        ({**good, "kind": "c"}, "validation failed: $.kind: expected one of [a, b], got c"),
        ({**good, "note": 1.0}, "validation failed: $.note: expected one of [string, null], got number"),
        ({**good, "tags": ["ok", 2.0]}, "validation failed: $.tags[1]: expected string, got number"),
        ([], "validation failed: $: expected object, got array"),
    ]
    for value, message in cases:
        raises("ValueError", message, validate, value, T)
    raises("TypeError", "`validate` requires a Type literal as the second argument", validate, {}, {})


def test_type_literal_schema_shape():
    schema = schema_of(A.TypeObject([A.TypeField("a", A.TypeName("int")),
                                     A.TypeField("b", A.TypeName("any"), optional=True)]),
                       lambda name: None)
    assert schema == {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}},
                      "required": ["a"], "additionalProperties": False}
    inner = {"$lash_type": {"type": "integer"}}
    assert schema_of(A.TypeName("Inner"), lambda name: inner) == {"type": "integer"}
