"""``sleep for`` durations and ``sleep until`` deadlines as absolute times.

Deadlines are journaled as absolute seconds so a resumed run waits only what is left.
What a duration or deadline may be is decided in ``lashflow.lang.durations`` (the
linker checks literal ones with the same rules); a value computed at run time that
does not fit is a runtime ``ValueError`` located at the sleep.
"""

from __future__ import annotations

from typing import Any

from lashflow.lang.durations import deadline_seconds, duration_seconds


def _error(kind: str, value: Any, why: str, span: tuple[int, int]) -> Exception:
    from .errors import LashRuntimeError
    from .values import display as stringify

    return LashRuntimeError("ValueError", f"sleep failed: invalid {kind} `{stringify(value)}`: {why}",
                            span)


def sleep_deadline(mode: str, value: Any, now: float, span: tuple[int, int] = (0, 0)) -> float:
    """Absolute wake time; a deadline in the past means no sleep at all."""
    try:
        if mode == "for":
            return now + duration_seconds(value)
        return max(now, deadline_seconds(value))
    except ValueError as exc:
        raise _error("duration" if mode == "for" else "deadline", value, str(exc), span) from None
