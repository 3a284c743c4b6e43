"""SQLite's lone-writer path (ADR 0008): one run commits on the loop's thread; several
runs share group commits on the connection's thread; a lock held by another connection
never stalls the loop."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

from lashflow import Engine, RunStatus, tool
from lashflow.store.sqlite import SqliteStore

FLOW = """
process main(n: int) {
  i = 0
  while i < n {
    x = await tools.bump({ i: i })?
    i = i + 1
  }
  finish i
}
"""


@tool
async def bump(i: int) -> int:
    await asyncio.sleep(0)  # a real suspension: other runs get to queue their writes
    return i + 1


def record_threads(store: Any) -> list[str]:
    """Which thread ran each group transaction."""
    seen: list[str] = []
    original = store.backend._apply

    def apply(*args: Any, **options: Any) -> Any:
        seen.append("loop" if threading.current_thread() is threading.main_thread() else "db")
        return original(*args, **options)
    store.backend._apply = apply
    return seen


async def test_a_lone_run_commits_on_the_loops_thread(tmp_path: Path) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'one.db'}", tools=[bump]) as engine:
        assert isinstance(engine.store, SqliteStore)
        await engine.run(FLOW, input={"n": 1})  # stores the source once
        seen = record_threads(engine.store)
        outcome = await engine.run(FLOW, input={"n": 5})
        assert outcome.status is RunStatus.FINISHED and outcome.result == 5
        assert seen and set(seen) == {"loop"}, seen
        # 1 creation + 5 steps (the last one with the end): nothing more
        assert len(seen) == 6, seen


async def test_runs_at_once_share_group_commits_on_the_db_thread(tmp_path: Path) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'many.db'}", tools=[bump]) as engine:
        seen = record_threads(engine.store)
        outcomes = await asyncio.gather(*(engine.run(FLOW, input={"n": 5}) for _ in range(20)))
        assert [o.result for o in outcomes] == [5] * 20
        assert seen.count("db") > 0
        assert seen.count("loop") <= 2, seen  # at most the burst's first write
        assert len(seen) < 20 * 6 / 2  # shared: far fewer transactions than writes


async def test_a_lock_held_elsewhere_is_waited_for_off_the_loop(tmp_path: Path) -> None:
    """Another connection holds the write lock for 0.5 s and only the loop can release it
    (a timer on the loop). Were the lone writer to wait for the lock on the loop's thread,
    the timer could not fire and the write would fail after the busy timeout."""
    db = tmp_path / "locked.db"
    async with Engine(db=f"sqlite:///{db}", tools=[bump]) as engine:
        await engine.run(FLOW, input={"n": 1})  # the file and its schema exist
        other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        run = asyncio.create_task(engine.run(FLOW, input={"n": 3}))
        done_at_release: list[bool] = []

        def release() -> None:
            done_at_release.append(run.done())
            other.rollback()

        asyncio.get_running_loop().call_later(0.5, release)
        try:
            outcome = await run
        finally:
            other.close()
        assert outcome.status is RunStatus.FINISHED and outcome.result == 3
        # the loop's timer fired while the run could not commit (the lock was held), and
        # the run finished after the release: its wait for the lock never held the loop
        assert done_at_release == [False]
