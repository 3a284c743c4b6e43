"""Tools for retry.lash: a service that fails its first two attempts, and one that is down.

Both are retried by their RetryPolicy: up to 4 attempts, waiting 50 ms, 100 ms, 200 ms
between them (``base_delay * 2**i``). Only failures marked retryable are retried.
"""

from __future__ import annotations

from lashflow import RetryPolicy, ToolCall, ToolResult, tool

RATES = {"USD": 1.08, "GBP": 0.85, "JPY": 161.2}


@tool(retry=RetryPolicy.safe(max_attempts=4, base_delay=0.05))
async def fetch_rates(call: ToolCall, base: str) -> ToolResult:
    """Answers on the third attempt; attempt numbers come from the journal."""
    if call.context.attempt < 3:
        return ToolResult.retryable_failure(f"rates service busy (attempt {call.context.attempt})",
                                            code="http_503")
    return ToolResult.ok(dict(RATES))


@tool(retry=RetryPolicy.safe(max_attempts=4, base_delay=0.05))
async def legacy_rates(base: str) -> dict[str, float]:
    """Always down: an exception is a retryable failure (code ``tool_exception``)."""
    raise ConnectionError("legacy rates service refused the connection")
