"""The output budget (what of a tool's output a process and a person see): caps, units,
directions, UTF-8 boundaries, structure, plugins."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lashflow.errors import PluginError
from lashflow.tools import (
    PluginStack, ToolOutputBudgetConfig, ToolOutputBudgetMode, ToolOutputBudgetPluginFactory, budget_text,
    project_output, runtime_plugin_stack, rust_lines,
)
from lashflow.tools.budget import DEFAULT_HINT, _tail_lines

H = "HINT"
TOKENS = ToolOutputBudgetMode.TOKENS


def cfg(limit=10, max_lines=3, mode=ToolOutputBudgetMode.BYTES):
    return ToolOutputBudgetConfig(limit=limit, max_lines=max_lines, mode=mode)


def head(text, config):
    return budget_text(text, config, hint=H)


def tail(text, config):
    return budget_text(text, config, tail=True, hint=H)


def test_defaults():
    config = ToolOutputBudgetConfig()
    assert (config.limit, config.max_lines, config.mode) == (16 * 1024, 400, ToolOutputBudgetMode.BYTES)
    assert "lashflow output RUN STEP" in DEFAULT_HINT
    big = "y" * (16 * 1024)
    assert project_output(big) == big  # at the cap: untouched
    cut = project_output(big + "y")
    assert cut.startswith(big + "\n\n...1 bytes truncated...\n\n") and cut.endswith(DEFAULT_HINT)
    lines = "\n".join("l" for _ in range(401))
    assert project_output(lines).endswith("\n\n...1 lines truncated...\n\n" + DEFAULT_HINT)


@pytest.mark.parametrize("text", ["", "abc", "x" * 10, "a\nb\nc", "a\nb\nc\n", "é" * 5])
def test_under_both_caps_untouched(text):
    assert head(text, cfg()) == text and tail(text, cfg()) == text


def test_line_cap_only_head_and_tail():
    text = "a\nb\nc\nd\ne"
    assert head(text, cfg()) == "a\nb\nc\n\n...2 lines truncated...\n\nHINT"
    assert tail(text, cfg()) == "...2 lines truncated...\n\nHINT\n\nc\nd\ne"


def test_size_cap_head_and_tail_count_bytes():
    text = "0123456789\nabcdef"
    assert head(text, cfg()) == "0123456789\n\n...7 bytes truncated...\n\nHINT"
    assert tail(text, cfg()) == "...11 bytes truncated...\n\nHINT\n\nabcdef"


def test_both_caps_size_binds_first():
    text = "aaaa\nbbbb\ncccc\ndddd"
    assert head(text, cfg()) == "aaaa\nbbbb\n\n...10 bytes truncated...\n\nHINT"
    assert tail(text, cfg()) == "...10 bytes truncated...\n\nHINT\n\ncccc\ndddd"


@pytest.mark.parametrize("text, limit, preview, removed", [
    ("é" * 7, 9, "é" * 4, 6),        # 2-byte chars: the cut backs off to 8 bytes
    ("€" * 4, 10, "€" * 3, 3),       # 3-byte chars
    ("😀" * 3, 10, "😀" * 2, 4),     # 4-byte chars
    ("a€b", 3, "a", 4),              # cut inside the € of byte 2..4
])
def test_first_line_cut_at_character_boundary_head(text, limit, preview, removed):
    assert head(text, cfg(limit=limit)) == f"{preview}\n\n...{removed} bytes truncated...\n\nHINT"


@pytest.mark.parametrize("text, limit, preview, removed", [
    ("ab€€€", 8, "€€", 5),          # suffix cut skips the continuation bytes
    ("😀😀x", 6, "😀x", 4),
])
def test_first_line_cut_at_character_boundary_tail(text, limit, preview, removed):
    assert tail(text, cfg(limit=limit)) == f"...{removed} bytes truncated...\n\nHINT\n\n{preview}"


def test_multibyte_counts_bytes_not_characters():
    text = "ü" * 20  # 40 bytes, 20 characters
    out = head(text, cfg(limit=10, max_lines=5))
    assert out == "üüüüü\n\n...30 bytes truncated...\n\nHINT"


def test_tokens_mode():
    config = cfg(limit=2, mode=TOKENS)  # 8-byte window
    assert head("abcdefgh", config) == "abcdefgh"  # 2 tokens: fits
    assert head("abcdefghi", config) == "abcdefgh\n\n...1 tokens truncated...\n\nHINT"
    assert head("abcdefgh\n" + "z" * 20, config) == "abcdefgh\n\n...6 tokens truncated...\n\nHINT"
    assert tail("z" * 20 + "\nabcdefgh", config) == "...6 tokens truncated...\n\nHINT\n\nabcdefgh"
    assert head("a\nb\nc\nd", cfg(limit=100, mode=TOKENS)) == "a\nb\nc\n\n...1 lines truncated...\n\nHINT"


def test_zero_window_gives_only_the_marker():
    assert head("abc", cfg(limit=0)) == "...3 bytes truncated..."
    assert tail("héllo", cfg(limit=0)) == "...6 bytes truncated..."
    assert head("abcde", cfg(limit=0, mode=TOKENS)) == "...2 tokens truncated..."
    assert head("", cfg(limit=0)) == ""
    assert head("a\nb", cfg(max_lines=0)) == "...2 lines truncated..."


def test_empty_preview_keeps_marker_and_hint():
    assert head("€€", cfg(limit=2)) == "...6 bytes truncated...\n\nHINT"


def test_rust_lines_semantics():
    assert rust_lines("") == []
    assert rust_lines("\n") == [""]
    assert rust_lines("a\n") == ["a"]
    assert rust_lines("a\r\nb\r\n") == ["a", "b"]
    assert rust_lines("a\n\nb") == ["a", "", "b"]
    assert rust_lines("a\r") == ["a\r"]  # a CR not before LF stays
    assert rust_lines("a\r\r\n") == ["a\r"]  # only one CR is stripped
    assert rust_lines("x\u2028y\x0bz") == ["x\u2028y\x0bz"]  # unlike str.splitlines


def test_crlf_and_trailing_newline_edges():
    assert head("a\r\nb\r\nc\r\nd\r\n", cfg(limit=100, max_lines=2)) == "a\nb\n\n...2 lines truncated...\n\nHINT"
    # every line kept but the bytes still over: the size cap bound (the final newline went)
    assert head("abc\n", cfg(limit=3)) == "abc\n\n...1 bytes truncated...\n\nHINT"
    assert tail("a\r\nbc", cfg(limit=4)) == "...1 bytes truncated...\n\nHINT\n\na\nbc"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab\n\ré€😀")), max_size=60))
def test_tail_iteration_matches_rust_lines(text):
    assert list(reversed(list(_tail_lines(text)))) == rust_lines(text)


PATTERN_HEAD = re.compile(r"\A(?:(.*)\n\n)?\.\.\.(\d+) (bytes|tokens|lines) truncated\.\.\.\n\nHINT\Z", re.S)
PATTERN_TAIL = re.compile(r"\A\.\.\.(\d+) (bytes|tokens|lines) truncated\.\.\.\n\nHINT(?:\n\n(.*))?\Z", re.S)


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("abc \né€😀")), max_size=80),
    st.integers(min_value=1, max_value=24),
    st.integers(min_value=1, max_value=5),
    st.booleans(),
    st.booleans(),
)
def test_budget_invariants(text, limit, max_lines, use_tail, tokens):
    config = cfg(limit=limit, max_lines=max_lines, mode=TOKENS if tokens else ToolOutputBudgetMode.BYTES)
    out = budget_text(text, config, tail=use_tail, hint=H)
    nbytes = len(text.encode())
    fits = len(rust_lines(text)) <= max_lines and config.size(nbytes) <= limit
    if fits:
        assert out == text
        return
    if use_tail:
        match = PATTERN_TAIL.match(out)
        assert match, out
        removed, unit, preview = int(match.group(1)), match.group(2), match.group(3) or ""
    else:
        match = PATTERN_HEAD.match(out)
        assert match, out
        preview, removed, unit = match.group(1) or "", int(match.group(2)), match.group(3)
    body = text[:-1] if text.endswith("\n") else text
    assert (body.endswith(preview) if use_tail else body.startswith(preview))
    assert len(preview.encode()) <= config.byte_window
    assert preview.count("\n") < max_lines
    if unit == "lines":
        assert removed == len(rust_lines(text)) - max_lines
    else:
        assert unit == ("tokens" if tokens else "bytes")
        assert removed == config.size(nbytes - len(preview.encode())) and removed >= 1


def test_structured_values_budget_each_string_leaf():
    config = cfg(limit=10, max_lines=3)
    value = {"log": "x" * 20, "n": 5, "ok": True, "items": ["short", None, 1.5, {"deep": "é" * 6}]}
    leaf = budget_text("x" * 20, config)
    deep = budget_text("é" * 6, config)
    expected = ('{"log":' + json.dumps(leaf, ensure_ascii=False) + ',"n":5,"ok":true,"items":["short",null,1.5,'
                '{"deep":' + json.dumps(deep, ensure_ascii=False) + '}]}')
    assert project_output(value, config) == expected
    # many small strings are never truncated, however big the whole
    many = ["abcdefgh"] * 100
    assert project_output(many, config) == json.dumps(many, separators=(",", ":"))
    assert json.loads(project_output(value, config))["n"] == 5


def test_scalars_render_as_compact_json():
    assert project_output(42) == "42"
    assert project_output(None) == "null"
    assert project_output(True) == "true"
    assert project_output(1.5) == "1.5"
    assert project_output("é") == "é"
    assert project_output([]) == "[]" and project_output({}) == "{}"


def test_deeply_nested_values_do_not_recurse():
    value: object = "end"
    for _ in range(5000):
        value = [value]
    assert project_output(value) == "[" * 5000 + '"end"' + "]" * 5000


def test_tail_direction_for_structured_leaves():
    out = project_output({"log": "a\nb\nc\nd"}, cfg(limit=100, max_lines=2), tail=True)
    assert json.loads(out)["log"].endswith("\n\nc\nd")


# -- plugins -------------------------------------------------------------------------------


def test_runtime_plugin_stack_default_and_replace():
    stack = runtime_plugin_stack()
    assert [f.plugin_id for f in stack.factories] == ["tool_output_budget"]
    assert runtime_plugin_stack() is not stack  # fresh each time
    small = ToolOutputBudgetConfig(limit=4)
    configured = stack.configure(lambda p: p.replace(ToolOutputBudgetPluginFactory(small)))
    assert configured is stack and len(stack.factories) == 1
    assert stack.validate().projector().project("abcdef", hint=H) == "abcd\n\n...2 bytes truncated...\n\nHINT"


def test_second_projector_is_refused_on_validate():
    stack = runtime_plugin_stack().push(ToolOutputBudgetPluginFactory(ToolOutputBudgetConfig(limit=1)))
    with pytest.raises(PluginError) as info:
        stack.validate()
    assert "duplicate tool result projector" in str(info.value)

    class OtherProjector:
        plugin_id = "other"
        slots = frozenset({"tool_result_projector"})

        def build(self):
            return None

    with pytest.raises(PluginError):
        runtime_plugin_stack().push(OtherProjector()).projector()
    from lashflow.tools import Dispatcher, ToolRegistry
    with pytest.raises(PluginError):
        Dispatcher(ToolRegistry(), plugins=runtime_plugin_stack().push(OtherProjector()))


def test_replace_needs_an_existing_plugin_and_empty_stack_passes_through():
    with pytest.raises(PluginError):
        PluginStack().replace(ToolOutputBudgetPluginFactory())
    projector = PluginStack().projector()
    assert projector.project("x" * 100_000) == "x" * 100_000
    assert projector.project({"a": 1}) == '{"a":1}'


def test_negative_config_refused():
    with pytest.raises(ValueError):
        ToolOutputBudgetConfig(limit=-1)
