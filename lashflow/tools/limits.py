"""Limits a tool's calls share with every worker (``@tool(rate=..., rate_limit=...,
global_concurrency=...)``): how they are declared, and the gate an attempt passes.

The tool layer knows no store: the durable host hands each call a ``CallGate`` that
takes from the store's token bucket and concurrency slots (``durable.ratelimits``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Protocol

from lashflow.errors import RateInvalid
from lashflow.rates import parse_rate

__all__ = ["CallGate", "check_limit_name", "limit_options"]

MAX_NAME = 100
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_limit_name(name: object, where: str = "") -> str:
    """A named rate limit: like a queue name (``tool:`` names are the tools' own)."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not _NAME.match(name):
        raise RateInvalid(f"{where}rate limit name {name!r}: 1 to {MAX_NAME} letters, digits, "
                          "'_', '.' or '-', starting with a letter or digit")
    return name


def limit_options(tool: str, rate: Any, rate_limit: Any, global_concurrency: Any
                  ) -> dict[str, Any]:
    """``ToolDefinition`` fields of ``@tool``'s limit options, checked: a bad one raises
    ``RateInvalid`` (code ``rate_invalid``) naming the tool."""
    if rate is not None and rate_limit is not None:
        raise RateInvalid(f"tool {tool!r}: give rate= (its own limit) or rate_limit= (a "
                          "named one, shared), not both")
    if global_concurrency is not None and (isinstance(global_concurrency, bool)
                                           or not isinstance(global_concurrency, int)
                                           or global_concurrency < 1):
        raise RateInvalid(f"tool {tool!r}: global_concurrency must be a whole number of at "
                          f"least 1 (got {global_concurrency!r})")
    return {"rate": parse_rate(rate, f"tool {tool!r}: rate"),
            "rate_limit": None if rate_limit is None else check_limit_name(
                rate_limit, f"tool {tool!r}: "),
            "global_concurrency": global_concurrency}


class CallGate(Protocol):
    """What one call's attempts pass beyond this process's own semaphores: a rate slot
    (the first attempt's may have been reserved before the call started) and a slot of
    the tool's global concurrency. ``enter`` waits; False: cancelled meanwhile."""

    async def enter(self, attempt: int, cancel: asyncio.Event | None) -> bool: ...

    @property
    def taken(self) -> float | None:
        """The rate slot of the attempt just let in (None: no rate)."""

    async def leave(self) -> None: ...
