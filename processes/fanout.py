"""Tools for fanout.lash: a stock lookup that fails for one warehouse, and a reservation."""

from __future__ import annotations

import asyncio

from lashflow import ToolResult, tool

STOCK = {"north": 12, "south": 40}


@tool
async def stock(warehouse: str, sku: str) -> ToolResult:
    """Units of `sku` in `warehouse`; the east warehouse is offline (a tool error)."""
    await asyncio.sleep(0.05)  # the three calls of the batch overlap: ~50 ms in all
    if warehouse not in STOCK:
        return ToolResult.err(f"warehouse {warehouse} is offline")
    return ToolResult.ok({"warehouse": warehouse, "sku": sku, "units": STOCK[warehouse]})


@tool
async def reserve(warehouse: str, sku: str, qty: int) -> dict[str, object]:
    """Reserve `qty` units; the reservation id is derived from the request."""
    return {"reservation": f"rsv-{warehouse}-{sku}-{qty}", "warehouse": warehouse, "qty": qty}
