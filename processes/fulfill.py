"""Tools for fulfill.lash: quote, request_approval (parks on a completion key), charge."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from lashflow import PendingCompletion, ToolCall, ToolResult, tool


@tool
async def quote(order: dict[str, Any]) -> dict[str, Any]:
    """Price the order from its items (the stated total is only a hint)."""
    amount = sum(float(item.get("price", 0)) * int(item.get("qty", 1)) for item in order["items"])
    return {"order_id": order["id"], "amount": round(amount, 2), "currency": "EUR"}


@tool(name="request_approval")
async def request_approval(call: ToolCall) -> ToolResult:
    """Ask a human; the run waits durably until `lashflow complete KEY ...`, a webhook
    or the console's inbox answers. A real tool would send the approver its URL here
    (``await call.context.completion_url()``) by mail or chat; never print or log it:
    the key in it is the credential, and a server's log is read by many."""
    await call.context.completion_key()  # `lashflow waiting` and the inbox show it
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(hours=24)))


@tool
async def charge(approval: dict[str, Any]) -> ToolResult:
    """Charge only what was approved; a refusal is a tool error the process sees."""
    if not approval.get("approved"):
        return ToolResult.err("the order was not approved")
    receipt = hashlib.sha256(repr(sorted(approval.items())).encode()).hexdigest()[:12]
    return ToolResult.ok({"charged": True, "receipt": f"rcpt_{receipt}"})
