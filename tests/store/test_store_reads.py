"""SQLite's reads on the caller's thread (ADR 0019): the drive path's small reads use a
second, read-only connection on the event loop's thread; a read SQLite refuses there
(busy) goes to the connection's thread, which may wait for it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lashflow.errors import DbError
from lashflow.store import RunRecord
from lashflow.store.sqlite import SqliteStore


async def opened(path: Path) -> SqliteStore:
    store = SqliteStore(str(path))
    await store.open()
    await store.create_run(RunRecord("r", "src", None, {"n": 1}, "h", status="waiting"))
    return store


def record_hops(store: SqliteStore) -> list[str]:
    """The name of each function the store sends to the connection's thread."""
    hopped: list[str] = []
    call = store.backend._call

    async def recording(fn, *args):  # type: ignore[no-untyped-def]
        hopped.append(fn.__name__)
        return await call(fn, *args)
    store.backend._call = recording  # type: ignore[method-assign]
    return hopped


async def test_reads_see_every_committed_write_at_once(tmp_path: Path) -> None:
    store = await opened(tmp_path / "j.db")
    try:
        hopped = record_hops(store)
        for at in (5.0, 4.0, 3.0):
            await store.mark_due("r", at)
            assert (await store.get_run("r")).wake_at == at  # the write before it, seen
        assert await store.due_runs(10.0) == ["r"]
        assert await store.load_journal("r") == ([], [])
        assert set(hopped) == {"_apply"}  # only the writes went to the thread
    finally:
        await store.close()


class BusyOnce:
    """A reader connection that SQLite refuses once, as it may while another process
    recovers the WAL; then the real connection."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real
        self.refused = 0

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql == "BEGIN" and not self.refused:
            self.refused += 1
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise busy
        return self.real.execute(sql, *args)

    def close(self) -> None:
        self.real.close()


async def test_a_read_refused_on_the_loop_goes_to_the_thread(tmp_path: Path) -> None:
    store = await opened(tmp_path / "j.db")
    try:
        reader = BusyOnce(store.backend._reader)  # type: ignore[arg-type]
        store.backend._reader = reader  # type: ignore[assignment]
        hopped = record_hops(store)
        run = await store.get_run("r")
        assert reader.refused == 1 and hopped == ["_run"]
        assert run is not None and run.input == {"n": 1}
        assert (await store.get_run("r")) == run and hopped == ["_run"]  # back on the loop
    finally:
        await store.close()


async def test_a_broken_file_is_a_db_error_on_the_loop_too(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    store = await opened(path)
    try:
        store.backend._reader.execute("PRAGMA query_only = 0")  # type: ignore[union-attr]
        store.backend._reader.execute("DROP TABLE runs")  # type: ignore[union-attr]
        with pytest.raises(DbError) as info:
            await store.get_run("r")
        assert str(path) in str(info.value) and "runs" in str(info.value)
    finally:
        await store.close()
