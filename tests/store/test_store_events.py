"""Each run's event log (ADR 0033), on both backends: written in the transaction of the
change it tells of, one offset after another with no gap, nothing from a fenced commit,
read back after an offset or after a feed cursor, gone with its run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from lashflow.store import AttemptRecord, Commit, Fenced, RunChange, RunRecord, StepRecord


def _run(run_id: str, process: str = "p") -> RunRecord:
    return RunRecord(run_id, "src", process, {}, "in", created_at=1.0, updated_at=1.0)


def _step(run_id: str, key: str, status: str = "done", kind: str = "tool",
          outcome: Any = None) -> StepRecord:
    return StepRecord(run_id, key, kind, "tools.t", status=status, outcome=outcome,
                      updated_at=2.0)


async def test_changes_become_events_in_order_with_no_gap(backend: Any) -> None:
    async with backend.make() as store:
        await store.create_run(_run("r"))
        generation = await store.claim("r", "w", 60, 1.0)
        await store.commit(Commit("r", generation, run=RunChange("running", updated_at=2.0)))
        await store.commit(Commit("r", generation, steps=[
            _step("r", "a:0", outcome={"status": "ok", "value": {"n": 1}}),
            _step("r", "p:0", kind="print", outcome={"text": "hello", "value": "hello"})],
            attempts=[AttemptRecord("r", "a:0", 1, "ok", started_at=1.5, finished_at=2.0,
                                    with_step=True)]))
        await store.commit(Commit("r", generation, attempts=[
            AttemptRecord("r", "b:0", 1, "err", "boom", "it broke", started_at=3.0,
                          finished_at=3.5)]))
        with pytest.raises(Fenced):  # a fenced commit writes no event either
            await store.commit(Commit("r", generation + 1, run=RunChange("finished")))
        waits = [{"kind": "completion", "step": "c:0", "tool": "t", "key": "SECRET-KEY",
                  "resolve": "lashflow complete SECRET-KEY"}]
        await store.commit(Commit("r", generation, run=RunChange("waiting", waiting=waits,
                                                                 updated_at=4.0)))
        found = await store.run_events("r")
        assert [(e.seq, e.kind) for e in found] == [
            (1, "run"), (2, "run"), (3, "step"), (4, "print"), (5, "attempt"), (6, "run")]
        assert found[0].data == {"status": "queued", "process": "p"}
        assert found[2].data["value"] == {"n": 1} and found[2].data["attempts"][0]["status"] == "ok"
        assert found[3].data["text"] == "hello"
        assert found[4].data["code"] == "boom" and found[4].data["step"] == "b:0"
        assert found[5].data["waiting"] == [{"kind": "completion", "step": "c:0", "tool": "t"}]
        assert "SECRET-KEY" not in repr(found)  # no completion key in an event
        assert [e.seq for e in await store.run_events("r", after=4)] == [5, 6]
        assert [e.seq for e in await store.run_events("r", after=2, limit=2)] == [3, 4]


async def _feed(store: Any, after: str, want: int, process: str | None = None) -> list[Any]:
    """The feed after ``after`` once it holds ``want`` events: on PostgreSQL it waits
    for every older transaction on the server (other tests' too) to end."""
    deadline = time.monotonic() + 120
    while True:
        found = await store.feed(after, process=process)
        if len(found) >= want or time.monotonic() > deadline:
            return list(found)
        await asyncio.sleep(0.05)


async def test_the_feed_resumes_after_a_cursor_and_filters_by_process(backend: Any) -> None:
    async with backend.make() as store:
        start = await store.feed_head()
        await store.create_run(_run("a", "alpha"))
        await store.create_run(_run("b", "beta"))
        await store.commit(Commit("a", None, run=RunChange("running", updated_at=2.0)))
        newest = await store.feed(start, settled=False)  # at once, horizon or not
        assert [(e.run_id, e.seq) for e in newest] == [("a", 1), ("b", 1), ("a", 2)]
        seen = await _feed(store, start, 3)
        assert [(e.run_id, e.seq) for e in seen] == [("a", 1), ("b", 1), ("a", 2)]
        assert await store.feed(seen[-1].cursor) == []
        assert [(e.run_id, e.seq) for e in await _feed(store, seen[0].cursor, 2)] == [
            ("b", 1), ("a", 2)]
        assert [(e.run_id, e.seq) for e in await _feed(store, start, 2, "alpha")] == [
            ("a", 1), ("a", 2)]
        head = seen[-1].cursor
        await store.commit(Commit("b", None, run=RunChange("cancelled", updated_at=3.0)))
        assert [(e.run_id, e.seq) for e in await _feed(store, head, 1)] == [("b", 2)]


async def test_reopen_and_delete(backend: Any) -> None:
    async with backend.make() as store:
        await store.create_run(_run("r"))
        await store.commit(Commit("r", None, run=RunChange("failed", error={"code": "x",
                                                                             "message": "y"})))
        assert await store.reopen_run("r", 5.0, lambda meta: None)
        assert [e.data["status"] for e in await store.run_events("r")] == [
            "queued", "failed", "queued"]
        await store.commit(Commit("r", None, run=RunChange("finished", result=1)))
        assert await store.delete_runs(["r"]) == 1
        assert await store.run_events("r") == []


async def test_writers_of_one_run_at_once_keep_the_offsets_whole(backend: Any) -> None:
    """Unfenced writers of the same run (an operator's write beside a worker's) racing:
    every event lands with its own offset, none lost, no error."""
    async with backend.make() as one, backend.make() as two:
        await one.create_run(_run("r"))

        async def write(store: Any, prefix: str) -> None:
            for i in range(20):
                await store.commit(Commit("r", None, steps=[_step("r", f"{prefix}{i}:0")]))

        await asyncio.gather(write(one, "x"), write(two, "y"))
        found = await one.run_events("r")
        assert [e.seq for e in found] == list(range(1, 42))
        assert len({e.data["step"] for e in found[1:]}) == 40
