"""Reading pages of runs one ahead: the next page is read while the caller works on this
one (a bulk action's writes, verify's replays), so the database and this process work at
the same time instead of in turn."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncGenerator, Awaitable, Callable, TypeVar

T = TypeVar("T")

Read = Callable[[str | None], Awaitable[tuple[T, str | None]]]


async def pages_ahead(read: Read[T]) -> AsyncGenerator[T, None]:
    """Each page ``read(cursor)`` answers (with the next page's cursor, None after the
    last), from the first (cursor None) on."""
    ahead = asyncio.ensure_future(read(None))
    try:
        while True:
            page, cursor = await ahead
            if cursor is not None:
                ahead = asyncio.ensure_future(read(cursor))
            yield page
            if cursor is None:
                return
    finally:
        if not ahead.done():  # the caller stopped early: the page read ahead has no reader
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ahead


__all__ = ["pages_ahead"]
