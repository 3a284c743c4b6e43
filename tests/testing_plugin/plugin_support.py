"""What the plugin's tests share: a small workflow with its tools, and how to run pytest
inside a test."""

from __future__ import annotations

import pytest

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
    return project.runpytest("-p", "no:cacheprovider", "-p", "no:asyncio", *args)
