"""What one tool attempt answers and how a deferred answer waits.

``ToolResult`` is the tool author's vocabulary; the attempt runner turns it into a
``ToolOutcome`` (the journal's record) and from there into what the process sees.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any, ClassVar

from lashflow.json_text import compact_any as compact
from lashflow.tools._json import jsonable

from ..slotted import Frozen, replace, slot_setters

__all__ = [
    "OnCancel", "OnTimeout", "PendingCompletion", "ResultKind", "Retry", "ToolResult",
    "as_seconds",
]


def as_seconds(value: timedelta | float | int | None) -> float | None:
    """Durations are accepted as ``timedelta`` or seconds; stored as float seconds."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


class Retry(Frozen):
    """Whether a failure may be retried: ``Retry.NEVER`` or ``Retry.safe(after)``.

    ``after`` (seconds) is the delay the tool asks for; the policy still caps it.
    """

    __slots__ = ("retryable", "after")
    NEVER: ClassVar["Retry"]
    retryable: bool
    after: float | None

    def __init__(self, retryable: bool = False, after: float | None = None) -> None:
        setter = object.__setattr__
        setter(self, "retryable", retryable)
        setter(self, "after", after)

    @classmethod
    def safe(cls, after: timedelta | float | None = None) -> "Retry":
        return cls(True, as_seconds(after))


Retry.NEVER = Retry(False, None)


class OnTimeout(str, enum.Enum):
    """What a pending call's deadline does: the process gets an error, or the run fails."""

    ERROR_AS_RESULT = "error_as_result"
    FAIL_TURN = "fail_turn"


class OnCancel(str, enum.Enum):
    """What cancelling the run does to the external work of a pending call."""

    CANCEL_EXTERNAL_WORK = "cancel_external_work"
    IGNORE = "ignore"


class PendingCompletion(Frozen):
    """How long a deferred result may take and what timeout/cancel do."""

    __slots__ = ("deadline", "on_timeout", "on_cancel")
    deadline: timedelta | None
    on_timeout: OnTimeout
    on_cancel: OnCancel

    def __init__(
            self,
            deadline: timedelta | None = None,
            on_timeout: OnTimeout = OnTimeout.ERROR_AS_RESULT,
            on_cancel: OnCancel = OnCancel.CANCEL_EXTERNAL_WORK,
    ) -> None:
        setter = object.__setattr__
        setter(self, "deadline", deadline)
        setter(self, "on_timeout", on_timeout)
        setter(self, "on_cancel", on_cancel)

    def with_deadline(self, deadline: timedelta | float) -> "PendingCompletion":
        seconds = as_seconds(deadline)
        return replace(self, deadline=timedelta(seconds=seconds or 0.0))

    def fail_turn_on_timeout(self) -> "PendingCompletion":
        return replace(self, on_timeout=OnTimeout.FAIL_TURN)

    def ignore_on_cancel(self) -> "PendingCompletion":
        return replace(self, on_cancel=OnCancel.IGNORE)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"on_timeout": self.on_timeout.value, "on_cancel": self.on_cancel.value}
        if self.deadline is not None:
            data["deadline"] = self.deadline.total_seconds()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PendingCompletion":
        deadline = data.get("deadline")
        return cls(
            deadline=None if deadline is None else timedelta(seconds=deadline),
            on_timeout=OnTimeout(data.get("on_timeout", OnTimeout.ERROR_AS_RESULT.value)),
            on_cancel=OnCancel(data.get("on_cancel", OnCancel.CANCEL_EXTERNAL_WORK.value)),
        )


class ResultKind(str, enum.Enum):
    OK = "ok"
    ERR = "err"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    PENDING = "pending"


class ToolResult(Frozen):
    """One attempt's answer. Build it with the constructors, not the fields."""

    __slots__ = ("kind", "value", "code", "message", "retry", "pending_completion")
    kind: ResultKind
    value: Any
    code: str | None
    message: str
    retry: Retry
    pending_completion: PendingCompletion | None

    def __init__(
            self,
            kind: ResultKind,
            value: Any = None,
            code: str | None = None,
            message: str = "",
            retry: Retry = Retry.NEVER,
            pending_completion: PendingCompletion | None = None,
    ) -> None:
        # one made per attempt: its fields set through their slots (``slot_setters``)
        _kind(self, kind)
        _value(self, value)
        _code(self, code)
        _message(self, message)
        _retry(self, retry)
        _pending_completion(self, pending_completion)

    @classmethod
    def ok(cls, value: Any = None) -> "ToolResult":
        """Done, success. Pydantic models and other typed values become JSON data."""
        return cls(ResultKind.OK, jsonable(value))

    @classmethod
    def err(cls, value: Any, code: str = "tool_error") -> "ToolResult":
        """Done, the tool says no. Never retried; the message is ``value`` or its JSON."""
        data = jsonable(value)
        message = data if isinstance(data, str) else compact(data)
        return cls(ResultKind.ERR, data, code, message)

    @classmethod
    def failure(cls, message: str, code: str = "tool_failure", retry: Retry = Retry.NEVER) -> "ToolResult":
        """The attempt failed; only ``retry=Retry.safe(...)`` lets the policy retry it."""
        return cls(ResultKind.FAILURE, None, code, str(message), retry)

    @classmethod
    def retryable_failure(
        cls, message: str, code: str = "tool_failure", after: timedelta | float | None = None
    ) -> "ToolResult":
        return cls.failure(message, code, Retry.safe(after))

    @classmethod
    def cancelled(cls, message: str = "tool call cancelled") -> "ToolResult":
        """The call was cancelled; never retried."""
        return cls(ResultKind.CANCELLED, None, "cancelled", str(message))

    @classmethod
    def pending(cls, completion: PendingCompletion | None = None) -> "ToolResult":
        """Out-of-band work delivers the result later; call ``completion_key()`` first."""
        return cls(ResultKind.PENDING, pending_completion=completion or PendingCompletion())

    @property
    def is_ok(self) -> bool:
        return self.kind is ResultKind.OK

    @property
    def is_pending(self) -> bool:
        return self.kind is ResultKind.PENDING

    @classmethod
    def coerce(cls, value: Any) -> "ToolResult":
        """A tool may return a ``ToolResult`` or a plain value (meaning ``ok(value)``)."""
        return value if isinstance(value, ToolResult) else cls.ok(value)


_kind, _value, _code, _message, _retry, _pending_completion = slot_setters(ToolResult)
