"""The tool registry: every registered tool by (module, name)."""

from __future__ import annotations

import inspect
import logging
import types
from collections.abc import Iterable, Iterator
from typing import Any

from lashflow.errors import LashflowError
from lashflow.tools.decorator import FunctionTool
from lashflow.tools.definition import RegisteredTool, ToolDefinition

from ..slotted import replace

__all__ = ["ToolRegistry", "tools_in_module"]

log = logging.getLogger("lashflow.tools")


def _is_tool_object(item: Any) -> bool:
    return (
        not isinstance(item, type)
        and isinstance(getattr(item, "definition", None), ToolDefinition)
        and callable(getattr(item, "execute", None))
    )


def _is_provider(item: Any) -> bool:
    return not isinstance(item, type) and callable(getattr(item, "definitions", None)) and callable(
        getattr(item, "execute", None)
    )


def _entries(item: Any) -> list[RegisteredTool]:
    """The registered form of one function, tool object, provider or module."""
    if isinstance(item, FunctionTool):
        return [RegisteredTool(item.definition, item.execute, item.cancel_hook, item)]
    if isinstance(item, types.ModuleType):
        return [entry for found in tools_in_module(item) for entry in _entries(found)]
    if _is_tool_object(item):
        return [RegisteredTool(item.definition, item.execute, getattr(item, "cancel_external", None), item)]
    if _is_provider(item):
        entries = []
        hook = getattr(item, "cancel_external", None)
        for definition in item.definitions():
            cancel = None
            if hook is not None:
                async def cancel(key: str, _definition: ToolDefinition = definition) -> Any:
                    return await hook(_definition, key)
            entries.append(RegisteredTool(definition, item.execute, cancel, item))
        return entries
    if inspect.iscoroutinefunction(item):
        # keyed by the function itself, so adding the same plain function twice is harmless
        return [replace(entry, source=item) for entry in _entries(FunctionTool(item))]
    raise TypeError(f"not a tool, tool object, provider or module: {item!r}")


def tools_in_module(module: types.ModuleType) -> list[Any]:
    """The tools a loaded module defines: ``__lashflow_tools__`` if set, else every
    ``@tool`` function and tool object at module level."""
    explicit = getattr(module, "__lashflow_tools__", None)
    if explicit is not None:
        return list(explicit)
    return [value for value in vars(module).values() if isinstance(value, FunctionTool) or _is_tool_object(value)]


class ToolRegistry:
    """Tools by ``(module, name)``. Adding the same tool twice is harmless; two different
    tools under one name are refused."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[tuple[str, str], RegisteredTool] = {}
        # whether any tool has a limit held in the store (a rate or a global concurrency):
        # while none has, a call's three checks of its tool's limits are one test
        self.limited = False
        for item in tools:
            self.add(item)

    def add(self, *items: Any) -> list[RegisteredTool]:
        """Register functions, ``@tool`` functions, tool objects, providers or modules."""
        added: list[RegisteredTool] = []
        for item in items:
            for entry in _entries(item):
                key = (entry.definition.module, entry.definition.name)
                existing = self._tools.get(key)
                if existing is not None and existing.source is not entry.source:
                    raise LashflowError(
                        f"two different tools are registered as "
                        f"`{entry.definition.qualified_name}`: {_defined_at(existing.source)} "
                        f"and {_defined_at(entry.source)}",
                        code="duplicate_tool",
                        hint="rename one (@tool(name=...)) or give it another module "
                             "(@tool(module=...))",
                    )
                self._tools[key] = entry
                definition = entry.definition
                if definition.bucket is not None or definition.global_concurrency is not None:
                    self.limited = True
                added.append(entry)
        return added

    def get(self, module: str, name: str) -> RegisteredTool:
        entry = self._tools.get((module, name))
        if entry is None:
            raise LashflowError(f"unknown tool `{module}.{name}`", code="unknown_tool")
        return entry

    lookup = get

    def __contains__(self, key: object) -> bool:
        return key in self._tools

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        return [entry.definition for entry in self._tools.values()]

    async def cancel_external(self, module: str, name: str, key: str) -> bool:
        """Call the tool's ``cancel_external(key)`` hook; False when it has none.

        A failing hook is logged, not raised: cancelling a run must not fail because the
        external system did not answer.
        """
        entry = self._tools.get((module, name))
        if entry is None or entry.cancel_external is None:
            return False
        try:
            await entry.cancel_external(key)
        except Exception:
            log.exception("cancel_external of %s.%s failed", module, name)
        return True


def _defined_at(source: Any) -> str:
    """Where a tool's code is written (``flow.py:12``), to tell two clashing tools apart."""
    code = getattr(getattr(source, "fn", source), "__code__", None)
    if code is None:
        return f"an object of type {type(source).__name__}"
    return f"{code.co_filename}:{code.co_firstlineno}"
