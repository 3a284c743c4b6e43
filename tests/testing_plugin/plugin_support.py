"""What the plugin's tests share: a small workflow with its tools, and how to run pytest
inside a test."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

# Installed by `pip install -e .`: a checkout installed before the plugin existed lacks it
# until it is installed again, and the tests then load the plugin by its module name.
ENTRY_POINT = bool(entry_points(group="pytest11", name="lashflow"))

FLOW = """
process order(id: str) {
  quoted = await tools.quote({ id: id })?
  approved = await tools.approve({ quote: quoted })?
  finish { id: id, approved: approved }
}
"""

TOOLS = '''
from datetime import timedelta
from lashflow import PendingCompletion, ToolCall, ToolResult, tool

@tool
async def quote(id: str) -> dict:
    return {"id": id, "amount": 12.5}

@tool(name="approve")
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(hours=24)))
'''


def inner(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A pytest run inside this one, with the plugins it does not need left out."""
    load = () if ENTRY_POINT or "no:lashflow" in args else ("-p", "lashflow.testing.plugin")
    return project.runpytest("-p", "no:cacheprovider", "-p", "no:asyncio", *load, *args)
