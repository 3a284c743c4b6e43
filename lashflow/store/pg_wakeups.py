"""Wake-ups and liveness for PostgreSQL workers: one dedicated connection per process.

It ``LISTEN``s, and it holds a session-level advisory lock for each lease owner of the
process, which the server releases the moment the session ends: when the process dies, or
its machine vanishes (then after the TCP keepalive bound set below). Other workers try the
lock to see whether an owner still lives (ADR 0035).

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
from urllib.parse import parse_qsl, urlsplit

import asyncpg

log = logging.getLogger("lashflow.store")

_MAX_CHANNEL = 63  # PostgreSQL truncates identifiers (NAMEDATALEN - 1 bytes)
_PING_EVERY = 30.0  # seconds between checks that a quiet connection is still there
_RETRY_MAX = 30.0  # seconds between reconnect attempts, at most

# The two-key advisory lock space of an owner's session lock: (this class, hashtext(owner)).
LOCK_CLASS = 0x6C617368
# How soon the server ends the session of a machine that vanished without closing its
# TCP connection: an idle session is probed after 5 s, then every 2 s, and dropped after 3
# unanswered probes (11 s); data left unacknowledged for 11 s drops it too. A URL
# parameter of the same name overrides each.
SESSION_KEEPALIVE = {"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2",
                     "tcp_keepalives_count": "3", "tcp_user_timeout": "11000"}


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
        given = {key for key, _ in parse_qsl(urlsplit(dsn).query)}
        self._settings = {k: v for k, v in SESSION_KEEPALIVE.items() if k not in given}
        self._owners: set[str] = set()  # owners whose lock every session of ours takes
        self._locked: set[str] = set()  # ... and those the current session holds
        self._changed = asyncio.Condition()
        self._wanted = asyncio.Event()  # an owner was added: lock it

    def holds(self, owner: str) -> bool:
        return owner in self._locked

    async def hold(self, owner: str, timeout: float) -> None:
        """Return once this process's session holds ``owner``'s lock (taken now if need
        be, and again on every reconnection). A run may carry ``owner``'s lease only
        from then on: before, other workers would see the owner as dead."""
        if owner in self._locked:
            return
        self._owners.add(owner)
        self._wanted.set()
        self._start()
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: owner in self._locked),
                                   timeout)

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen_forever())

    async def wait(self, timeout: float) -> None:
        """Return when notified (or at once if notified since the last call), else after
        ``timeout`` seconds: the polling fallback."""
        self._start()
        if not self.work.is_set():
            try:
                async with asyncio.timeout(timeout):  # no inner task, unlike wait_for
                    await self.work.wait()
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
                self._locked = set()
                await self._drop()
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    async def _listen_once(self) -> None:
        """Connect, LISTEN, then stay until the connection is lost."""
        self._conn = conn = await asyncpg.connect(self.dsn, timeout=self.connect_timeout,
                                                  server_settings=self._settings,
                                                  **self.options)
        lost = asyncio.Event()
        def on_lost(_: object) -> None:
            lost.set()
            self._wanted.set()
        conn.add_termination_listener(on_lost)
        await conn.add_listener(self.channel, self._on_notify)
        self.connected = True
        self.work.set()  # notifications sent while we were not listening are gone: look once
        while not lost.is_set():
            self._wanted.clear()
            for owner in self._owners - self._locked:
                # waits while another session holds it: our own previous one, which the
                # server has not yet seen die (the owner still looks alive meanwhile), or
                # a worker testing it, for one statement
                await conn.execute("SELECT pg_advisory_lock($1, hashtext($2))",
                                   LOCK_CLASS, owner)
                async with self._changed:
                    self._locked.add(owner)
                    self._changed.notify_all()
            try:  # until lost (which sets it too), an owner to lock, or time to ping
                async with asyncio.timeout(_PING_EVERY):
                    await self._wanted.wait()
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
