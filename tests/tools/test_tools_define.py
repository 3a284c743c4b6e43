"""Defining tools: @tool, schemas, validation, raw definitions, providers, registry, loading."""

import textwrap
from pathlib import Path
import pytest
from pydantic import BaseModel

from lashflow.errors import LashflowError, UsageError
from lashflow.lang.catalog import Catalog
from lashflow.testing import run_tool
from lashflow.tools import (
    FunctionTool, RetryPolicy, ToolCall, ToolDefinition, ToolRegistry, ToolResult, load_tool_modules, tool,
    tools_from_config,
)


class Order(BaseModel):
    item: str
    qty: int


class Quote(BaseModel):
    item: str
    total: float


@tool
async def quote(order: Order) -> Quote:
    """Price an order.

    Longer text that is not part of the description."""
    return Quote(item=order.item, total=order.qty * 2.5)


@tool(name="raw_echo", module="billing", description="echo", retry=RetryPolicy.safe(max_attempts=4),
      idempotent=False, max_concurrency=2, output_tail=True)
async def echo(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"input": call.input, "name": call.name, "module": call.module})


async def test_bare_decorator_builds_definition_and_schemas():
    d = quote.definition
    assert isinstance(quote, FunctionTool)
    assert (d.module, d.name, d.id) == ("tools", "quote", "tools.quote")
    assert d.description == "Price an order."
    assert d.input_schema["required"] == ["order"]
    assert d.input_schema["additionalProperties"] is False
    assert d.input_schema["$defs"]["Order"]["properties"]["qty"]["type"] == "integer"
    assert d.output_schema["properties"]["total"]["type"] == "number"
    assert d.retry == RetryPolicy.never() and d.idempotent and d.max_concurrency is None and not d.output_tail


async def test_decorator_options():
    d = echo.definition
    assert (d.module, d.name, d.description) == ("billing", "raw_echo", "echo")
    assert d.retry.max_attempts == 4 and not d.idempotent and d.max_concurrency == 2 and d.output_tail
    assert d.input_schema == {"type": "object"} and d.output_schema is None


async def test_typed_call_returns_dumped_model():
    result = await run_tool(quote, {"order": {"item": "pen", "qty": 4}})
    assert result.outcome.status == "ok"
    assert result.outcome.value == {"item": "pen", "total": 10.0}
    assert result.wrapper == {"ok": True, "value": {"item": "pen", "total": 10.0}}


async def test_raw_call_parameter_gets_any_object():
    result = await run_tool(echo, {"anything": [1, 2]})
    assert result.outcome.value == {"input": {"anything": [1, 2]}, "name": "raw_echo", "module": "billing"}


async def test_invalid_input_is_err_with_one_line_per_field():
    result = await run_tool(quote, {"order": {"item": 3, "qty": "many"}})
    outcome = result.outcome
    assert outcome.status == "err" and outcome.code == "tool_input_invalid"
    assert outcome.message.splitlines() == [  # pydantic's text condensed, no URL
        "invalid input of tools.quote:",
        "$.order.item: expected string, got number",
        "$.order.qty: expected integer, got string"]
    assert outcome.attempts == 1
    extra = await run_tool(quote, {"order": {"item": "pen", "qty": 1}, "surprise": 1})
    assert extra.outcome.code == "tool_input_invalid"
    assert extra.outcome.message.splitlines()[1] == "$.surprise: not allowed here"
    missing = await run_tool(quote, {"order": {"qty": 1}})
    assert missing.outcome.message.splitlines()[1] == "$.order.item: missing"


async def test_output_validated_against_return_annotation():
    @tool
    async def bad() -> Quote:
        return {"item": "pen"}  # type: ignore[return-value]

    result = await run_tool(bad, {})
    assert result.outcome.status == "failed" and result.outcome.code == "tool_output_invalid"
    assert result.outcome.message.endswith("\n$.total: missing")

    @tool
    async def coerced() -> int:
        return ToolResult.ok("12")  # type: ignore[return-value]

    assert (await run_tool(coerced, {})).outcome.value == 12


async def test_plain_value_and_default_parameters():
    @tool
    async def add(a: int, b: int = 10) -> int:
        return a + b

    assert (await run_tool(add, {"a": 1})).outcome.value == 11
    assert add.definition.input_schema["required"] == ["a"]
    assert await add(1, 2) == 3  # still callable as the function


async def test_unannotated_return_dumps_models():
    @tool
    async def anything(x: int):
        return {"quote": Quote(item="a", total=x), "n": (1, 2)}

    assert (await run_tool(anything, {"x": 3})).outcome.value == {"quote": {"item": "a", "total": 3.0}, "n": [1, 2]}


async def test_non_async_and_varargs_refused():
    with pytest.raises(TypeError, match="async def"):
        tool(lambda: 1)

    async def varargs(*args: int) -> int:
        return 0

    with pytest.raises(TypeError, match=r"\*args"):
        tool(varargs)


class Counter:
    """A tool object: a raw definition plus execute and cancel_external."""

    def __init__(self) -> None:
        self.definition = ToolDefinition.raw("counter-id", "count", "counts", {"type": "object"}, {"type": "integer"})
        self.calls = 0
        self.cancelled: list[str] = []

    async def execute(self, call: ToolCall) -> ToolResult:
        self.calls += 1
        return ToolResult.ok(self.calls)

    async def cancel_external(self, key: str) -> None:
        self.cancelled.append(key)


class Provider:
    def definitions(self) -> list[ToolDefinition]:
        return [ToolDefinition.raw("p.one", "one", "", None, None, module="prov"),
                ToolDefinition.raw("p.two", "two", "", None, None, module="prov")]

    async def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult.ok(f"{call.module}.{call.name}:{call.input}")


async def test_registry_objects_providers_and_catalog():
    counter = Counter()
    registry = ToolRegistry([quote, echo, counter, Provider()])
    assert registry.get("tools", "count").definition.id == "counter-id"
    assert await registry.get("prov", "two").execute(ToolCall({"x": 1}, "two", "prov")) == ToolResult.ok(
        "prov.two:{'x': 1}")
    catalog = Catalog.of(registry.definitions())
    assert set(catalog.modules) == {"tools", "billing", "prov"}
    op = catalog.operation("tools", "quote")
    assert op is not None and op.description == "Price an order." and op.input_schema == quote.definition.input_schema
    assert catalog.operation("billing", "raw_echo") is not None
    assert await registry.cancel_external("tools", "count", "lfk_x") is True
    assert counter.cancelled == ["lfk_x"]
    assert await registry.cancel_external("tools", "quote", "lfk_x") is False


async def test_unknown_tool_and_duplicates():
    registry = ToolRegistry([quote])
    with pytest.raises(LashflowError) as info:
        registry.get("tools", "nope")
    assert info.value.code == "unknown_tool"
    registry.add(quote)  # the same tool again is harmless

    @tool(name="quote")
    async def other() -> int:
        return 1

    with pytest.raises(LashflowError) as dup:
        registry.add(other)
    assert dup.value.code == "duplicate_tool"
    here = f"{__file__}:"
    first, second = dup.value.message.split(": ", 1)[1].split(" and ")
    # both places are named, each with its line
    assert first == f"{here}{quote.fn.__code__.co_firstlineno}"
    assert second == f"{here}{other.fn.__code__.co_firstlineno}"


async def test_plain_async_function_is_registered_as_tool():
    async def ping() -> str:
        return "pong"

    registry = ToolRegistry([ping])
    assert registry.get("tools", "ping").definition.output_schema == {"type": "string"}
    registry.add(ping)  # the same function again is harmless
    assert len(registry) == 1


TOOL_FILE = textwrap.dedent('''
    from lashflow.tools import tool, ToolDefinition, ToolResult

    @tool
    async def from_file(n: int) -> int:
        return n + 1

    class Obj:
        definition = ToolDefinition.raw("obj", "obj_tool", "", None, None)
        async def execute(self, call):
            return ToolResult.ok(1)

    obj = Obj()
''')


def test_load_from_path_module_name_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "mytools.py").write_text(TOOL_FILE)
    (tmp_path / "pkgtools.py").write_text(TOOL_FILE.replace("from_file", "from_module").replace("obj_tool", "obj2"))
    (tmp_path / "pyproject.toml").write_text('[tool.lashflow]\ntools = ["mytools.py", "pkgtools"]\n')
    (tmp_path / "lashflow.toml").write_text('[tool.lashflow]\ntools = ["pkgtools", "extra.py"]\n')
    specs = tools_from_config(tmp_path)
    assert specs == ["mytools.py", "pkgtools", "extra.py"]
    modules = load_tool_modules(specs[:2], base_dir=tmp_path)
    registry = ToolRegistry(modules)
    names = {(e.definition.module, e.definition.name) for e in registry}
    assert names == {("tools", "from_file"), ("tools", "from_module"), ("tools", "obj_tool"), ("tools", "obj2")}

    # the same file loaded again is the same module: registering again is harmless
    again = load_tool_modules([tmp_path / "mytools.py"])
    assert again[0] is modules[0]
    registry.add(*again)

    with pytest.raises(UsageError, match="not found"):
        load_tool_modules(["extra.py"], base_dir=tmp_path)
    with pytest.raises(UsageError, match="not found"):
        load_tool_modules(["no_such_tools_module_xyz"])
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(UsageError, match="boom"):
        load_tool_modules(["broken.py"], base_dir=tmp_path)


def test_config_errors(tmp_path: Path):
    assert tools_from_config(tmp_path) == []
    (tmp_path / "lashflow.toml").write_text("[tool.lashflow]\ntools = 3\n")
    with pytest.raises(UsageError, match="list of strings"):
        tools_from_config(tmp_path)
    (tmp_path / "lashflow.toml").write_text("[tool.lashflow\n")
    with pytest.raises(UsageError, match="invalid TOML"):
        tools_from_config(tmp_path)


def test_explicit_module_tool_list(tmp_path: Path):
    (tmp_path / "explicit.py").write_text(TOOL_FILE + "\n__lashflow_tools__ = [obj]\n")
    registry = ToolRegistry(load_tool_modules(["explicit.py"], base_dir=tmp_path))
    assert [e.definition.name for e in registry] == ["obj_tool"]


def test_raw_definition_defaults_and_validation():
    d = ToolDefinition.raw("id", "n", "", None, None)
    assert d.input_schema == {"type": "object"} and d.output_schema is None and d.module == "tools"
    assert d.with_options(module="m").qualified_name == "m.n"
    with pytest.raises(ValueError):
        ToolDefinition.raw(" ", "n")
    with pytest.raises(ValueError):
        ToolDefinition.raw("id", "n", max_concurrency=0)
