"""``SkippingClock``: a ``FakeClock`` that never makes a caller wait.

A sleep inside a drive (a tool's retry delay, a cancel's grace period) parks on the clock
as with ``FakeClock``; then, once every sleep that starts in the same turns of the event
loop has parked too, and no journal write is in flight (``busy``), time jumps to the
earliest one due and wakes it. Parallel delays (a fan-out's members retrying) therefore
end in the order and at the simulated moments they would in production, in
microseconds. Timers a run parks on durably (``sleep for``, a completion's deadline) are
not sleeps of this clock: ``WorkflowEnv`` moves the clock to them and drives the run.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Callable

from .clock import FakeClock

# Turns of the event loop a jump waits for, so that the sleeps a fan-out's members start
# together all park before time moves (each member reaches its sleep in its own turn).
SETTLE_TURNS = 3
BUSY_RECHECK = 0.001  # real seconds between looks while a write is in flight


class SkippingClock(FakeClock):
    """Simulated wall-clock seconds; ``sleep`` returns as soon as nothing else is due first."""

    def __init__(self, start: float = 0.0, busy: Callable[[], bool] | None = None) -> None:
        super().__init__(start)
        self._busy = busy
        self._jump_scheduled = False

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._schedule_jump()
        await super().sleep(seconds)

    def _schedule_jump(self) -> None:
        if not self._jump_scheduled:
            self._jump_scheduled = True
            asyncio.get_running_loop().call_soon(self._jump, SETTLE_TURNS)

    def _jump(self, turns_left: int) -> None:
        loop = asyncio.get_running_loop()
        if turns_left:
            loop.call_soon(self._jump, turns_left - 1)
            return
        if self._busy is not None and self._busy():  # a member is still writing: its
            loop.call_later(BUSY_RECHECK, self._jump, SETTLE_TURNS)  # delay may be next
            return
        self._jump_scheduled = False
        due = self.next_due()
        if due is None:
            return
        self.advance_to(due)
        if self.sleepers:
            self._schedule_jump()

    def advance_to(self, moment: float) -> None:
        """Move the clock to ``moment`` (never back) and wake every sleep due by then."""
        self.advance(max(0.0, moment - self.now()))
        if self.now() < moment:  # ``now + (moment - now)`` may round one ulp short
            self.advance(moment - self.now() or 1e-9)


def seconds_of(duration: float | int | timedelta | str) -> float:
    """A duration as seconds: a number of seconds, a ``timedelta``, or text such as
    ``"250ms"``, ``"90s"``, ``"15m"``, ``"24h"`` or ``"30d"``."""
    if isinstance(duration, timedelta):
        return duration.total_seconds()
    if isinstance(duration, bool):
        raise TypeError("a duration is a number of seconds, a timedelta or text like '24h'")
    if isinstance(duration, (int, float)):
        return float(duration)
    if isinstance(duration, str):
        from lashflow.lang.durations import DURATION_FORMS, duration_seconds

        text = duration.strip()
        if text.endswith("d") and text[:-1].strip().replace(".", "", 1).isdigit():
            return float(text[:-1]) * 86400.0
        if text and text[-1].isdigit():
            raise ValueError(f"duration {duration!r} needs a unit: ms, s, m, h or d")
        try:
            return duration_seconds(text)
        except ValueError:
            raise ValueError(f"duration {duration!r}: {DURATION_FORMS} or \"2d\"") from None
    raise TypeError("a duration is a number of seconds, a timedelta or text like '24h'")


__all__ = ["BUSY_RECHECK", "SETTLE_TURNS", "SkippingClock", "seconds_of"]
