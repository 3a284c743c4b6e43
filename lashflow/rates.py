"""Rates as users write them (``"10/s"``, ``"100/m"``, ``"5/30s"``): parsed once, for
queues and tool rate limits alike, each raising its own error class."""

from __future__ import annotations

import math
import re

from .errors import LashflowError, RateInvalid

_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
            "h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}
RATE_FORMS = 'N/PERIOD, like "10/s", "100/m", "5/30s" or "1000/h"'
# a duration's parts (``1h30m``): shared with schedules' durations
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_rate(text: str | tuple[float, float] | None, what: str = "rate",
               error: type[LashflowError] = RateInvalid) -> tuple[float, float] | None:
    """(count, period in seconds) of ``"10/s"``-style text; None stays None."""
    if text is None:
        return None
    if isinstance(text, tuple):
        count, period = float(text[0]), float(text[1])
    else:
        number, slash, unit = str(text).replace(" ", "").partition("/")
        try:
            count = float(number)
        except ValueError:
            raise error(f"{what}: {text!r} is not {RATE_FORMS}") from None
        if not slash:
            raise error(f"{what}: {text!r} is not {RATE_FORMS}")
        found = _PERIODS.get(unit.lower()) or _duration(unit.lower())
        if found is None:
            raise error(f"{what}: {text!r} is not {RATE_FORMS}")
        period = found
    if not (math.isfinite(count) and count > 0 and math.isfinite(period) and period > 0):
        raise error(f"{what}: {text!r}: both the count and the period must be above 0")
    return count, period


def _duration(text: str) -> float | None:
    """Seconds of ``30s``/``1h30m``; None if it is not one."""
    parts = DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * UNIT_SECONDS[unit] for number, unit in parts)


def format_rate(rate: tuple[float, float] | None) -> str:
    if rate is None:
        return "-"
    count, period = rate
    unit = {1.0: "s", 60.0: "m", 3600.0: "h", 86400.0: "d"}.get(period, f"{period:g}s")
    return f"{count:g}/{unit}"


__all__ = ["DURATION_PART", "RATE_FORMS", "UNIT_SECONDS", "format_rate", "parse_rate"]
