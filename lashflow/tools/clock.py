"""Time as an injected dependency.

Every delay and deadline in the tool layer (retry backoff, cancel grace, pending
deadlines) goes through a ``Clock`` so tests can drive time with
``lashflow.testing.FakeClock`` instead of waiting for real.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock seconds (deadlines are journaled as absolute times) and a sleep."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The production clock: ``time.time()`` and ``asyncio.sleep``."""

    # ``time.time`` itself, not a method calling it: read about three times a step, and
    # each call of a Python method is a frame of its own
    now = staticmethod(time.time)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
