"""Retry policies: how many attempts, and how long between them."""

from __future__ import annotations

import enum

from ..slotted import Frozen

__all__ = ["RetryPolicy"]

_MAX_SHIFT = 64  # 2**64 * any sane base delay is already "forever"; avoids float overflow


class _Kind(str, enum.Enum):
    NEVER = "never"
    SAFE = "safe"


class RetryPolicy(Frozen):
    """``never()`` (one attempt, the default) or ``safe(...)``.

    ``max_attempts`` counts attempts including the first. The delay before retry ``i``
    (0-based) is ``base_delay * 2**i`` or the tool's requested ``after``, capped by
    ``max_delay`` unless that is 0.
    """

    __slots__ = ("kind", "max_attempts", "base_delay", "max_delay")
    kind: _Kind
    max_attempts: int
    base_delay: float
    max_delay: float

    def __init__(
            self,
            kind: _Kind = _Kind.NEVER,
            max_attempts: int = 1,
            base_delay: float = 0.5,
            max_delay: float = 30.0,
    ) -> None:
        setter = object.__setattr__
        setter(self, "kind", kind)
        setter(self, "max_attempts", max_attempts)
        setter(self, "base_delay", base_delay)
        setter(self, "max_delay", max_delay)
        if self.max_attempts < 1:
            raise ValueError("max_attempts counts the first attempt: it must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays cannot be negative")

    @classmethod
    def never(cls) -> "RetryPolicy":
        return cls(_Kind.NEVER, 1)

    @classmethod
    def safe(cls, max_attempts: int = 3, base_delay: float = 0.5, max_delay: float = 30.0) -> "RetryPolicy":
        return cls(_Kind.SAFE, max_attempts, float(base_delay), float(max_delay))

    @property
    def retries(self) -> bool:
        return self.kind is _Kind.SAFE

    def delay(self, retry_index: int, requested_after: float | None = None) -> float:
        """Seconds to wait before retry ``retry_index`` (0 = before the second attempt)."""
        if self.kind is _Kind.NEVER:
            return 0.0
        if requested_after is not None:
            delay = float(requested_after)
        else:
            delay = self.base_delay * float(2 ** min(max(retry_index, 0), _MAX_SHIFT))
        return min(delay, self.max_delay) if self.max_delay > 0 else delay

    def to_json(self) -> dict[str, object]:
        return {"type": self.kind.value, "max_attempts": self.max_attempts,
                "base_delay": self.base_delay, "max_delay": self.max_delay}
