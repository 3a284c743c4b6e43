"""``ToolOutcome``: the journal's JSON record of what a call (or one attempt) came to.

It carries everything replay needs (value, code, message, attempt count, usage,
traceback, the pending key and absolute deadline) and maps to the process-visible
wrapper with ``to_wrapper()``.
"""

from __future__ import annotations

import enum
from typing import Any

from lashflow.tools.results import PendingCompletion, ResultKind, ToolResult

from ..slotted import Frozen, replace, slot_setters

__all__ = ["OutcomeStatus", "ToolOutcome"]


class OutcomeStatus(str, enum.Enum):
    OK = "ok"
    ERR = "err"
    FAILED = "failed"
    EXHAUSTED = "exhausted"  # a retryable failure with no attempt left
    CANCELLED = "cancelled"
    PENDING = "pending"


_FROM_KIND = {
    ResultKind.OK: OutcomeStatus.OK,
    ResultKind.ERR: OutcomeStatus.ERR,
    ResultKind.FAILURE: OutcomeStatus.FAILED,
    ResultKind.CANCELLED: OutcomeStatus.CANCELLED,
    ResultKind.PENDING: OutcomeStatus.PENDING,
}


class ToolOutcome(Frozen):
    """One attempt's (and finally the call's) outcome.

    ``final`` is False while a retry follows (``retry_after`` set) or the call is
    pending; ``fail_run`` asks the host to fail the run (a FAIL_TURN timeout).
    """

    __slots__ = ("status", "value", "code", "message", "attempts", "usage", "traceback",
                 "retry_after", "key", "pending", "deadline_at", "fail_run", "started_at",
                 "finished_at")
    status: OutcomeStatus
    value: Any
    code: str | None
    message: str
    attempts: int
    usage: dict[str, int]
    traceback: str | None
    retry_after: float | None
    key: str | None
    pending: PendingCompletion | None
    deadline_at: float | None
    fail_run: bool
    started_at: float | None
    finished_at: float | None

    def __init__(
            self,
            status: OutcomeStatus,
            value: Any = None,
            code: str | None = None,
            message: str = "",
            attempts: int = 1,
            usage: dict[str, int] | None = None,
            traceback: str | None = None,
            retry_after: float | None = None,
            key: str | None = None,
            pending: PendingCompletion | None = None,
            deadline_at: float | None = None,
            fail_run: bool = False,
            started_at: float | None = None,
            finished_at: float | None = None,
    ) -> None:
        # one made per attempt: its fields set through their slots (``slot_setters``)
        _status(self, status)
        _value(self, value)
        _code(self, code)
        _message(self, message)
        _attempts(self, attempts)
        _usage(self, {} if usage is None else usage)
        _traceback(self, traceback)
        _retry_after(self, retry_after)
        _key(self, key)
        _pending(self, pending)
        _deadline_at(self, deadline_at)
        _fail_run(self, fail_run)
        _started_at(self, started_at)
        _finished_at(self, finished_at)

    @classmethod
    def from_result(cls, result: ToolResult, **fields: Any) -> "ToolOutcome":
        return cls(_FROM_KIND[result.kind], result.value if result.is_ok or result.kind is ResultKind.ERR else None,
                   result.code, result.message, **fields)

    @property
    def final(self) -> bool:
        return self.status is not OutcomeStatus.PENDING and self.retry_after is None

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.OK

    def with_(self, **changes: Any) -> "ToolOutcome":
        return replace(self, **changes)

    def to_wrapper(self) -> dict[str, Any]:
        """What the process sees: ``{"ok": True, "value": v}`` or ``{"ok": False, "error": text}``."""
        if self.status is OutcomeStatus.OK:
            return {"ok": True, "value": self.value}
        if self.status is OutcomeStatus.PENDING:
            raise ValueError("a pending call has no result yet: the run must wait for its completion key")
        return {"ok": False, "error": self.message}

    def to_json(self) -> dict[str, Any]:
        # written out, not a loop over names: it runs once per step (keys in this order,
        # an empty text left out except as a value: "" is a value to replay)
        # (``_value_``: the member's value as a plain attribute; ``.value`` is a property
        # that goes through enum's descriptor, 0.3 us a step)
        data: dict[str, Any] = {"status": self.status._value_, "attempts": self.attempts}
        if self.value is not None:
            data["value"] = self.value
        if self.code is not None and self.code != "":
            data["code"] = self.code
        if self.message is not None and self.message != "":
            data["message"] = self.message
        if self.traceback is not None and self.traceback != "":
            data["traceback"] = self.traceback
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        if self.key is not None and self.key != "":
            data["key"] = self.key
        if self.deadline_at is not None:
            data["deadline_at"] = self.deadline_at
        if self.started_at is not None:
            data["started_at"] = self.started_at
        if self.finished_at is not None:
            data["finished_at"] = self.finished_at
        if self.usage:
            data["usage"] = dict(self.usage)
        if self.pending is not None:
            data["pending"] = self.pending.to_json()
        if self.fail_run:
            data["fail_run"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ToolOutcome":
        pending = data.get("pending")
        return cls(
            status=OutcomeStatus(data["status"]),
            value=data.get("value"),
            code=data.get("code"),
            message=data.get("message", ""),
            attempts=int(data.get("attempts", 1)),
            usage=dict(data.get("usage") or {}),
            traceback=data.get("traceback"),
            retry_after=data.get("retry_after"),
            key=data.get("key"),
            pending=None if pending is None else PendingCompletion.from_json(pending),
            deadline_at=data.get("deadline_at"),
            fail_run=bool(data.get("fail_run", False)),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
        )


(_status, _value, _code, _message, _attempts, _usage, _traceback, _retry_after, _key, _pending,
 _deadline_at, _fail_run, _started_at, _finished_at) = slot_setters(ToolOutcome)
