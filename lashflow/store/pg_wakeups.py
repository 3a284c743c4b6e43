"""Wake-ups for PostgreSQL workers: ``LISTEN`` on one dedicated connection.

A worker that found nothing to do sleeps until a notification says a run became
claimable (``PostgresStore`` sends ``NOTIFY`` in the transaction that made it so) or its
poll interval passes. The notification carries no data: it only says "look again", so a
lost one (a dropped connection, a listener not connected yet) costs at most one poll
interval, never a run.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import asyncpg

log = logging.getLogger("lashflow.store")

_MAX_CHANNEL = 63  # PostgreSQL truncates identifiers (NAMEDATALEN - 1 bytes)
_PING_EVERY = 30.0  # seconds between checks that a quiet connection is still there
_RETRY_MAX = 30.0  # seconds between reconnect attempts, at most


def channel_for(schema: str) -> str:
    """One channel per schema, so stores in different schemas of one database (tests,
    tenants) do not wake each other."""
    channel = f"lashflow_work:{schema}"
    if len(channel.encode()) > _MAX_CHANNEL:
        channel = "lashflow_work:" + hashlib.sha256(schema.encode()).hexdigest()[:40]
    return channel


class WorkListener:
    """Owns the listening connection (opened on first use, reopened when lost) and the
    "there may be work" flag that ``wait`` consumes."""

    def __init__(self, dsn: str, options: dict[str, Any], channel: str, connect_timeout: float,
                 display: str) -> None:
        self.dsn = dsn
        self.options = options
        self.channel = channel
        self.connect_timeout = connect_timeout
        self.display = display
        self.work = asyncio.Event()
        self.connected = False
        self._task: asyncio.Task[None] | None = None
        self._conn: asyncpg.Connection | None = None

    async def wait(self, timeout: float) -> None:
        """Return when notified (or at once if notified since the last call), else after
        ``timeout`` seconds: the polling fallback."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen_forever())
        if not self.work.is_set():
            try:
                await asyncio.wait_for(self.work.wait(), timeout)
            except asyncio.TimeoutError:
                return
        self.work.clear()

    def _on_notify(self, *_: Any) -> None:
        self.work.set()

    async def _listen_forever(self) -> None:
        delay = 0.5
        while True:
            try:
                await self._listen_once()
                delay = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: poll, then try again
                log.warning("no wake-ups from %s (workers fall back to polling): %s",
                            self.display, " ".join(str(exc).split()) or type(exc).__name__)
            finally:
                self.connected = False
                await self._drop()
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    async def _listen_once(self) -> None:
        """Connect, LISTEN, then stay until the connection is lost."""
        self._conn = conn = await asyncpg.connect(self.dsn, timeout=self.connect_timeout,
                                                  **self.options)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _: lost.set())
        await conn.add_listener(self.channel, self._on_notify)
        self.connected = True
        self.work.set()  # notifications sent while we were not listening are gone: look once
        while not lost.is_set():
            try:
                await asyncio.wait_for(lost.wait(), _PING_EVERY)
            except asyncio.TimeoutError:
                await conn.fetchval("SELECT 1", timeout=self.connect_timeout)
        raise ConnectionError("the listening connection was closed")

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        await self._drop()
