"""Tools for thumbnails.lash: a resizer that refuses files that are not images."""

from __future__ import annotations

import asyncio

from lashflow import ToolResult, tool


@tool
async def resize(image: str, width: int) -> ToolResult:
    """Pretend to resize `image` to `width` pixels."""
    await asyncio.sleep(0.02)
    if not image.endswith((".png", ".jpg")):
        return ToolResult.err(f"{image} is not an image")
    stem = image.rsplit(".", 1)[0]
    return ToolResult.ok({"thumbnail": f"{stem}-{width}w.png", "width": width})
