"""``run_tool``: one tool through a real ``Dispatcher``, for a tool's unit tests."""

from __future__ import annotations

from typing import Any


async def run_tool(tool: Any, input: Any = None, **dispatcher_options: Any) -> Any:
    """Run one tool through a real ``Dispatcher`` and return its ``DispatchResult``.

    Handy in a tool's unit tests: input validation, retries, budget and outcome
    mapping all behave as in the engine.
    """
    from lashflow.tools.dispatch import DispatchCall, Dispatcher
    from lashflow.tools.registry import ToolRegistry

    registry = ToolRegistry()
    entries = registry.add(tool)
    entry = entries[0]
    dispatcher = Dispatcher(registry, **dispatcher_options)
    call = DispatchCall(entry.definition.module, entry.definition.name, {} if input is None else input, "test:0")
    return await dispatcher.call(call)


__all__ = ["run_tool"]
