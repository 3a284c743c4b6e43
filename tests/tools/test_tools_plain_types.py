"""Plain-typed tools are checked without pydantic: same schemas, same results, same errors.

Each case is run twice: through the fast path, and through the pydantic model the
decorator would otherwise build; both must agree exactly."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ConfigDict, TypeAdapter, create_model

from lashflow import ToolCall, ToolResult, tool
from lashflow.tools.plain_types import plain_input_schema, plain_schema


@tool
async def plain(i: int, x: float, s: str, b: bool, d: dict, l: list, a: Any,
                run_id: str = "r") -> dict:
    return {"i": i, "x": x, "s": s, "b": b, "d": d, "l": l, "a": a, "run_id": run_id}


@tool
async def mixed(a: int, limit: int | None = None) -> int:
    return a


@tool
async def scalar(i: int = 3, flag: bool = False, name: str = "n", ratio: float = 0.5) -> int:
    return i * 2


@tool
async def echo_float(v: Any) -> float:
    return v


def pydantic_schema(name: str, fields: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    return create_model(f"{name}_input", __config__=ConfigDict(extra="forbid"),
                        **fields).model_json_schema()


@pytest.mark.parametrize("annotation", [int, float, str, bool, dict, list, Any])
def test_a_plain_field_schema_is_pydantics(annotation: Any) -> None:
    fields = {"some_field": (annotation, ...), "other": (annotation, None)}
    assert plain_input_schema("t_input", fields) == pydantic_schema("t", fields)
    if annotation is not Any:
        assert plain_schema(annotation) == TypeAdapter(annotation).json_schema(mode="serialization")


def test_defaults_and_titles_match_pydantic() -> None:
    fields = {"run_id": (str, "r"), "max_tries": (int, 3), "on": (bool, True), "x": (float, 1.5)}
    assert plain_input_schema("t_input", fields) == pydantic_schema("t", fields)


def test_other_annotations_and_mutable_defaults_are_left_to_pydantic() -> None:
    assert plain_input_schema("t_input", {"x": (list[int], ...)}) is None
    assert plain_input_schema("t_input", {"x": (int | None, None)}) is None
    assert plain_input_schema("t_input", {"x": (list, [])}) is None
    # the tool still works: its schema came from pydantic
    assert not mixed._plain_input and mixed.definition.input_schema["properties"]["limit"]["anyOf"]
    assert plain._plain_input and scalar._plain_input


INPUTS: list[Any] = [
    {"i": 1, "x": 2.5, "s": "s", "b": True, "d": {"k": 1}, "l": [1], "a": None},
    {"i": 1, "x": 2, "s": "s", "b": False, "d": {}, "l": [], "a": [1]},        # int -> float
    {"i": 1, "x": -(2**53), "s": "s", "b": False, "d": {}, "l": [], "a": 1},   # exact float
    {"i": 1, "x": 2**60 + 1, "s": "s", "b": False, "d": {}, "l": [], "a": 1},  # rounded
    {"i": "7", "x": 2.5, "s": "s", "b": True, "d": {}, "l": [], "a": 1},       # coerced str
    {"i": True, "x": 2.5, "s": "s", "b": True, "d": {}, "l": [], "a": 1},      # bool as int
    {"i": 1.0, "x": 2.5, "s": "s", "b": 1, "d": {}, "l": [], "a": 1},          # lax numbers
    {"i": 1.5, "x": 2.5, "s": "s", "b": True, "d": {}, "l": [], "a": 1},       # refused
    {"i": 1, "x": float("nan"), "s": "s", "b": True, "d": {}, "l": [], "a": 1},
    {"i": 1, "x": 2.5, "s": 5, "b": True, "d": {}, "l": [], "a": 1},           # not a str
    {"i": 1, "x": 2.5, "s": "s", "b": True, "d": {}, "l": [], "a": 1, "zz": 1},  # extra key
    {"x": 2.5, "s": "s", "b": True, "d": {}, "l": [], "a": 1},                 # missing
    {"i": 1, "x": 2.5, "s": "s", "b": True, "d": {}, "l": [], "a": 1, "run_id": "q"},
    [1, 2],
    None,
]


async def through_pydantic(fn: Any, data: Any) -> ToolResult:
    """The same call with the fast path switched off."""
    fn._plain_input = False
    try:
        return await fn.execute(ToolCall(data, fn.definition.name, "tools"))
    finally:
        fn._plain_input = True


def same(a: ToolResult, b: ToolResult) -> bool:
    if a.is_ok and b.is_ok:
        return repr(a.value) == repr(b.value)  # nan == nan, and 1 vs 1.0 told apart
    return a == b


@pytest.mark.parametrize("data", INPUTS)
async def test_calls_come_out_as_pydantic_would_have_it(data: Any) -> None:
    fast = await plain.execute(ToolCall(data, "plain", "tools"))
    slow = await through_pydantic(plain, data)
    assert same(fast, slow), (fast, slow)


@pytest.mark.parametrize("data", [{}, {"i": 4}, {"i": "4"}, {"ratio": 1}, {"flag": "yes"},
                                  {"i": 2, "flag": True, "name": "x", "ratio": 0.1}])
async def test_defaults_and_scalar_outputs_agree(data: Any) -> None:
    assert same(await scalar.execute(ToolCall(data, "scalar", "tools")),
                await through_pydantic(scalar, data))


@pytest.mark.parametrize("value", [1.5, 2, float("inf"), float("nan"), "3.5", "x", True])
async def test_float_outputs_agree(value: Any) -> None:
    fast = await echo_float.execute(ToolCall({"v": value}, "echo_float", "tools"))
    adapter = TypeAdapter(float)
    try:
        expected = ToolResult.ok(adapter.dump_python(adapter.validate_python(value), mode="json"))
    except Exception:
        assert not fast.is_ok and fast.code == "tool_output_invalid"
        return
    assert same(fast, expected)
    if isinstance(value, float) and math.isfinite(value):
        assert fast.value is value


def test_a_plain_tool_module_loads_and_runs_without_importing_pydantic(tmp_path: Any) -> None:
    script = (
        "import asyncio, sys\n"
        "from lashflow import tool, ToolCall\n"
        "@tool\n"
        "async def tick(i: int, note: str = '') -> int:\n"
        "    return i + 1\n"
        "out = asyncio.run(tick.execute(ToolCall({'i': 1}, 'tick', 'tools')))\n"
        "assert out.value == 2, out\n")
    assert pydantic_modules_after(script) == []


def pydantic_modules_after(script: str) -> list[str]:
    """The pydantic modules a fresh interpreter has imported once ``script`` ran."""
    script += "print(' '.join(sorted(m for m in sys.modules if m.startswith('pydantic'))))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@tool
async def echo_dict(v: Any) -> dict:
    return v


@tool
async def echo_list(v: Any) -> list:
    return v


CONTAINERS: list[Any] = [
    {}, {"a": 1, "b": [1.5, None, True, "x", {"c": []}]}, {"x": float("inf")},
    {"x": float("nan")}, {1: "int key"}, {"t": (1, 2)}, {"s": {1, 2}}, {"deep": [[[[1]]]]},
    [], [1, "a", {"k": None}], [(1, 2)], [float("-inf")], "not a dict", 5,
]


@pytest.mark.parametrize("value", CONTAINERS)
async def test_dict_and_list_outputs_agree(value: Any) -> None:
    """`-> dict` and `-> list` tools answer what pydantic's adapter answers, but plain JSON
    data takes a path with no pydantic (its first use costs ~80 ms in the middle of a
    batch)."""
    for fn, annotation in ((echo_dict, dict), (echo_list, list)):
        fast = await fn.execute(ToolCall({"v": value}, fn.definition.name, "tools"))
        adapter = TypeAdapter(annotation)
        try:
            expected = ToolResult.ok(adapter.dump_python(adapter.validate_python(value),
                                                         mode="json"))
        except Exception:
            assert not fast.is_ok and fast.code == "tool_output_invalid"
            continue
        assert same(fast, expected), (fn, value, fast, expected)


async def test_a_returned_dict_is_copied_so_later_changes_do_not_reach_the_journal() -> None:
    shared: dict[str, Any] = {"n": 1, "items": [1]}

    @tool
    async def leaky() -> dict:
        return shared

    out = await leaky.execute(ToolCall({}, "leaky", "tools"))
    shared["n"] = 2
    shared["items"].append(2)
    assert out.value == {"n": 1, "items": [1]}
    listed = ToolResult.ok([1, 2])
    assert listed.value == [1, 2]


def test_a_dict_returning_fan_out_runs_without_importing_pydantic(tmp_path: Any) -> None:
    script = (
        "import asyncio, sys\n"
        "from lashflow import Engine, tool\n"
        "@tool\n"
        "async def fetch(url: str) -> dict:\n"
        "    return {'url': url, 'size': len(url), 'tags': ['a', None, 1.5]}\n"
        "async def main():\n"
        f"    async with Engine(db='sqlite:///{tmp_path / 'x.db'}', tools=[fetch]) as engine:\n"
        "        out = await engine.run('finish await [tools.fetch({ url: u })? "
        "for u in [\"a\", \"bb\"]]')\n"
        "        assert out.result[1] == {'url': 'bb', 'size': 2, 'tags': ['a', None, 1.5]}, out\n"
        "asyncio.run(main())\n")
    assert pydantic_modules_after(script) == []


async def test_a_validator_needed_mid_batch_is_built_off_the_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A call whose input needs pydantic (an int where a float is declared) builds the
    model on first need in a thread: the loop goes on meanwhile. The build here waits
    for an event only the loop sets, so a build on the loop would never finish."""
    import asyncio
    import threading

    from lashflow.tools.decorator import FunctionTool

    @tool
    async def scale(x: float) -> float:
        return x * 2

    gate = threading.Event()
    built = FunctionTool._model

    def gated_model(self: FunctionTool) -> Any:
        assert gate.wait(10), "the model was built on the loop: nothing else could run"
        return built(self)

    monkeypatch.setattr(FunctionTool, "_model", gated_model)

    async def open_gate() -> None:
        await asyncio.sleep(0)
        gate.set()

    out, _ = await asyncio.gather(scale.execute(ToolCall({"x": 3}, "scale", "tools")),
                                  open_gate())
    assert out.is_ok and out.value == 6.0
