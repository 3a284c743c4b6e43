"""Deferred completion: first-writer-wins resolution of completion keys.

``CompletionBook`` holds the rules (who wins between a resolver, the deadline and a
cancel; unknown, already-resolved and expired answers) and nothing else: the records
live behind the injected ``CompletionStorage``, whose one atomic operation is
``settle`` (write a resolution only if there is none). The lead's store backs it in
the database; ``InMemoryCompletionStorage`` backs it in tests.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from lashflow.errors import LashflowError, UsageError
from lashflow.tools.clock import Clock, RealClock
from lashflow.tools.keys import CompletionKey, KeyRing
from lashflow.tools.outcome import OutcomeStatus, ToolOutcome
from lashflow.tools.results import OnCancel, OnTimeout, PendingCompletion, ResultKind, ToolResult

from ..slotted import Frozen, replace

__all__ = [
    "CompletionAlreadyResolved", "CompletionBook", "CompletionError", "CompletionExpired",
    "CompletionRecord", "CompletionStorage", "InMemoryCompletionStorage", "Resolution",
    "ResolutionKind", "ResolutionSource", "Settle", "UnknownCompletionKey",
    "outcome_for_resolution",
]

log = logging.getLogger("lashflow.tools")

TIMEOUT_MESSAGE = "pending tool completion timed out"
CANCEL_MESSAGE = "pending tool completion cancelled"


class CompletionError(LashflowError):
    """A refused resolution: one of the three classes below, each with its code."""

    code = "unknown_completion_key"

    def __init__(self, message: str, *, winner: "Resolution | None" = None) -> None:
        super().__init__(message)
        self.winner = winner


class UnknownCompletionKey(CompletionError):
    """Forged, unknown, or of a run that no longer takes completions."""

    code = "unknown_completion_key"


class CompletionAlreadyResolved(CompletionError):
    """Another resolution won first; ``winner`` is what it recorded."""

    code = "completion_already_resolved"


class CompletionExpired(CompletionError):
    """The call's deadline passed; ``winner`` is the timeout."""

    code = "completion_expired"


class ResolutionKind(str, enum.Enum):
    OK = "ok"
    ERR = "err"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class ResolutionSource(str, enum.Enum):
    RESOLVER = "resolver"
    TIMEOUT = "timeout"
    CANCEL = "cancel"


class Resolution(Frozen):
    """The terminal value of one completion key."""

    __slots__ = ("kind", "value", "code", "message", "source", "at")
    kind: ResolutionKind
    value: Any
    code: str | None
    message: str
    source: ResolutionSource
    at: float | None

    def __init__(
            self,
            kind: ResolutionKind,
            value: Any = None,
            code: str | None = None,
            message: str = "",
            source: ResolutionSource = ResolutionSource.RESOLVER,
            at: float | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "kind", kind)
        setter(self, "value", value)
        setter(self, "code", code)
        setter(self, "message", message)
        setter(self, "source", source)
        setter(self, "at", at)

    @classmethod
    def from_result(cls, result: Any, at: float | None = None) -> "Resolution":
        result = ToolResult.coerce(result)
        if result.kind is ResultKind.PENDING:
            raise UsageError("a completion key cannot be resolved with a Pending result")
        kind = {
            ResultKind.OK: ResolutionKind.OK, ResultKind.ERR: ResolutionKind.ERR,
            ResultKind.FAILURE: ResolutionKind.FAILED, ResultKind.CANCELLED: ResolutionKind.CANCELLED,
        }[result.kind]
        return cls(kind, result.value, result.code, result.message, ResolutionSource.RESOLVER, at)

    @classmethod
    def timeout(cls, at: float | None) -> "Resolution":
        return cls(ResolutionKind.TIMEOUT, None, "tool_completion_timeout", TIMEOUT_MESSAGE,
                   ResolutionSource.TIMEOUT, at)

    @classmethod
    def cancelled(cls, at: float | None) -> "Resolution":
        return cls(ResolutionKind.CANCELLED, None, "cancelled", CANCEL_MESSAGE, ResolutionSource.CANCEL, at)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "value": self.value, "code": self.code, "message": self.message,
                "source": self.source.value, "at": self.at}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Resolution":
        return cls(ResolutionKind(data["kind"]), data.get("value"), data.get("code"), data.get("message", ""),
                   ResolutionSource(data.get("source", "resolver")), data.get("at"))


class CompletionRecord(Frozen):
    """One key's row: the wait (once the tool returned Pending) and the resolution."""

    __slots__ = ("run_id", "step_key", "waiting", "deadline_at", "on_timeout", "on_cancel",
                 "module", "tool", "resolution")
    run_id: str
    step_key: str
    waiting: bool
    deadline_at: float | None
    on_timeout: OnTimeout
    on_cancel: OnCancel
    module: str | None
    tool: str | None
    resolution: Resolution | None

    def __init__(
            self,
            run_id: str,
            step_key: str,
            waiting: bool = False,
            deadline_at: float | None = None,
            on_timeout: OnTimeout = OnTimeout.ERROR_AS_RESULT,
            on_cancel: OnCancel = OnCancel.CANCEL_EXTERNAL_WORK,
            module: str | None = None,
            tool: str | None = None,
            resolution: Resolution | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "run_id", run_id)
        setter(self, "step_key", step_key)
        setter(self, "waiting", waiting)
        setter(self, "deadline_at", deadline_at)
        setter(self, "on_timeout", on_timeout)
        setter(self, "on_cancel", on_cancel)
        setter(self, "module", module)
        setter(self, "tool", tool)
        setter(self, "resolution", resolution)

    def past_deadline(self, now: float) -> bool:
        return self.deadline_at is not None and now >= self.deadline_at


class Settle(str, enum.Enum):
    WON = "won"
    ALREADY_RESOLVED = "already_resolved"
    EXPIRED = "expired"


class CompletionStorage(Protocol):
    """What the book needs from a store. ``settle`` and ``open_wait`` must be atomic."""

    async def run_accepts_completions(self, run_id: str) -> bool:
        """True if the run exists and is not cancelled."""
        ...

    async def get(self, run_id: str, step_key: str) -> CompletionRecord | None: ...

    async def open_wait(self, record: CompletionRecord) -> CompletionRecord:
        """Insert the row, or fill in its wait fields if not waiting yet (a buffered
        resolution stays). An existing wait is left as it is: the deadline is journaled
        once. Returns the current row."""
        ...

    async def settle(
        self, run_id: str, step_key: str, resolution: Resolution, *, now: float, respect_deadline: bool,
        wake: bool = False,
    ) -> tuple[CompletionRecord, Settle]:
        """Write ``resolution`` iff the row has none (creating the row if missing) and,
        with ``respect_deadline``, only if ``now`` is before its deadline. With ``wake``
        (a resolution from outside the run) a won resolution also marks the run due, in
        the same atomic write, so no crash can leave it resolved but forgotten."""
        ...

    async def open_waits(self, run_id: str) -> list[CompletionRecord]:
        """The run's rows that are waiting and unresolved."""
        ...


class InMemoryCompletionStorage:
    """Process-memory storage. With ``runs=None`` every run is accepted unless cancelled."""

    def __init__(self, runs: set[str] | None = None) -> None:
        self._rows: dict[tuple[str, str], CompletionRecord] = {}
        self._runs = runs
        self._cancelled: set[str] = set()

    def add_run(self, run_id: str) -> None:
        if self._runs is None:
            self._runs = set()
        self._runs.add(run_id)

    def mark_cancelled(self, run_id: str) -> None:
        self._cancelled.add(run_id)

    async def run_accepts_completions(self, run_id: str) -> bool:
        return run_id not in self._cancelled and (self._runs is None or run_id in self._runs)

    async def get(self, run_id: str, step_key: str) -> CompletionRecord | None:
        return self._rows.get((run_id, step_key))

    async def open_wait(self, record: CompletionRecord) -> CompletionRecord:
        key = (record.run_id, record.step_key)
        current = self._rows.get(key)
        if current is None:
            current = record
        elif not current.waiting:
            current = replace(record, resolution=current.resolution)
        self._rows[key] = current
        return current

    async def settle(
        self, run_id: str, step_key: str, resolution: Resolution, *, now: float, respect_deadline: bool,
        wake: bool = False,
    ) -> tuple[CompletionRecord, Settle]:
        key = (run_id, step_key)  # no runs here to wake: a waiter is woken in process
        current = self._rows.get(key) or CompletionRecord(run_id, step_key)
        if current.resolution is not None:
            return current, Settle.ALREADY_RESOLVED
        if respect_deadline and current.past_deadline(now):
            return current, Settle.EXPIRED
        current = replace(current, resolution=resolution)
        self._rows[key] = current
        return current, Settle.WON

    async def open_waits(self, run_id: str) -> list[CompletionRecord]:
        return [r for (run, _), r in self._rows.items() if run == run_id and r.waiting and r.resolution is None]


CancelExternal = Callable[[str, str, CompletionKey], Awaitable[Any]]
NO_RUN = ""  # a run id no run has (an id is 1 to 256 printable characters)


class CompletionBook:
    """The resolution rules over a storage, plus an in-process waiter.

    ``cancel_external(module, tool, key)`` (e.g. ``ToolRegistry.cancel_external``) is
    called when a cancel wins a wait whose ``on_cancel`` is CANCEL_EXTERNAL_WORK.
    """

    def __init__(
        self,
        storage: CompletionStorage,
        secret: bytes | KeyRing,
        *,
        clock: Clock | None = None,
        cancel_external: CancelExternal | None = None,
    ) -> None:
        self.storage = storage
        self.keys = secret if isinstance(secret, KeyRing) else KeyRing(secret)
        self.clock = clock or RealClock()
        self._cancel_external = cancel_external
        self._wakeups: dict[tuple[str, str], asyncio.Event] = {}

    def key_for(self, run_id: str, step_key: str) -> CompletionKey:
        return self.keys.key_for(run_id, step_key)

    # -- resolvers -------------------------------------------------------------------

    async def owner(self, key: str) -> tuple[str, str] | None:
        """``(run_id, step_key)`` of a genuine key whose run still takes completions; None
        for any other. Every key costs the same work: one that fails its signature is
        looked up too (under a run id no run has), so how fast the refusal comes does not
        tell a forged key from a genuine key of a deleted or cancelled run."""
        ids = self.keys.verify(key)
        accepted = await self.storage.run_accepts_completions(NO_RUN if ids is None else ids[0])
        return ids if ids is not None and accepted else None

    async def resolve(self, key: str, result: Any) -> Resolution:
        """Deliver ``result`` (a ``ToolResult``) for ``key``; returns what was recorded."""
        ids = await self.owner(key)
        if ids is None:
            raise UnknownCompletionKey("unknown completion key")
        run_id, step_key = ids
        now = self.clock.now()
        resolution = Resolution.from_result(result, at=now)
        record, settled = await self.storage.settle(run_id, step_key, resolution, now=now,
                                                    respect_deadline=True, wake=True)
        if settled is Settle.WON:
            self._wake(run_id, step_key)
            return resolution
        if record.past_deadline(now):
            if record.resolution is None:
                record = await self._time_out(record)
            raise CompletionExpired("completion key expired: the call timed out",
                                    winner=record.resolution)
        winner = record.resolution
        raise CompletionAlreadyResolved(
            f"completion key already resolved ({winner.kind.value if winner else 'unknown'})",
            winner=winner)

    # -- the waiting side ------------------------------------------------------------

    async def begin_wait(
        self,
        run_id: str,
        step_key: str,
        *,
        pending: PendingCompletion | None = None,
        deadline_at: float | None = None,
        module: str | None = None,
        tool: str | None = None,
    ) -> Resolution | None:
        """Record that the call waits (after its Pending outcome is journaled).

        Returns the resolution at once if one was delivered before the wait began (or
        the deadline already passed), else None: the run parks (or calls ``wait``).
        """
        pending = pending or PendingCompletion()
        record = await self.storage.open_wait(CompletionRecord(
            run_id, step_key, True, deadline_at, pending.on_timeout, pending.on_cancel, module, tool,
        ))
        return await self._settled_or_due(record)

    async def begin_wait_for(self, outcome: ToolOutcome, run_id: str, step_key: str,
                             module: str | None = None, tool: str | None = None) -> Resolution | None:
        """``begin_wait`` with the fields of a pending ``ToolOutcome``."""
        return await self.begin_wait(run_id, step_key, pending=outcome.pending, deadline_at=outcome.deadline_at,
                                     module=module, tool=tool)

    async def poll(self, run_id: str, step_key: str) -> Resolution | None:
        """The resolution if there is one (recording the timeout when due), else None."""
        record = await self.storage.get(run_id, step_key)
        return None if record is None else await self._settled_or_due(record)

    async def wait(self, run_id: str, step_key: str, *, cancel: asyncio.Event | None = None) -> Resolution:
        """Wait in this process until resolved, timed out (via the clock) or cancelled."""
        key = (run_id, step_key)
        while True:
            wakeup = self._wakeups.setdefault(key, asyncio.Event())
            record = await self.storage.get(run_id, step_key)
            if record is None or not record.waiting:
                raise LashflowError(f"no wait is registered for step {step_key}", code="completion_not_waiting")
            settled = await self._settled_or_due(record)
            if settled is not None:
                return settled
            if cancel is not None and cancel.is_set():
                cancelled = await self.cancel_wait(run_id, step_key)
                assert cancelled is not None
                return cancelled
            helpers: list[asyncio.Future[Any]] = [asyncio.ensure_future(wakeup.wait())]
            if record.deadline_at is not None:
                helpers.append(asyncio.ensure_future(self.clock.sleep(record.deadline_at - self.clock.now())))
            if cancel is not None:
                helpers.append(asyncio.ensure_future(cancel.wait()))
            try:
                await asyncio.wait(helpers, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for helper in helpers:
                    helper.cancel()

    async def cancel_wait(self, run_id: str, step_key: str) -> Resolution | None:
        """Cancel one wait (first writer wins); calls ``cancel_external`` if the cancel won."""
        record = await self.storage.get(run_id, step_key)
        if record is None:
            return None
        settled = await self._settled_or_due(record)
        if settled is not None:
            return settled
        now = self.clock.now()
        resolution = Resolution.cancelled(now)
        record, outcome = await self.storage.settle(run_id, step_key, resolution, now=now, respect_deadline=True)
        if outcome is Settle.EXPIRED:
            return (await self._time_out(record)).resolution
        if outcome is Settle.ALREADY_RESOLVED:
            return record.resolution
        self._wake(run_id, step_key)
        if (record.on_cancel is OnCancel.CANCEL_EXTERNAL_WORK and self._cancel_external is not None
                and record.module is not None and record.tool is not None):
            try:
                await self._cancel_external(record.module, record.tool, self.key_for(run_id, step_key))
            except Exception:
                log.exception("cancel_external for %s.%s failed", record.module, record.tool)
        return resolution

    async def cancel_run(self, run_id: str) -> dict[str, Resolution]:
        """Cancel every open wait of a run (mark the run cancelled in the store first)."""
        results: dict[str, Resolution] = {}
        for record in await self.storage.open_waits(run_id):
            resolution = await self.cancel_wait(run_id, record.step_key)
            if resolution is not None:
                results[record.step_key] = resolution
        return results

    # -- internals -------------------------------------------------------------------

    async def _settled_or_due(self, record: CompletionRecord) -> Resolution | None:
        if record.resolution is not None:
            return record.resolution
        if record.waiting and record.past_deadline(self.clock.now()):
            return (await self._time_out(record)).resolution
        return None

    async def _time_out(self, record: CompletionRecord) -> CompletionRecord:
        """Record the timeout (as of the deadline); whatever was first stays the winner."""
        resolution = Resolution.timeout(record.deadline_at)
        current, settled = await self.storage.settle(record.run_id, record.step_key, resolution,
                                                     now=self.clock.now(), respect_deadline=False)
        if settled is Settle.WON:
            self._wake(record.run_id, record.step_key)
        return current

    def _wake(self, run_id: str, step_key: str) -> None:
        wakeup = self._wakeups.pop((run_id, step_key), None)
        if wakeup is not None:
            wakeup.set()


def outcome_for_resolution(pending: ToolOutcome, resolution: Resolution) -> ToolOutcome:
    """The call's final outcome once its completion key is settled."""
    on_timeout = pending.pending.on_timeout if pending.pending else OnTimeout.ERROR_AS_RESULT
    base = pending.with_(value=None, code=resolution.code, message=resolution.message, retry_after=None,
                         finished_at=resolution.at)
    kind = resolution.kind
    if kind is ResolutionKind.OK:
        return base.with_(status=OutcomeStatus.OK, value=resolution.value, code=None)
    if kind is ResolutionKind.ERR:
        return base.with_(status=OutcomeStatus.ERR, value=resolution.value, code=resolution.code or "tool_error")
    if kind is ResolutionKind.FAILED:
        return base.with_(status=OutcomeStatus.FAILED)
    if kind is ResolutionKind.TIMEOUT:
        return base.with_(status=OutcomeStatus.FAILED, code="tool_completion_timeout", message=TIMEOUT_MESSAGE,
                          fail_run=on_timeout is OnTimeout.FAIL_TURN)
    return base.with_(status=OutcomeStatus.CANCELLED, code="cancelled")
