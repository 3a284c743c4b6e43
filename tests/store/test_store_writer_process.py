"""SQLite's writer process (ADR 0050): groups written by a child process read back exactly
as the thread writes them; fencing, groups that cannot travel, a child that dies, a
parent that dies, and close."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import pickle
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest

from lashflow.errors import DbError
from lashflow.store import AttemptRecord, Commit, Fenced, RunChange, RunRecord, StepRecord
from lashflow.store import programs, sqlite_writer
from lashflow.store.base import BLOB_THRESHOLD, SETTING_PREFIX
from lashflow.store import sqlite as sqlite_module
from lashflow.store.sqlite import SqliteStore


def make_run(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, source_hash="src", process=None, input={"n": 1},
                     input_hash="in", created_at=1.0, updated_at=1.0)


def step_commit(run_id: str, generation: int | None, seq: int, *, big: bool = False,
                end: bool = False) -> Commit:
    key = f"site:{seq}"
    value: Any = "x" * (BLOB_THRESHOLD + 10) if big else [seq, "é", 1.0 / 3, None]
    return Commit(
        run_id, generation,
        steps=[StepRecord(run_id, key, "tool", tool="tools.t", args_hash=f"h{seq}",
                          status="done", outcome={"status": "ok", "value": value},
                          detail={"args": {"i": seq}}, seq=seq, created_at=seq + 0.1,
                          updated_at=seq + 0.2)],
        attempts=[AttemptRecord(run_id, key, 1, "ok", started_at=seq + 0.1,
                                finished_at=seq + 0.15, with_step=True),
                  AttemptRecord(run_id, f"{key}:other", 1, "failed", code="boom",
                                message="no", started_at=seq + 0.3, finished_at=seq + 0.4)],
        run=RunChange("finished", result={"n": seq}, release_lease=True,
                      updated_at=seq + 0.5) if end else None)


async def opened(path: Path, *, process: bool) -> SqliteStore:
    store = SqliteStore(str(path))
    store.backend.process_writer = process
    await store.open()
    return store


async def write_everything(store: SqliteStore, runs: int = 12) -> list[Any]:
    """Runs created and claimed, then every run's commits at once, groups of them; what
    the store reads back afterwards."""
    ids = [f"r{i:02d}" for i in range(runs)]
    for run_id in ids:
        await store.create_run(make_run(run_id))
    generations = {run_id: await store.claim(run_id, "w1", ttl=60, now=1.0) for run_id in ids}
    with registered_writers(store, runs):
        for seq in (1, 2, 3):
            await asyncio.gather(*(store.commit(step_commit(
                run_id, generations[run_id], seq, big=(seq == 2 and run_id == "r03"),
                end=(seq == 3))) for run_id in ids))
    read: list[Any] = []
    for run_id in ids:
        run = await store.get_run(run_id)
        read += [run.status, run.result, run.generation, run.lease_owner,
                 await store.load_journal(run_id),
                 [(e.seq, e.kind, e.data, e.at) for e in await store.run_events(run_id)]]
    return read


@contextlib.contextmanager
def registered_writers(store: SqliteStore, count: int) -> Iterator[None]:
    """``count`` registered writers (a group of that many writes is what the engine makes)."""
    leases = [store.register_writer() for _ in range(count)]
    try:
        yield
    finally:
        for lease in leases:
            lease.release()


@contextlib.asynccontextmanager
async def with_child(path: Path) -> AsyncIterator[SqliteStore]:
    """A store whose writer process is started (and closed with it)."""
    store = await opened(path, process=True)
    try:
        assert await store.start_process_writer()
        yield store
    finally:
        await store.close()


def count_thread_groups(store: SqliteStore) -> list[int]:
    counter = [0]
    backend: Any = store.backend
    original = backend._apply

    def counting(*args: Any, **options: Any) -> Any:
        counter[0] += 1
        return original(*args, **options)
    backend._apply = counting
    return counter


def wait_for_exit(pid: int) -> None:
    """Until process ``pid`` has ended (its pidfd becomes readable); a hang guard only."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], 120)
        assert ready, f"process {pid} is still alive"
    finally:
        os.close(fd)


def test_records_travel_by_pickle_unchanged() -> None:
    commit = step_commit("r", 3, 2, big=True, end=True)
    commit.wake, commit.wake_at = "parent", 9.5
    commit.events.append(("print", '{"text": "hi"}', 2.5))
    for value in (commit, make_run("r"), commit.steps[0], commit.attempts[1], commit.run):
        copy = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert copy == value and type(copy) is type(value)
    step = pickle.loads(pickle.dumps(commit.steps[0]))
    assert type(step.status) is type(commit.steps[0].status)
    # an answer callers compare by identity stays itself (a queued run's claim)
    assert pickle.loads(pickle.dumps(programs.GATED)) is programs.GATED


async def test_groups_written_by_the_process_read_back_as_the_threads(tmp_path: Path) -> None:
    by_thread = await opened(tmp_path / "thread.db", process=False)
    by_process = await opened(tmp_path / "process.db", process=True)
    try:
        assert await by_process.start_process_writer()
        pid = by_process.writer_pid
        assert pid is not None and pid != os.getpid()
        on_thread = count_thread_groups(by_process)
        assert await write_everything(by_process) == await write_everything(by_thread)
        assert on_thread[0] == 0  # not one group was written on the thread
        assert by_thread.writer_pid is None
    finally:
        await by_thread.close()
        await by_process.close()
    with pytest.raises(ProcessLookupError):  # closed: the child has ended and is reaped
        os.kill(pid, 0)


async def test_the_writer_process_starts_for_a_lasting_load_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone writer never starts it, nor a few groups shared by writers at once (one
    fan-out's); 32 of them do, and the next groups go to it."""
    monkeypatch.setattr(sqlite_module, "_WRITER_MODE", "")  # as shipped, whatever the env
    store = await opened(tmp_path / "start.db", process=True)
    backend: Any = store.backend
    try:
        ids = ["a", "b"]
        for run_id in ids:
            await store.create_run(make_run(run_id))
        gens = {run_id: await store.claim(run_id, "w1", ttl=60, now=1.0) for run_id in ids}
        with registered_writers(store, 1):
            for seq in range(1, 41):
                await store.commit(step_commit("a", gens["a"], seq))
        assert backend._starting is None
        seq = 40
        with registered_writers(store, 2):
            for _ in range(31):
                seq += 1
                await asyncio.gather(*(store.commit(step_commit(r, gens[r], seq)) for r in ids))
            assert backend._starting is None  # 31 shared groups: not yet
            seq += 1
            await asyncio.gather(*(store.commit(step_commit(r, gens[r], seq)) for r in ids))
            assert backend._starting is not None
            assert await store.start_process_writer()  # (waits for the start under way)
            on_thread = count_thread_groups(store)
            seq += 1
            await asyncio.gather(*(store.commit(step_commit(r, gens[r], seq)) for r in ids))
            assert on_thread[0] == 0
        steps, _ = await store.load_journal("b")
        assert [s.seq for s in steps] == list(range(41, seq + 1))
    finally:
        await store.close()


async def test_a_moved_lease_is_fenced_inside_the_processs_group(tmp_path: Path) -> None:
    async with with_child(tmp_path / "fence.db") as store:
        for run_id in ("kept", "moved"):
            await store.create_run(make_run(run_id))
        kept = await store.claim("kept", "w1", ttl=60, now=1.0)
        old = await store.claim("moved", "w1", ttl=1, now=1.0)
        new = await store.claim("moved", "w2", ttl=60, now=10.0)  # the lease expired: taken
        assert old is not None and new is not None and new != old
        with registered_writers(store, 2):
            results = await asyncio.gather(store.commit(step_commit("kept", kept, 1)),
                                           store.commit(step_commit("moved", old, 1)),
                                           return_exceptions=True)
        assert results[0] is None
        assert isinstance(results[1], Fenced) and "moved" in str(results[1])
        assert [s.step_key for s in (await store.load_journal("kept"))[0]] == ["site:1"]
        assert (await store.load_journal("moved"))[0] == []


async def test_a_group_that_cannot_travel_is_written_on_the_thread(tmp_path: Path) -> None:
    async with with_child(tmp_path / "local.db") as store:
        on_thread = count_thread_groups(store)
        backend: Any = store.backend
        travels = functools.partial(programs.one, "put_setting", SETTING_PREFIX + "a", "1")

        def stays() -> Any:  # a closure: pickle cannot send it
            return programs.one("put_setting", SETTING_PREFIX + "b", "2")
        assert [ok for ok, _ in await backend.apply_group([travels])] == [True]
        assert on_thread[0] == 0
        assert [ok for ok, _ in await backend.apply_group([stays, travels])] == [True, True]
        assert on_thread[0] == 1
        assert (await store.setting("a"), await store.setting("b")) == ("1", "2")


async def test_a_killed_writer_process_fails_only_its_groups(tmp_path: Path) -> None:
    """Its groups' writers are told the outcome is unknown; the thread writes from then
    on; a write tried again lands once."""
    async with with_child(tmp_path / "killed.db") as store:
        pid = store.writer_pid
        assert pid is not None
        ids = [f"r{i}" for i in range(10)]
        for run_id in ids:
            await store.create_run(make_run(run_id))
        generations = {run_id: await store.claim(run_id, "w1", ttl=60, now=1.0) for run_id in ids}
        os.kill(pid, signal.SIGKILL)  # the child this store started, by its id
        wait_for_exit(pid)
        with registered_writers(store, len(ids)):
            results = await asyncio.gather(*(store.commit(step_commit(
                run_id, generations[run_id], 1)) for run_id in ids), return_exceptions=True)
            for run_id, result in zip(ids, results):
                if result is not None:
                    assert isinstance(result, DbError), result
                    assert "writer process stopped" in str(result)
                    await store.commit(step_commit(run_id, generations[run_id], 1))
        assert not store.backend.pipelines
        for run_id in ids:
            assert [s.step_key for s in (await store.load_journal(run_id))[0]] == ["site:1"]


async def test_a_ctrl_c_to_the_process_group_leaves_the_writer_writing(
        tmp_path: Path) -> None:
    """SIGINT and SIGTERM reach every process of a terminal's or a service's group: the
    parent closes cleanly on them, and its writer must still be there to write what it
    holds."""
    async with with_child(tmp_path / "ctrl-c.db") as store:
        pid = store.writer_pid
        assert pid is not None
        os.kill(pid, signal.SIGINT)
        os.kill(pid, signal.SIGTERM)
        on_thread = count_thread_groups(store)
        written = await write_everything(store, runs=4)
        assert written[0] == "finished" and on_thread[0] == 0
        assert store.backend.pipelines and store.writer_pid == pid


async def test_a_writer_process_that_cannot_start_leaves_the_thread_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_writer.sys, "executable", str(tmp_path / "no-python"))
    store = await opened(tmp_path / "nostart.db", process=True)
    try:
        assert not await store.start_process_writer()
        assert store.writer_pid is None
        written = await write_everything(store, runs=3)
        assert written[0] == "finished"
    finally:
        await store.close()


def test_the_writer_process_ends_with_its_parent(tmp_path: Path) -> None:
    """A parent killed while it drives runs: the child writes what it holds, sees its
    input end and exits; every step the journal holds is whole."""
    db = tmp_path / "orphan.db"
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path[:0] = {[str(Path(__file__).parent)]!r}
        from test_store_writer_process import make_run, step_commit
        from lashflow.store.sqlite import SqliteStore

        async def main():
            store = SqliteStore({str(db)!r})
            await store.open()
            assert await store.start_process_writer()
            ids = [f"r{{i}}" for i in range(20)]
            for run_id in ids:
                await store.create_run(make_run(run_id))
            gens = {{r: await store.claim(r, "w1", ttl=600, now=1.0) for r in ids}}
            leases = [store.register_writer() for _ in ids]
            print(store.writer_pid, flush=True)
            seq = 0
            while True:
                seq += 1
                await asyncio.gather(*(store.commit(step_commit(r, gens[r], seq))
                                       for r in ids))
                if seq == 3:
                    print("going", flush=True)

        asyncio.run(main())
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "going"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        wait_for_exit(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()

    async def check() -> None:
        store = SqliteStore(str(db))
        await store.open()
        try:
            for i in range(20):
                steps, _ = await store.load_journal(f"r{i}")
                assert len(steps) >= 3
                assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
        finally:
            await store.close()
    asyncio.run(check())
