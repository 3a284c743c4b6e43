"""``engine.rate_limits``: define, change and look at named rate limits from Python
(``lashflow ratelimit`` is the same from the shell). The buckets live in the store
(``store.ratelimits``); tools' own rates (``@tool(rate=...)``) appear here too, named
``tool:MODULE.NAME``, but only their code changes them (ADR 0036)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import RateInvalid, UnknownRateLimit
from ..rates import format_rate, parse_rate
from ..store import RateLimitRow, Store
from ..telemetry.metrics import LimitGauges
from ..tools.clock import Clock
from ..tools.limits import check_limit_name


@dataclass(slots=True)
class RateLimitInfo:
    """A bucket and its state: ``limited_until`` is when its next free slot begins (None:
    one is free now); ``calls`` slots handed out, ``delayed`` of them later than asked."""

    name: str
    rate: tuple[float, float]
    own: bool
    calls: int
    delayed: int
    limited_until: float | None

    @classmethod
    def of(cls, row: RateLimitRow, now: float) -> "RateLimitInfo":
        return cls(row.name, row.rate, row.own, row.calls, row.delayed,
                   row.tat if row.tat > now else None)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "rate": format_rate(self.rate),
                "tool": self.name.removeprefix("tool:") if self.own else None,
                "calls": self.calls, "delayed": self.delayed,
                "limited_until": self.limited_until}


class RateLimits:
    """``await engine.rate_limits.set("payments", "10/s")``: tools declared with
    ``@tool(rate_limit="payments")`` share it, across every worker."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def set(self, name: str, rate: str | tuple[float, float]) -> RateLimitInfo:
        """Define the limit, or change its rate (slots already handed out stay)."""
        check_limit_name(name)
        parsed = parse_rate(rate, f"rate limit {name!r}")
        assert parsed is not None
        if any(row.own for row in await self.store.rate_limits(name)):
            raise RateInvalid(f"{name!r} is a tool's own rate: change it in the tool's code")
        await self.store.put_rate_limit(name, parsed, self.clock.now())
        return await self.get(name)

    async def get(self, name: str) -> RateLimitInfo:
        rows = await self.store.rate_limits(name)
        if not rows:
            raise UnknownRateLimit(f"no rate limit named {name!r}: `lashflow ratelimit set "
                                   f"{name} N/PERIOD` defines one")
        return RateLimitInfo.of(rows[0], self.clock.now())

    async def list(self) -> list[RateLimitInfo]:
        """Every limit, named ones and tools' own, by name."""
        now = self.clock.now()
        return [RateLimitInfo.of(row, now) for row in await self.store.rate_limits()]

    async def delete(self, name: str) -> None:
        """Forget a named limit: calls of its tools wait until it is defined again."""
        info = await self.get(name)
        if info.own:
            raise RateInvalid(f"{name!r} is a tool's own rate: it goes with the tool's code")
        await self.store.delete_rate_limit(name)

    async def gauges(self, now: float) -> LimitGauges:
        """Every limit and held global slot, as ``/metrics`` shows them."""
        return LimitGauges({row.name: (row.calls, row.delayed, max(0.0, row.tat - now))
                            for row in await self.store.rate_limits()},
                           await self.store.slots_held(now))

    async def slots(self) -> dict[str, int]:
        """Tools with ``global_concurrency``: their calls in flight now, across workers."""
        return await self.store.slots_held(self.clock.now())


__all__ = ["RateLimitInfo", "RateLimits"]
