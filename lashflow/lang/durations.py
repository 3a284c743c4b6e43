"""What ``sleep for`` and ``sleep until`` accept, as plain functions of a value.

Shared by the linker, which checks a literal duration or deadline when a file is
checked, and the interpreter, which converts the value a sleep computes at run time.
Each raises ``ValueError`` whose text says what was expected.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 0.001}
DURATION_FORMS = 'expected milliseconds or a string like "5s", "250ms", "2m", "1h"'


def duration_seconds(value: Any) -> float:
    """``sleep for`` a number of milliseconds or a string with a unit, in seconds."""
    if type(value) in (int, float):
        if not math.isfinite(value):
            raise ValueError("expected a finite number of milliseconds")
        return max(0.0, round(value)) / 1000.0
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(DURATION_FORMS)
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    raise ValueError("expected a number of milliseconds or a duration string")


def deadline_seconds(value: Any) -> float:
    """``sleep until`` Unix epoch milliseconds or an RFC 3339 timestamp, in epoch seconds."""
    if type(value) in (int, float):
        if not math.isfinite(value):
            raise ValueError("expected Unix epoch milliseconds")
        return value / 1000.0
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError("expected an RFC 3339 timestamp") from None
        if moment.tzinfo is None:
            raise ValueError("the timestamp needs a UTC offset")
        return moment.timestamp()
    raise ValueError("expected Unix epoch milliseconds or an RFC 3339 string")
