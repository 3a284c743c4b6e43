"""The SQLite group writer in a process of its own (ADR 0050).

The event loop and the thread that writes SQLite share one GIL, so while many runs are
in flight they take turns: every statement hands the GIL back and waits for it again,
and a group is written while the loop waits (ADR 0047). A second process has a GIL of
its own. Once writers at once have shared enough groups, a store starts one (``python -m
lashflow.store.sqlite_writer_child``) and sends it each group: the operations, pickled, in
a length-prefixed frame on the child's stdin; the child writes them with the very code the
writer thread runs (``SqliteBackend.write_group``) on a connection of its own, and
answers one outcome per operation on its stdout. Groups are written in the order they
are sent; the loop runs one group's steps while the child writes the other's.

Crash safety is the database's, as before: a group is one transaction, each commit is
fenced by its lease generation inside it, and an outcome is reported only once its
transaction is durable. A parent that dies closes the pipe: the child finishes the
group it holds, if any, and exits at end of input. A child that dies leaves the groups
it held unknown (written or not, each is one transaction): their writers are told so
(``DbError``), a resumed run reads which, and the store writes on its thread again.
"""

from __future__ import annotations

import asyncio
import collections
import os
import pickle
import sys
from typing import Any, Callable

from ..errors import DbError

HEADER = 4  # bytes of a frame's length, big-endian
READY = "ready"
CHILD_MODULE = "lashflow.store.sqlite_writer_child"


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(HEADER, "big") + payload


class _Answers(asyncio.SubprocessProtocol):
    """The child's stdout, cut into frames as it arrives (no task: the loop calls this)."""

    def __init__(self, writer: "WriterProcess") -> None:
        self._writer = writer
        self._buffer = bytearray()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= HEADER:
            end = HEADER + int.from_bytes(buffer[:HEADER], "big")
            if len(buffer) < end:
                return
            body = bytes(buffer[HEADER:end])
            del buffer[:end]
            try:
                answer = pickle.loads(body)
            except Exception as exc:  # nonsense on the pipe: it writes no more
                self._writer.fail(f"it answered what cannot be read ({type(exc).__name__})")
                return
            self._writer.answered(answer)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._writer.fail("its answers ended")

    def process_exited(self) -> None:
        self._writer.exited()


class WriterProcess:
    """The parent's side: sends groups, matches answers to them in order. Owns the child
    (its transport) from ``start`` to ``close``."""

    def __init__(self, on_failure: Callable[[], None]) -> None:
        self._transport: asyncio.SubprocessTransport | None = None
        self._ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._on_failure = on_failure
        self.failure: str | None = None  # why it can no longer write, once it cannot

    @property
    def pid(self) -> int:
        assert self._transport is not None
        return self._transport.get_pid()

    @classmethod
    async def start(cls, path: str, *, synchronous: str, busy_timeout: float,
                    identity: tuple[int, int],
                    on_failure: Callable[[], None]) -> "WriterProcess":
        """Start the child and wait until it has opened the database (``DbError`` if it
        could not)."""
        writer = cls(on_failure)
        loop = asyncio.get_running_loop()
        writer._transport, _ = await loop.subprocess_exec(
            lambda: _Answers(writer), sys.executable, "-m", CHILD_MODULE, path, synchronous,
            repr(busy_timeout), str(identity[0]), str(identity[1]),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=_child_environment())
        answer = await writer._ready
        if answer != READY:
            await writer.close()
            raise DbError(f"the SQLite writer process could not start: {answer}")
        return writer

    def answered(self, answer: Any) -> None:
        if not self._ready.done():
            self._ready.set_result(answer)
        elif self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(answer)

    def exited(self) -> None:
        if not self._exited.done():
            self._exited.set_result(None)
        self.fail("it exited")

    def fail(self, why: str) -> None:
        if not self._ready.done():
            self._ready.set_result(f"{why} before it was ready")
        if self.failure is not None:
            return
        self.failure = why
        self._on_failure()
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(DbError(
                    f"the SQLite writer process stopped ({why}); its last writes may or may "
                    "not be committed: a run resumed reads which"))

    def send(self, payload: bytes) -> asyncio.Future[Any]:
        """Queue one pickled group; the future gives its outcomes once it is durable."""
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stdin = None if self._transport is None else self._transport.get_pipe_transport(0)
        if self.failure is not None or stdin is None or stdin.is_closing():
            waiter.set_exception(DbError(f"the SQLite writer process stopped ({self.failure})"))
            return waiter
        self._waiting.append(waiter)
        stdin.write(frame(payload))  # type: ignore[attr-defined]
        return waiter

    async def idle(self) -> None:
        """Until every group sent is answered (or failed)."""
        if self._waiting:
            await asyncio.wait(list(self._waiting))

    async def close(self) -> None:
        """End of input: the child writes what it holds and exits."""
        transport = self._transport
        if transport is None:
            return
        stdin = transport.get_pipe_transport(0)
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), 30)
        except asyncio.TimeoutError:
            transport.kill()
            await self._exited
        finally:
            self.fail("the store closed")
            transport.close()


def _child_environment() -> dict[str, str]:
    """The parent's environment, with the folder this lashflow was imported from first on
    the child's path: the child must run the parent's code, whatever installed it."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    return environment
