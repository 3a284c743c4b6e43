"""Tools for approval.lash: file a claim, pay it once approved."""

from __future__ import annotations

import hashlib
from typing import Any

from lashflow import ToolCall, tool


@tool
async def file_claim(call: ToolCall, employee: str, amount: float) -> dict[str, Any]:
    """The claim id is derived from the call's idempotency key: a retried or replayed
    attempt files the same claim, never a second one."""
    digest = hashlib.sha256(call.context.idempotency_key.encode()).hexdigest()[:8]
    return {"id": f"clm-{digest}", "employee": employee, "amount": amount}


@tool
async def pay(claim: dict[str, Any]) -> dict[str, Any]:
    """Pay an approved claim."""
    return {"paid": claim["amount"], "to": claim["employee"], "ref": f"pay-{claim['id'][4:]}"}
