"""Pages read one ahead (``durable.pages``): the next page's read is under way while the
caller works on this one, every page comes once and in order, and a caller that stops
early leaves no read behind."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from lashflow.durable.pages import pages_ahead


async def test_the_next_page_is_read_while_this_one_is_used() -> None:
    asked: list[str | None] = []
    release = asyncio.Event()

    async def read(cursor: str | None) -> tuple[int, str | None]:
        asked.append(cursor)
        number = 0 if cursor is None else int(cursor)
        if number == 2:
            await release.wait()  # the last page comes only when told
        return number, str(number + 1) if number < 2 else None

    seen = []
    async with aclosing(pages_ahead(read)) as pages:
        async for page in pages:
            await asyncio.sleep(0)  # the read ahead gets to start
            assert asked[-1] == str(page + 1) or page == 2
            seen.append(page)
            if page == 1:
                release.set()
    assert seen == [0, 1, 2] and asked == [None, "1", "2"]


async def test_stopping_early_cancels_the_read_ahead() -> None:
    reading: list[asyncio.Task[object]] = []

    async def read(cursor: str | None) -> tuple[int, str | None]:
        if cursor is not None:
            reading.append(asyncio.current_task())  # type: ignore[arg-type]
            await asyncio.Event().wait()  # never answers
        return 0, "1"

    async with aclosing(pages_ahead(read)) as pages:
        async for _ in pages:
            await asyncio.sleep(0)
            break
    assert len(reading) == 1 and reading[0].cancelled()
