"""Attempts and retries: one journal entry per attempt, backoff inside the call.

``run_attempts`` is the whole life of one call up to a final (or pending) outcome. It
needs no language and no store: the journal and the clock are injected, and the first
attempt number comes from the journal so a crash resumes with the next attempt.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any, Protocol

from lashflow.errors import InputInvalid
from lashflow.json_kinds import FLOAT_MAX, check_json_text
from lashflow.tools.clock import Clock
from lashflow.tools.context import ToolCall
from lashflow.tools.definition import RegisteredTool
from lashflow.tools.keys import KeyRing
from lashflow.tools.limits import CallGate
from lashflow.tools.models import ModelProvider
from lashflow.tools.outcome import OutcomeStatus, ToolOutcome
from lashflow.tools.results import ResultKind, ToolResult
from lashflow.tools.retry import RetryPolicy

from ..slotted import Slotted

__all__ = [
    "AttemptJournal", "CallEnv", "CancelSignal", "MemoryJournal", "NullJournal", "RetryPolicy", "Slots", "run_attempts",
]

CANCELLED_MESSAGE = "tool call cancelled"
MISSING_KEY_MESSAGE = "tool returned Pending without first obtaining a completion key"


class AttemptJournal(Protocol):
    """Where attempts are recorded (the lead's store implements this per run).

    ``attempt_started``: with ``durable=True`` (non-idempotent tool) it must be committed
    before returning, because ``execute`` runs right after; with ``durable=False`` it may
    be buffered and written with the outcome.

    ``attempt_finished``: the outcome must be durable before returning. ``outcome.final``
    marks the call's outcome. A second record for the same (step, attempt) replaces the
    first: it happens when a cancel ends a retry delay (the failure becomes cancelled)
    and when a pending attempt is settled by its resolution.
    """

    async def attempt_started(self, step_key: str, attempt: int, at: float, *, durable: bool) -> None: ...

    async def attempt_finished(self, step_key: str, attempt: int, outcome: ToolOutcome) -> None: ...


class NullJournal:
    """Records nothing (one-off calls, benchmarks)."""

    async def attempt_started(self, step_key: str, attempt: int, at: float, *, durable: bool) -> None:
        return None

    async def attempt_finished(self, step_key: str, attempt: int, outcome: ToolOutcome) -> None:
        return None


class AttemptEntry(Slotted):
    __slots__ = ("step_key", "attempt", "started_at", "durable_start", "outcome")

    def __init__(
            self,
            step_key: str,
            attempt: int,
            started_at: float | None = None,
            durable_start: bool = False,
            outcome: ToolOutcome | None = None,
    ) -> None:
        self.step_key = step_key
        self.attempt = attempt
        self.started_at = started_at
        self.durable_start = durable_start
        self.outcome = outcome


class MemoryJournal:
    """An in-memory journal: entries in order, for tests and non-durable use."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, int], AttemptEntry] = {}

    async def attempt_started(self, step_key: str, attempt: int, at: float, *, durable: bool) -> None:
        self.entries[(step_key, attempt)] = AttemptEntry(step_key, attempt, at, durable)

    async def attempt_finished(self, step_key: str, attempt: int, outcome: ToolOutcome) -> None:
        entry = self.entries.setdefault((step_key, attempt), AttemptEntry(step_key, attempt, outcome.started_at))
        entry.outcome = outcome

    def attempts(self, step_key: str) -> list[AttemptEntry]:
        return [e for (step, _), e in self.entries.items() if step == step_key]

    def next_attempt(self, step_key: str) -> int:
        """1 + the highest attempt recorded (started, even if interrupted, or finished)."""
        return 1 + max((e.attempt for e in self.attempts(step_key)), default=0)


class CallEnv(Slotted):
    """Everything about one call that is not the tool or its input."""

    __slots__ = ("run_id", "step_key", "keys", "model_provider", "projector", "cancel",
                 "limiter", "cancel_grace", "telemetry", "gate")

    def __init__(
            self,
            run_id: str = "local",
            step_key: str = "0",
            keys: KeyRing | None = None,
            model_provider: ModelProvider | None = None,
            projector: Any = None,
            cancel: asyncio.Event | None = None,
            limiter: "Slots | None" = None,
            cancel_grace: float = 0.05,
            telemetry: Any = None,  # the engine's Telemetry (spans, counters) or None
            gate: CallGate | None = None,  # the store's limits (rate, global concurrency)
    ) -> None:
        self.run_id = run_id
        self.step_key = step_key
        self.keys = keys
        self.model_provider = model_provider
        self.projector = projector
        self.cancel = cancel
        self.limiter = limiter
        self.cancel_grace = cancel_grace
        self.telemetry = telemetry
        self.gate = gate


async def _first(*aws: asyncio.Future[Any]) -> None:
    await asyncio.wait(aws, return_when=asyncio.FIRST_COMPLETED)


class CancelSignal(asyncio.Event):
    """An ``asyncio.Event`` that also calls back when set.

    Attempts racing a plain Event need a helper task and ``asyncio.wait`` per call; with
    a callback the hot path is one task for the tool and nothing else until a cancel.
    """

    def __init__(self) -> None:
        super().__init__()
        # insertion-ordered; a dict so that a batch of N calls discards in O(1), not O(N)
        self._callbacks: dict[Any, None] = {}

    def on_set(self, callback: Any) -> Any:
        self._callbacks[callback] = None
        return callback

    def discard(self, callback: Any) -> None:
        self._callbacks.pop(callback, None)

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, {}
        for callback in callbacks:
            callback()


class _Grace:
    """One attempt's grace: called when the cancel comes, it cuts the attempt's task off
    once ``seconds`` have passed (one object per attempt; nothing runs until a cancel)."""

    __slots__ = ("task", "clock", "seconds", "timer", "expired")

    def __init__(self, task: asyncio.Task[Any], clock: Clock, seconds: float) -> None:
        self.task = task
        self.clock = clock
        self.seconds = seconds
        self.timer: asyncio.Future[None] | None = None
        self.expired = False

    def __call__(self) -> None:
        self.timer = asyncio.ensure_future(self._expire())

    async def _expire(self) -> None:  # cancelled once the tool is done
        await self.clock.sleep(self.seconds)
        self.expired = True
        self.task.cancel()


def _bridge(cancel: asyncio.Event) -> tuple[CancelSignal, asyncio.Future[Any]]:
    """A ``CancelSignal`` set when a plain ``asyncio.Event`` is (the dispatcher's public
    API takes one): one watcher task, cancelled by the caller when the attempt ends."""
    signal = CancelSignal()
    if cancel.is_set():
        signal.set()
    watcher = asyncio.ensure_future(cancel.wait())
    watcher.add_done_callback(lambda w: None if w.cancelled() else signal.set())
    return signal, watcher


async def _execute(tool: RegisteredTool, call: ToolCall, env: CallEnv, clock: Clock) -> tuple[ToolResult, str | None]:
    """Run ``execute`` once; every way it can end becomes a ``ToolResult``.

    With a cancel, the grace runs in the caller's own task (ADR 0011), in this frame (a
    frame of its own cost a coroutine per call): no task per attempt (its creation and
    two extra event-loop turns were 30-50 us a step). The tool runs as a plain
    ``await``, so ``asyncio.timeout`` and ``current_task()`` inside it see the task that
    runs the call. A cancel starts the grace timer; when it expires the caller's task is
    cancelled, the CancelledError that comes out of the tool is taken back
    (``uncancel``) and the attempt ends cancelled. A tool that swallows that
    CancelledError keeps its run until it returns."""
    cancel = env.cancel
    if cancel is None:
        try:
            returned = await tool.execute(call)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled ourselves: not the tool's outcome
            return ToolResult.cancelled(CANCELLED_MESSAGE), None
        except Exception as exc:
            return _raised(exc)
        return _coerced(returned)
    watcher = None
    if not isinstance(cancel, CancelSignal):  # the durable host's is one already
        cancel, watcher = _bridge(cancel)
    task = asyncio.current_task()
    assert task is not None
    armed = _Grace(task, clock, env.cancel_grace)
    if cancel.is_set():
        armed()
    else:  # ``on_set`` and ``discard`` written out: two calls an attempt fewer
        cancel._callbacks[armed] = None
    try:
        returned = await tool.execute(call)
    except asyncio.CancelledError:
        if armed.expired:
            task.uncancel()
        elif task.cancelling():
            raise  # we are being cancelled ourselves: not the tool's outcome
        return ToolResult.cancelled(CANCELLED_MESSAGE), None
    except Exception as exc:
        return _raised(exc)
    finally:
        cancel._callbacks.pop(armed, None)  # (``set`` empties it: read it again here)
        if armed.timer is not None:
            armed.timer.cancel()
        if watcher is not None:
            watcher.cancel()
    if armed.expired:  # it swallowed the cancel and returned: the attempt was still cut off
        task.uncancel()
        return ToolResult.cancelled(CANCELLED_MESSAGE), None
    return _coerced(returned)


def _raised(exc: Exception) -> tuple[ToolResult, str | None]:
    """The tool raised: a retryable failure, with its traceback for the attempt's row."""
    text = "".join(traceback.format_exception(exc))
    return ToolResult.retryable_failure(str(exc) or type(exc).__name__, code="tool_exception"), text


def _coerced(returned: Any) -> tuple[ToolResult, str | None]:
    """What the tool returned, as a ``ToolResult`` (a plain value is ``ok``)."""
    try:
        return ToolResult.coerce(returned), None
    except Exception as exc:
        return ToolResult.failure(f"tool output is not JSON data: {exc}", code="tool_output_invalid"), None


def _classify(
    result: ToolResult, tb: str | None, call: ToolCall, attempt: int, max_attempts: int,
    policy: RetryPolicy, started: float, finished: float
) -> ToolOutcome:
    """The attempt's outcome. ``attempt`` and ``max_attempts`` are the context's (the
    runner keeps 1 <= attempt <= max_attempts); its usage and minted key are read only
    if the tool made its context (a context never read has neither)."""
    ctx = call.made_context()
    usage = None if ctx is None else dict(ctx.usage)
    if result.kind is ResultKind.OK and tb is None and _plain_scalar(result.value):
        # the common case, written out: an ok scalar needs no JSON check and no retry rule
        return ToolOutcome(OutcomeStatus.OK, result.value, result.code, result.message, attempt,
                           usage, None, started_at=started, finished_at=finished)
    fields: dict[str, Any] = dict(
        attempts=attempt, usage=usage, traceback=tb, started_at=started, finished_at=finished
    )
    if result.kind is ResultKind.PENDING:
        key = None if ctx is None else ctx.minted_key
        if key is None:
            return ToolOutcome(OutcomeStatus.FAILED, None, "pending_tool_missing_completion_key",
                               MISSING_KEY_MESSAGE, **fields)
        pending = result.pending_completion
        deadline = None if pending is None or pending.deadline is None else finished + pending.deadline.total_seconds()
        return ToolOutcome(OutcomeStatus.PENDING, key=str(key), pending=pending, deadline_at=deadline, **fields)
    if result.kind is not ResultKind.FAILURE:
        try:  # text not UTF-8, NaN: the journal could not store it, or not as JSON
            check_json_text(result.value)
        except InputInvalid as exc:
            return ToolOutcome(OutcomeStatus.FAILED, None, "tool_output_invalid",
                               f"the tool's output is not JSON data: {exc.message}", **fields)
    outcome = ToolOutcome.from_result(result, **fields)
    if result.kind is ResultKind.FAILURE and result.retry.retryable:
        if policy.retries and attempt < max_attempts:
            return outcome.with_(retry_after=policy.delay(attempt - 1, result.retry.after))
        return outcome.with_(status=OutcomeStatus.EXHAUSTED)
    return outcome


def _plain_scalar(value: Any) -> bool:
    """A value ``check_json_text`` would pass without looking further: None, a bool, an
    ASCII string, an integer a float can hold."""
    kind = type(value)
    if kind is int:
        number: int = value  # typed for the comparison (no conversion: this is per input)
        return -FLOAT_MAX <= number <= FLOAT_MAX
    return value is None or kind is bool or (kind is str and value.isascii())


async def _acquire(semaphore: asyncio.Semaphore, cancel: asyncio.Event | None) -> bool:
    """Take one slot; False if the call is cancelled while queueing."""
    if cancel is None:
        await semaphore.acquire()
        return True
    if cancel.is_set():
        return False
    taker = asyncio.ensure_future(semaphore.acquire())
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await _first(taker, waiter)
    finally:
        waiter.cancel()
        if not taker.done():
            taker.cancel()
    if taker.done() and not taker.cancelled():
        if cancel.is_set():
            semaphore.release()
            return False
        return True
    return False


class Slots:
    """Concurrency slots one attempt must hold (its tool's, then the dispatcher's).

    Always taken in the same order, so two calls can never wait on each other.
    """

    __slots__ = ("_semaphores", "_held")

    def __init__(self, *semaphores: asyncio.Semaphore) -> None:
        self._semaphores = semaphores
        self._held: list[asyncio.Semaphore] = []

    async def acquire(self, cancel: asyncio.Event | None) -> bool:
        for semaphore in self._semaphores:
            if not await _acquire(semaphore, cancel):
                self.release()
                return False
            self._held.append(semaphore)
        return True

    def release(self) -> None:
        while self._held:
            self._held.pop().release()


async def _sleep_unless_cancelled(clock: Clock, seconds: float, cancel: asyncio.Event | None) -> bool:
    """The retry delay: a local sleep that a cancel ends at once (returns True then)."""
    if cancel is None:
        await clock.sleep(seconds)
        return False
    if cancel.is_set():
        return True
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await _first(sleeper, waiter)
    finally:
        sleeper.cancel()
        waiter.cancel()
    return cancel.is_set()


def _cancelled(attempts: int, at: float) -> ToolOutcome:
    return ToolOutcome(OutcomeStatus.CANCELLED, None, "cancelled", CANCELLED_MESSAGE, attempts, finished_at=at)


async def _execute_reported(tool: RegisteredTool, call: ToolCall, attempt: int, max_attempts: int,
                            env: CallEnv, clock: Clock, started: float, telemetry: Any) -> ToolOutcome:
    """One attempt inside its span (current while the tool runs), counted."""
    definition = tool.definition
    name = f"{definition.module}.{definition.name}"
    tracing = telemetry.tracing
    if tracing is None:
        result, tb = await _execute(tool, call, env, clock)
        outcome = _classify(result, tb, call, attempt, max_attempts, definition.retry, started,
                            clock.now())
    else:
        with tracing.attempt(env.run_id, env.step_key, name, attempt) as span:
            result, tb = await _execute(tool, call, env, clock)
            outcome = _classify(result, tb, call, attempt, max_attempts, definition.retry,
                                started, clock.now())
            tracing.attempt_ended(span, outcome.status.value, outcome.code, outcome.retry_after)
    if telemetry.metrics is not None:
        finished = outcome.finished_at if outcome.finished_at is not None else clock.now()
        telemetry.metrics.attempt(name, outcome.status.value, finished - started)
    return outcome


async def run_attempts(
    tool: RegisteredTool,
    call_input: Any,
    env: CallEnv,
    journal: AttemptJournal,
    clock: Clock,
    first_attempt: int = 1,
) -> ToolOutcome:
    """Run attempts until one is final or pending; sleep the backoff between them.

    ``first_attempt`` is 1 + the last attempt the journal knows for this step. At least
    one attempt always runs (an interrupted idempotent attempt is re-run even when it
    used the last one), so ``max_attempts`` is never below ``first_attempt``.
    """
    if first_attempt < 1:
        raise ValueError("attempt numbers start at 1")
    definition = tool.definition
    max_attempts = max(definition.retry.max_attempts, first_attempt)
    attempt = first_attempt
    cancel, limiter, step_key = env.cancel, env.limiter, env.step_key
    while True:  # one attempt a turn, written out here (a coroutine of its own cost a frame)
        if cancel is not None and cancel.is_set():
            return _cancelled(attempt - 1, clock.now())
        if limiter is not None and not await limiter.acquire(cancel):
            return _cancelled(attempt - 1, clock.now())
        gate = env.gate
        try:
            if gate is not None and not await gate.enter(attempt, cancel):
                gate = None  # nothing was taken
                return _cancelled(attempt - 1, clock.now())
            started = clock.now()
            await journal.attempt_started(step_key, attempt, started, durable=not definition.idempotent)
            call = ToolCall.of_attempt(
                call_input, definition.name, definition.module, env.run_id, step_key, attempt,
                max_attempts, env.keys, env.model_provider, env.projector, cancel,
                None if gate is None else gate.taken)
            if env.telemetry is None:
                result, tb = await _execute(tool, call, env, clock)
                outcome = _classify(result, tb, call, attempt, max_attempts, definition.retry,
                                    started, clock.now())
            else:
                outcome = await _execute_reported(tool, call, attempt, max_attempts, env, clock,
                                                  started, env.telemetry)
        finally:
            try:
                if gate is not None:
                    await gate.leave()
            finally:
                if limiter is not None:
                    limiter.release()
        await journal.attempt_finished(step_key, attempt, outcome)
        if outcome.retry_after is None:
            return outcome
        if outcome.retry_after > 0:
            cancelled_in_delay = await _sleep_unless_cancelled(clock, outcome.retry_after, cancel)
        else:  # a zero delay does not sleep
            cancelled_in_delay = cancel is not None and cancel.is_set()
        if cancelled_in_delay:
            # The failed attempt is already journaled as failed; no attempt runs after it,
            # so the cancel is the step's outcome, not a second record of that attempt.
            return outcome.with_(status=OutcomeStatus.CANCELLED, code="cancelled", message=CANCELLED_MESSAGE,
                                 value=None, retry_after=None, finished_at=clock.now())
        attempt += 1
