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
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

from ..errors import DbError

Outcome = tuple[bool, Any]  # (True, what the write returned) or (False, the exception it raised)
ApplyGroup = Callable[[list[Any]], Awaitable[list[Outcome]]]
Inline = Callable[[Any], Outcome]  # (False, None): could not commit on this thread now


class GroupCommit:
    """The write queue of one store. ``apply_group`` writes a list of operations in one
    transaction and returns one ``Outcome`` per operation; ``inline``, where the backend
    has one, commits a single operation on the caller's thread."""

    def __init__(self, apply_group: ApplyGroup, inline: Inline | None = None) -> None:
        self._apply_group = apply_group
        self._inline = inline
        self._queue: list[tuple[Any, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        # Told (seconds from the group's start to durable, writes in it) after each group.
        self.on_commit: Callable[[float, int], None] | None = None

    @property
    def flusher(self) -> asyncio.Task[None] | None:
        """The task writing queued groups right now, if any (this object owns it)."""
        return self._flusher

    @property
    def idle(self) -> bool:
        return self._flusher is None and not self._queue

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
        if self._flusher is None and not self._queue:
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
        if self._flusher is None:
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
                for (_, future), (ok, value) in zip(batch, results):
                    if future.done():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
                batch = []
        finally:
            # ended by a cancellation (close gave up, the loop is shutting down): the group
            # in flight and whatever queued behind it are not known to be durable
            stranded, self._queue = batch + self._queue, []
            self._flusher = None
            _fail(stranded)

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
        while (flusher := self._flusher) is not None:
            left = deadline - loop.time()
            if left <= 0:
                flusher.cancel()
                await asyncio.wait([flusher], timeout=timeout)
                return False
            await asyncio.wait([flusher], timeout=left)
        return True


def _fail(stranded: list[tuple[Any, asyncio.Future[Any]]]) -> None:
    for _, future in stranded:
        if not future.done():
            future.set_exception(DbError("the store stopped before the write committed"))


__all__ = ["GroupCommit", "Outcome"]
