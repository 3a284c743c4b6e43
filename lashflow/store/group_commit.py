"""Group commit: writes that arrive while one transaction is being written go together in
the next one, so many runs share one commit (one fsync, one round trip) and each writer
continues only once its own write is durable.

One ``GroupCommit`` per open store. It owns the task that writes the queued groups (the
flusher): however that task ends, even cancelled before its first step, the writers it
leaves are told (``DbError``) and the next write starts a new one. ``drain`` waits for it
with a bound, for ``close``.

The lone writer's inline commit (ADR 0008) is the one other path, and it is decided here
only: with exactly one registered writer, nothing queued and nothing being written, the
backend may commit the write on the caller's own thread; if it cannot (another
connection holds the lock), the write takes the queue like any other.

A backend that writes in another process (``pipelines``, ADR 0050) may hold two groups at
once, so the loop runs one group's steps while the other is written. There the queue is
sent as a group once it holds a cohort (half of the registered writers, so that the
runs in flight split into groups that take turns) or when a turn of the loop added
nothing to it; each group in flight (the backend's answer, settled by a callback, or a
task for a group the backend could not send) is this object's until it is settled.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any, Awaitable, Callable

from ..errors import DbError

_IN_FLIGHT = 2  # groups a pipelining backend holds at once
Outcome = tuple[bool, Any]  # (True, what the write returned) or (False, the exception it raised)
ApplyGroup = Callable[[list[Any]], Awaitable[list[Outcome]]]
Inline = Callable[[Any], Outcome]  # (False, None): could not commit on this thread now
# A group sent to be written elsewhere, its outcomes once durable; None: not sendable now
Send = Callable[[list[Any]], 'asyncio.Future[list[Outcome]] | None']


class GroupCommit:
    """The write queue of one store. ``apply_group`` writes a list of operations in one
    transaction and returns one ``Outcome`` per operation; ``inline``, where the backend
    has one, commits a single operation on the caller's thread."""

    def __init__(self, apply_group: ApplyGroup, inline: Inline | None = None, *,
                 pipelines: Callable[[], bool] | None = None, send: Send | None = None,
                 cohort: Callable[[], int] | None = None) -> None:
        self._apply_group = apply_group
        self._inline = inline
        self._queue: list[tuple[Any, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._pipelines = pipelines  # True while the backend may hold two groups at once
        self._send_group = send
        self._cohort = cohort or (lambda: 1)
        # groups in flight when pipelined: the backend's answers, or tasks writing a group
        # that could not be sent (this object owns both)
        self._sending: set[asyncio.Future[Any]] = set()
        self._watching = False  # an end-of-turn check of the queue is scheduled
        # Told (seconds from the group's start to durable, writes in it) after each group.
        self.on_commit: Callable[[float, int], None] | None = None

    @property
    def flusher(self) -> asyncio.Task[None] | None:
        """The task writing queued groups right now, if any (this object owns it)."""
        return self._flusher

    @property
    def idle(self) -> bool:
        return self._flusher is None and not self._queue and not self._sending

    def submit(self, op: Any, *, alone: bool = False) -> Awaitable[Any]:
        """Write ``op``; the awaitable gives what it returned once it is durable. ``alone``:
        the caller is the store's only registered writer (nobody could share its commit).
        A queued write is queued by this call and its awaitable is its future (no
        coroutine of its own: the caller's task waits on the future itself)."""
        if alone and self._inline is not None:
            return self._submit_alone(op)
        return self._enqueue(op)

    async def _submit_alone(self, op: Any) -> Any:
        """The lone writer's commit on its own thread when nothing is queued or being
        written (ADR 0008), else the queue like any other."""
        if self._flusher is None and not self._queue and not self._sending:
            assert self._inline is not None
            report = self.on_commit
            began = time.perf_counter() if report is not None else 0.0
            done, value = self._inline(op)
            if done:
                if report is not None:
                    report(time.perf_counter() - began, 1)
                return value
        return await self._enqueue(op)

    def _enqueue(self, op: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append((op, future))
        if self._flusher is None and self._pipelines is not None and self._pipelines():
            self._pipeline(loop)
        elif self._flusher is None:
            # a task, not this caller: a cancelled caller never strands the rest of its group
            flusher = loop.create_task(self._flush())
            flusher.add_done_callback(self._flusher_ended)
            self._flusher = flusher
        return future

    async def _flush(self) -> None:
        batch: list[tuple[Any, asyncio.Future[Any]]] = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                began = time.perf_counter()
                try:
                    results = await self._apply_group([op for op, _ in batch])
                except Exception as exc:  # the whole transaction failed: nobody is durable
                    results = [(False, exc)] * len(batch)
                if self.on_commit is not None:
                    self.on_commit(time.perf_counter() - began, len(batch))
                _settle(batch, results)
                batch = []
        finally:
            # ended by a cancellation (close gave up, the loop is shutting down): the group
            # in flight and whatever queued behind it are not known to be durable
            stranded, self._queue = batch + self._queue, []
            self._flusher = None
            _fail(stranded)

    # -- pipelined: up to two groups in flight (ADR 0050) ----------------------------------
    def _pipeline(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send the queue now if it holds a cohort and a group may go; else look again at
        the end of this turn of the loop."""
        if len(self._sending) < _IN_FLIGHT and len(self._queue) >= self._cohort():
            self._send(loop)
        elif not self._watching:
            self._watching = True
            loop.call_soon(self._end_of_turn, loop, len(self._queue))

    def _end_of_turn(self, loop: asyncio.AbstractEventLoop, seen: int) -> None:
        queued = len(self._queue)
        if 0 < queued < self._cohort() and queued != seen:
            loop.call_soon(self._end_of_turn, loop, queued)  # still growing: one more turn
            return
        self._watching = False
        if queued and len(self._sending) < _IN_FLIGHT:
            self._send(loop)
        # else a group in flight sends the rest when it is written

    def _send(self, loop: asyncio.AbstractEventLoop) -> None:
        """The queue as one group, sent now: its answer is settled by a callback (no task
        per group), or, if the backend cannot send it, written by a task."""
        batch, self._queue = self._queue, []
        ops = [op for op, _ in batch]
        answer = None if self._send_group is None else self._send_group(ops)
        if answer is None:
            answer = asyncio.ensure_future(self._apply_group(ops))
        self._sending.add(answer)
        answer.add_done_callback(partial(self._answered, batch, time.perf_counter()))

    def _answered(self, batch: list[tuple[Any, asyncio.Future[Any]]], began: float,
                  answer: asyncio.Future[list[Outcome]]) -> None:
        self._sending.discard(answer)
        if answer.cancelled():  # close gave up on it: not known to be durable
            _fail(batch)
            return
        failure = answer.exception()
        results = answer.result() if failure is None else [(False, failure)] * len(batch)
        if self.on_commit is not None:
            self.on_commit(time.perf_counter() - began, len(batch))
        _settle(batch, results)
        if self._queue and not self._watching:
            self._pipeline(asyncio.get_running_loop())

    def _flusher_ended(self, task: asyncio.Task[None]) -> None:
        """A flusher cancelled before its first step never ran its ``finally``: settle
        what it leaves here, so no writer waits forever and the next write starts anew."""
        if self._flusher is task:
            stranded, self._queue = self._queue, []
            self._flusher = None
            _fail(stranded)

    async def drain(self, timeout: float) -> bool:
        """Wait until every queued write is written, at most ``timeout`` seconds; then
        cancel the flusher (its writers get ``DbError``). True if all were written."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            pending = [task for task in (self._flusher, *self._sending) if task is not None]
            if not pending:
                if not self._queue:
                    return True
                self._send(loop)  # queued behind an end-of-turn check
                continue
            left = deadline - loop.time()
            if left <= 0:
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=timeout)
                stranded, self._queue = self._queue, []
                _fail(stranded)
                return False
            await asyncio.wait(pending, timeout=left)


def _settle(batch: list[tuple[Any, asyncio.Future[Any]]], results: list[Outcome]) -> None:
    for (_, future), (ok, value) in zip(batch, results):
        if future.done():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


def _fail(stranded: list[tuple[Any, asyncio.Future[Any]]]) -> None:
    for _, future in stranded:
        if not future.done():
            future.set_exception(DbError("the store stopped before the write committed"))


__all__ = ["GroupCommit", "Outcome"]
