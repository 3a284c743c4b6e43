"""``FakeClock``: time that moves only when a test says so.

Kept apart from the package's ``__init__`` so that ``import lashflow.testing`` (which the
pytest plugin does at start-up) loads nothing until a name is used.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time


class FakeClock:
    """A clock that moves only when told to.

    ``sleep`` parks the caller until ``advance`` moves ``now()`` past its due time;
    ``advance`` is a plain method so it can be called from anywhere in a test.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._due: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._due, (self._now + seconds, next(self._seq), future))
        try:
            await future
        finally:
            if not future.done():
                future.cancel()

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleep that falls due (earliest first)."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds
        while self._due and self._due[0][0] <= self._now:
            _, _, future = heapq.heappop(self._due)
            if not future.done():
                future.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are parked right now."""
        return sum(1 for _, _, future in self._due if not future.done())

    def next_due(self) -> float | None:
        """The earliest time a parked sleep falls due, or None."""
        due = [at for at, _, future in self._due if not future.done()]
        return min(due) if due else None

    async def wait_for_sleepers(self, count: int = 1, timeout: float = 5.0) -> None:
        """Yield to the loop until ``count`` sleeps are parked (fails after ``timeout`` real s)."""
        give_up = time.monotonic() + timeout
        spins = 0
        while self.sleepers < count:
            spins += 1
            await asyncio.sleep(0 if spins < 200 else 0.001)
            if time.monotonic() > give_up:
                raise TimeoutError(f"expected {count} parked sleeps, found {self.sleepers}")


__all__ = ["FakeClock"]
