"""The SQLite group writer in a process of its own (ADR 0050).

The event loop and the thread that writes SQLite share one GIL, so while many runs are
in flight they take turns: every statement hands the GIL back and waits for it again,
and a group is written while the loop waits (ADR 0047). A second process has a GIL of
its own. Once a store sees runs write at once, it starts one (``python -m
lashflow.store.sqlite_writer_child``) and sends it each group: the operations, pickled, in a
length-prefixed frame on the child's stdin; the child writes them with the very code the
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
from typing import Any

from ..errors import DbError

HEADER = 4  # bytes of a frame's length, big-endian
READY = "ready"
CHILD_MODULE = "lashflow.store.sqlite_writer_child"


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(HEADER, "big") + payload


class WriterProcess:
    """The parent's side: sends groups, matches answers to them in order. Owns the child
    and the task that reads its answers."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        self.failure: str | None = None  # why it can no longer write, once it cannot

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def busy(self) -> bool:
        """Groups sent and not answered yet."""
        return bool(self._waiting)

    @classmethod
    async def start(cls, path: str, *, synchronous: str, busy_timeout: float,
                    identity: tuple[int, int]) -> "WriterProcess":
        """Start the child and wait until it has opened the database (``DbError`` if it
        could not)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", CHILD_MODULE, path, synchronous, repr(busy_timeout),
            str(identity[0]), str(identity[1]),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=_child_environment())
        writer = cls(process)
        try:
            answer = await writer._read_answer()
        except (asyncio.IncompleteReadError, pickle.UnpicklingError, EOFError) as exc:
            answer = f"it ended before it was ready ({type(exc).__name__})"
        if answer != READY:
            await writer.close()
            raise DbError(f"the SQLite writer process could not start: {answer}")
        writer._reader = asyncio.get_running_loop().create_task(writer._read_answers())
        return writer

    async def _read_answer(self) -> Any:
        stdout = self._process.stdout
        assert stdout is not None
        size = int.from_bytes(await stdout.readexactly(HEADER), "big")
        return pickle.loads(await stdout.readexactly(size))

    async def _read_answers(self) -> None:
        try:
            while True:
                answer = await self._read_answer()
                waiter = self._waiting.popleft()
                if not waiter.done():
                    waiter.set_result(answer)
        except asyncio.CancelledError:
            self._fail("the store closed while it wrote")
            raise
        except Exception as exc:  # the child died, or answered nonsense: it writes no more
            self._fail(f"it ended ({type(exc).__name__})")

    def _fail(self, why: str) -> None:
        self.failure = why
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(DbError(
                    f"the SQLite writer process stopped: {why}; its last writes may or may "
                    "not be committed (a run resumed reads which)"))

    def send(self, payload: bytes) -> asyncio.Future[Any]:
        """Queue one pickled group; the future gives its outcomes once it is durable."""
        stdin = self._process.stdin
        assert stdin is not None and self.failure is None
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        stdin.write(frame(payload))
        return waiter

    async def idle(self) -> None:
        """Until every group sent is answered (or failed)."""
        if self._waiting:
            await asyncio.wait(list(self._waiting))

    async def close(self) -> None:
        """End of input: the child writes what it holds and exits."""
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 30)
        except asyncio.TimeoutError:
            self._process.kill()
            await self._process.wait()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)


def _child_environment() -> dict[str, str]:
    """The parent's environment, with the folder this lashflow was imported from first on
    the child's path: the child must run the parent's code, whatever installed it."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    return environment
