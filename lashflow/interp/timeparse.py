"""``sleep for`` durations and ``sleep until`` deadlines (REFERENCE 4.11) as absolute times.

Deadlines are journaled as absolute seconds so a resumed run waits only what is left.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 0.001}


def _error(kind: str, value: Any, why: str, span: tuple[int, int]) -> Exception:
    from .errors import LashRuntimeError
    from .values import display as stringify

    return LashRuntimeError("ValueError", f"sleep failed: invalid {kind} `{stringify(value)}`: {why}",
                            span)


def duration_seconds(value: Any, span: tuple[int, int] = (0, 0)) -> float:
    if type(value) in (int, float):
        if not math.isfinite(value):
            raise _error("duration", value, "expected a finite number of milliseconds", span)
        return max(0.0, round(value)) / 1000.0
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise _error("duration", value, 'expected milliseconds or a string like "5s", '
                         '"250ms", "2m", "1h"', span)
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    raise _error("duration", value, "expected a number of milliseconds or a duration string", span)


def deadline_seconds(value: Any, span: tuple[int, int] = (0, 0)) -> float:
    if type(value) in (int, float):
        if not math.isfinite(value):
            raise _error("deadline", value, "expected Unix epoch milliseconds", span)
        return value / 1000.0
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise _error("deadline", value, "expected an RFC 3339 timestamp", span) from None
        if moment.tzinfo is None:
            raise _error("deadline", value, "the timestamp needs a UTC offset", span)
        return moment.timestamp()
    raise _error("deadline", value, "expected Unix epoch milliseconds or an RFC 3339 string", span)


def sleep_deadline(mode: str, value: Any, now: float, span: tuple[int, int] = (0, 0)) -> float:
    """Absolute wake time; a deadline in the past means no sleep at all."""
    if mode == "for":
        return now + duration_seconds(value, span)
    return max(now, deadline_seconds(value, span))
