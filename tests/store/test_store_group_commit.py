"""The shared core's write path, on both backends: the group-commit task has an owner
(cancelled before its first step, it strands nobody), ``close`` waits for queued writes
with a bound, and the lone writer's inline commit writes the same records as the queue."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from lashflow.errors import DbError
from lashflow.store import AttemptRecord, Commit, RunChange, RunRecord, StepRecord, Store
from lashflow.store import programs
from lashflow.slotted import replace

# A guard against a hang, never a timing assertion: each wait below ends on an event.
HANG = 60.0


def make_run(run_id: str) -> RunRecord:
    return RunRecord(run_id, "src", None, {}, "h", status="queued")


def step_write(run_id: str, generation: int | None, seq: int) -> Commit:
    return Commit(run_id, generation, steps=[StepRecord(run_id, f"s{seq}", "tool", seq=seq,
                                                        outcome=seq)])


def flushers() -> list[asyncio.Task[Any]]:
    """The store's group-commit tasks: the only tasks running a coroutine named ``_flush``."""
    return [task for task in asyncio.all_tasks()
            if getattr(task.get_coro(), "__qualname__", "").endswith("._flush")]


async def test_a_flusher_cancelled_before_its_first_step_strands_no_writer(
        backend: Any, store: Store) -> None:
    await store.create_run(make_run("r"))
    writers = [asyncio.ensure_future(store.commit(step_write("r", None, i))) for i in range(3)]
    while not flushers():  # the writers have queued and started the group's task
        await asyncio.sleep(0)
    [flusher] = flushers()
    flusher.cancel()  # as a shutdown that cancels every task would, before it ever ran
    results = await asyncio.wait_for(asyncio.gather(*writers, return_exceptions=True), HANG)
    assert all(isinstance(result, DbError) for result in results), results
    assert "stopped before the write committed" in str(results[0])
    # the store goes on: the next write starts a new group, and close does not hang
    await asyncio.wait_for(store.commit(step_write("r", None, 9)), HANG)
    await asyncio.wait_for(store.close(), HANG)
    async with backend.make() as reopened:
        assert [s.step_key for s in (await reopened.load_journal("r"))[0]] == ["s9"]


async def test_close_gives_up_on_a_group_that_cannot_commit_within_its_bound(
        backend: Any) -> None:
    store = backend.make()
    store.close_timeout = 0.2
    if backend.name == "sqlite":
        store.backend.busy_timeout = 1.0  # the stuck transaction ends by itself after that
    await store.open()
    await store.create_run(make_run("r"))
    release = await backend.hold_run_lock("r")
    try:
        writer = asyncio.ensure_future(store.commit(step_write("r", None, 0)))
        while not flushers():
            await asyncio.sleep(0)
        # the lock is held until close has returned: close must not wait for it
        await asyncio.wait_for(store.close(), HANG)
        assert writer.done()
        assert isinstance(writer.exception(), DbError)
    finally:
        await release()
    async with backend.make() as reopened:
        assert await reopened.load_journal("r") == ([], [])


async def script(store: Store, run_id: str) -> list[Any]:
    """Every kind of write the engine makes, then everything they left, read back."""
    await store.create_run(make_run(run_id))
    generation = await store.claim(run_id, "w1", ttl=60, now=1.0)
    assert generation is not None
    await store.put_source("hash", "source text")
    started = StepRecord(run_id, "a:0", "tool", tool="t", args_hash="h", status="started",
                         seq=0, created_at=1.0, updated_at=1.0)
    await store.commit(Commit(run_id, generation, steps=[started],
                              attempts=[AttemptRecord(run_id, "a:0", 1, "started", started_at=1.0)]))
    done = replace(started, status="done", outcome={"status": "ok", "value": 1},
                               updated_at=2.0)
    await store.commit(Commit(run_id, generation, steps=[done], attempts=[
        AttemptRecord(run_id, "a:0", 1, "ok", started_at=1.0, finished_at=2.0, with_step=True)]))
    await store.completion_open_wait({"run_id": run_id, "step_key": "k:0", "deadline_at": 9.0})
    await store.commit(Commit(run_id, generation, run=RunChange(
        "waiting", waiting=[{"kind": "key", "step_key": "k:0"}], updated_at=3.0)))
    await store.completion_settle(run_id, "k:0", {"ok": True}, now=4.0, respect_deadline=True,
                                  wake_at=4.0)
    await store.add_signal(run_id, "go", {"n": 1}, sender=f"{run_id}/s:0")
    await store.add_signal(run_id, "go", {"n": 1}, sender=f"{run_id}/s:0")  # once only
    await store.update_meta(run_id, lambda meta: meta.update(note="hi"))
    await store.renew(run_id, "w1", generation, ttl=60, now=5.0)
    await store.commit(Commit(run_id, generation, run=RunChange(
        "finished", result=1, release_lease=True, updated_at=6.0)))
    run = await store.get_run(run_id)
    return [replace(run, run_id="R"),
            [replace(record, run_id="R") for part in await store.load_journal(run_id)
             for record in part],
            dict(await store.completion_get(run_id, "k:0") or {}, run_id="R"),
            await store.get_signal(run_id, "go", 1), await store.get_signal(run_id, "go", 2),
            await store.get_source("hash")]


async def test_the_lone_writers_inline_commits_write_what_the_queue_writes(store: Store) -> None:
    """ADR 0008's two paths, one seam (``GroupCommit.submit``): SQLite commits a lone
    writer's writes on the caller's thread, PostgreSQL has only the queue; the records
    must be the same either way."""
    threads: list[str] = []
    backend: Any = store.backend  # type: ignore[attr-defined]
    original = backend._apply
    caller = threading.current_thread()

    def apply(*args: Any, **options: Any) -> Any:
        threads.append("caller" if threading.current_thread() is caller else "other")
        return original(*args, **options)
    backend._apply = apply
    with store.writing():  # one writer: it may commit inline
        alone = await script(store, "lone")
    alone_threads, threads[:] = list(threads), []
    with store.writing(), store.writing():  # two: every write takes the queue
        queued = await script(store, "queued")
    assert alone == queued
    if backend.inline is not None:  # SQLite: both paths were really taken
        assert set(alone_threads) == {"caller"}, alone_threads
        assert set(threads) == {"other"}, threads


async def test_the_writers_thread_waits_its_busy_timeout_after_inline_commits(
        tmp_path: Any) -> None:
    """Inline commits leave the writer connection failing fast (busy timeout 0: they run
    on the loop's thread and must never wait there), and switch it once, not twice per
    commit; whatever runs next on the connection's own thread waits the configured
    timeout for another process's lock again, and the next inline commit fails fast."""
    from lashflow.store.sqlite import SqliteStore

    async def timeout_on_its_thread(backend: Any) -> int:
        return int(await backend._call(
            lambda conn: conn.execute("PRAGMA busy_timeout").fetchone()[0]))

    store = SqliteStore(str(tmp_path / "busy.db"), busy_timeout=3.0)
    await store.open()
    try:
        backend: Any = store.backend
        await store.create_run(make_run("r"))
        with store.writing():  # the lone writer: these commit inline
            for seq in (1, 2):
                await store.commit(step_write("r", None, seq))
        assert backend._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert await timeout_on_its_thread(backend) == 3000
        with store.writing():
            await store.commit(step_write("r", None, 3))
        assert backend._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        steps, _ = await store.load_journal("r")
        assert [s.step_key for s in steps] == ["s1", "s2", "s3"]
    finally:
        await store.close()


def test_every_statement_a_program_asks_for_is_answered_by_both_dialects() -> None:
    import ast
    import inspect

    from lashflow.store.postgres import _Statements as PostgresStatements
    from lashflow.store.sqlite import _Statements as SqliteStatements

    asked = {node.value.elts[0].value for node in ast.walk(ast.parse(inspect.getsource(programs)))
             if isinstance(node, ast.Yield) and isinstance(node.value, ast.Tuple)
             and isinstance(node.value.elts[0], ast.Constant)}
    assert asked <= programs.STATEMENTS and "claim_free" in asked
    for dialect in (SqliteStatements, PostgresStatements):
        assert {name for name in programs.STATEMENTS if not hasattr(dialect, name)} == set()
