"""The SQLite writer process itself (ADR 0050): ``python -m
lashflow.store.sqlite_writer_child PATH SYNCHRONOUS BUSY_TIMEOUT DEVICE INODE``.

It opens its own connection to the file its parent opened (the same device and inode, or
it refuses), answers ``ready``, then reads groups from its stdin until the input ends and
writes each with ``SqliteBackend.write_group``: one transaction, the commits fenced inside
it, one outcome per operation on its stdout once the transaction is durable. Nothing else
may write to that stdout: the answers' pipe is a copy of it, and stdout itself points at
stderr. It ignores SIGINT and SIGTERM: its parent's process group gets them when a person
or a service manager stops the parent, which then writes what it holds and closes.
"""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3
import sys
from typing import Any, Sequence

from ..errors import DbError
from .sqlite import SqliteBackend
from .sqlite_writer import HEADER, READY, frame


def _read_exactly(stream: Any, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _answer(out: Any, value: Any) -> None:
    out.write(frame(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))
    out.flush()


def _outcomes(results: Sequence[tuple[bool, Any]]) -> list[tuple[bool, Any]]:
    """Each outcome as it can travel: one that does not pickle becomes an error of its own
    (a bug to report, not a reason to lose the group's other answers)."""
    sendable = []
    for ok, value in results:
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            ok, value = False, DbError(f"a write's answer could not be sent back ({exc})")
        sendable.append((ok, value))
    return sendable


def main(argv: list[str]) -> int:
    """Serve one store's groups until the end of input."""
    path, synchronous, busy_timeout, device, inode = argv
    # A Ctrl-C or a SIGTERM sent to the parent's whole process group must not cut the
    # writes short under a parent that is closing cleanly: the end of input ends this.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing else may write into the answers' pipe
    backend = SqliteBackend(path, synchronous=synchronous, busy_timeout=float(busy_timeout))
    try:
        conn = backend.connect_writer((int(device), int(inode)))
    except (DbError, sqlite3.Error, OSError) as exc:
        _answer(out, str(exc))
        return 1
    _answer(out, READY)
    try:
        while True:
            size = _read_exactly(stdin, HEADER)
            if size is None:
                return 0
            payload = _read_exactly(stdin, int.from_bytes(size, "big"))
            if payload is None:
                return 0
            ops = pickle.loads(payload)
            try:
                results = backend.write_group(conn, ops)
            except Exception as exc:  # the whole transaction failed: nobody is durable
                results = [(False, exc)] * len(ops)
            try:
                _answer(out, results)
            except (pickle.PicklingError, TypeError, AttributeError):
                _answer(out, _outcomes(results))
    except BrokenPipeError:  # the parent is gone: nobody waits for an answer
        return 0
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
