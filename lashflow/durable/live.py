"""Live events for subscribers (``GET /v1/runs/{id}/events``, ``lashflow watch``).

The events are the store's (``store.events``, written with the journal): a subscriber
that gives the offset it saw last gets what follows, from the database, whatever crashed.
What is live here is only how soon it hears of them: one ``EventHub`` per engine reads
the feed of every run every ``interval`` seconds while anyone listens (a point read of
an index on SQLite, one query on PostgreSQL) and hands each new event to the
subscribers of its run. A thousand subscribers of one run cost one read per interval,
not a thousand.

A run's subscriber checks offsets: the next event it hands out is always its last
offset + 1. An event the hub skipped (it subscribed between the hub's read and its own
catch-up, or the hub fell behind) shows as a gap, and the gap is read from the store.
A feed subscriber (every run, or a process's runs) reads the store itself after its own
cursor each time the hub has seen anything new.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable

from ..store.events import RunEvent

PAGE = 500
HUB_INTERVAL = 0.005  # seconds between two reads of the feed while anyone listens
IDLE = 5.0  # seconds without news after which a subscriber reads the store itself


class _Subscriber:
    __slots__ = ("run_id", "queue", "woken")

    def __init__(self, run_id: str | None) -> None:
        self.run_id = run_id
        self.queue: asyncio.Queue[list[RunEvent]] = asyncio.Queue()
        self.woken = asyncio.Event()


class EventHub:
    """Reads the feed of every run while anyone listens; wakes the subscribers."""

    def __init__(self, store: Any, interval: float = HUB_INTERVAL) -> None:
        self.store = store
        self.interval = interval
        self._by_run: dict[str | None, set[_Subscriber]] = {}
        self._cursor: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None

    @property
    def subscribers(self) -> int:
        return sum(len(subs) for subs in self._by_run.values())

    async def _join(self, sub: _Subscriber) -> None:
        """Register ``sub``; returns once the hub has its starting cursor, so anything
        committed from then on reaches ``sub`` (what came before, its catch-up reads)."""
        self._by_run.setdefault(sub.run_id, set()).add(sub)
        if self._task is None or self._task.done():
            self._ready = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._poll())
        assert self._ready is not None
        await self._ready.wait()

    def _leave(self, sub: _Subscriber) -> None:
        subs = self._by_run.get(sub.run_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_run[sub.run_id]

    async def _poll(self) -> None:
        assert self._ready is not None
        try:
            self._cursor = await self.store.feed_head()
        finally:
            self._ready.set()
        while self._by_run:
            try:  # the newest rows, not only those past PostgreSQL's horizon: sooner
                found = await self.store.feed(self._cursor, PAGE, settled=False)
            except Exception:  # noqa: BLE001 - the database is away: try again later
                found = []
                await asyncio.sleep(self.interval * 20)
            if found:
                self._cursor = found[-1].cursor
                self._hand_out(found)
            if len(found) < PAGE:
                await asyncio.sleep(self.interval)
        self._task = None

    def _hand_out(self, found: list[RunEvent]) -> None:
        by_run: dict[str, list[RunEvent]] = {}
        for event in found:
            by_run.setdefault(event.run_id, []).append(event)
        for run_id, events in by_run.items():
            for sub in self._by_run.get(run_id, ()):
                sub.queue.put_nowait(events)
        for sub in self._by_run.get(None, ()):
            sub.woken.set()

    async def close(self) -> None:
        self._by_run.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- subscriptions ---------------------------------------------------------------------
    async def run_events(self, run_id: str, after: int = 0) -> AsyncIterator[RunEvent | None]:
        """The run's events after offset ``after``, then each new one as it is written,
        in offset order, each once; until the caller stops iterating. After ``IDLE``
        seconds without news it reads the store (the hub reads PostgreSQL's newest rows,
        and a row whose transaction committed after a later one's could pass it by) and
        yields None (a moment for a keep-alive)."""
        sub = _Subscriber(run_id)
        await self._join(sub)
        try:
            last = after
            async for event in _catch_up(lambda seq: self.store.run_events(run_id, seq, PAGE),
                                         last, lambda event: event.seq):
                yield event
                last = event.seq
            while True:
                try:
                    async with asyncio.timeout(IDLE):
                        found = await sub.queue.get()
                except TimeoutError:
                    found = await self.store.run_events(run_id, last, PAGE)
                    yield None
                for event in found:
                    if event.seq <= last:
                        continue
                    if event.seq > last + 1:  # missed: the store has it
                        for missed in await self.store.run_events(run_id, last,
                                                                  event.seq - last - 1):
                            yield missed
                            last = missed.seq
                    if event.seq == last + 1:
                        yield event
                        last = event.seq
        finally:
            self._leave(sub)

    async def feed(self, after: str | None = None,
                   process: str | None = None) -> AsyncIterator[RunEvent | None]:
        """Events of every run (or ``process``'s) after the feed cursor ``after`` (None:
        from now on), in commit order, each once; None after ``IDLE`` quiet seconds."""
        sub = _Subscriber(None)
        await self._join(sub)
        try:
            cursor = after if after is not None else await self.store.feed_head()
            while True:
                sub.woken.clear()
                async for event in _catch_up(lambda at: self.store.feed(at, PAGE, process),
                                             cursor, lambda event: event.cursor):
                    yield event
                    cursor = event.cursor
                try:
                    async with asyncio.timeout(IDLE):
                        await sub.woken.wait()
                except TimeoutError:
                    yield None
        finally:
            self._leave(sub)


async def _catch_up(read: Callable[[Any], Awaitable[list[RunEvent]]], position: Any,
                    advance: Callable[[RunEvent], Any]) -> AsyncIterator[RunEvent]:
    """Every event the store has after ``position``, page by page."""
    while True:
        page = await read(position)
        for event in page:
            yield event
            position = advance(event)
        if len(page) < PAGE:
            return


__all__ = ["EventHub"]
