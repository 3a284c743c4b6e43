"""Each run's event log (ADR 0033), on both backends: written in the transaction of the
change it tells of, one offset after another with no gap, nothing from a fenced commit,
read back after an offset or after a feed cursor, gone with its run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from lashflow.store import (
    AttemptRecord, Commit, Fenced, Reopening, RunChange, RunRecord, StepRecord,
)


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
        assert await store.reopen_runs([Reopening("r", lambda meta: None)], 5.0) == ["r"]
        assert [e.data["status"] for e in await store.run_events("r")] == [
            "queued", "failed", "queued"]
        await store.commit(Commit("r", None, run=RunChange("finished", result=1)))
        assert await store.delete_runs(["r"]) == 1
        assert await store.run_events("r") == []


async def test_operator_status_changes_are_events_of_each_run(backend: Any) -> None:
    """Pause, unpause, cancel and retry of many runs at once: each run changed gets its
    status event, at its own next offset, in the write that changed it; a run the
    write leaves alone gets none."""
    async with backend.make() as store:
        for run_id in ("a", "b", "c"):
            await store.create_run(_run(run_id))
        await store.commit(Commit("c", None, run=RunChange("failed", updated_at=2.0)))
        info = {"by": "ops@host", "at": 3.0, "reason": "card service down"}
        assert sorted(await store.pause_runs(["a", "b", "c"], 3.0, info)) == ["a", "b"]
        assert sorted(await store.unpause_runs(["a", "c"], 4.0)) == ["a"]
        assert sorted(await store.cancel_runs(["a", "b", "c"], 5.0, "wrong input")) == [
            "a", "b"]
        runs = {run_id: [(e.seq, e.data) for e in await store.run_events(run_id)]
                for run_id in ("a", "b", "c")}
        assert runs["a"] == [
            (1, {"status": "queued", "process": "p"}),
            (2, {"status": "paused", "by": "ops@host", "reason": "card service down",
                 "was": "queued"}),
            (3, {"status": "queued", "unpaused": True}),
            (4, {"status": "queued", "cancel_requested": True, "reason": "wrong input"})]
        assert [data["status"] for _, data in runs["b"]] == ["queued", "paused", "queued"]
        assert [data["status"] for _, data in runs["c"]] == ["queued", "failed"]
        assert [e.at for e in await store.run_events("b")][1:] == [3.0, 5.0]


async def test_reopening_many_runs_is_one_write_with_an_event_each(backend: Any) -> None:
    """``reopen_runs``: the stopped runs whose lease is free are queued, each with its own
    meta edit, its attempts kept as rows, its forgotten completions gone and its event;
    a run that is not stopped is left as it is."""
    async with backend.make() as store:
        for run_id in ("a", "b", "live"):
            await store.create_run(_run(run_id))
        for run_id in ("a", "b"):
            await store.commit(Commit(run_id, None, steps=[_step(run_id, "t:0", outcome={
                "status": "err", "error": {"code": "x", "message": "y"}})], attempts=[
                AttemptRecord(run_id, "t:0", 1, "err", "x", "y", started_at=1.5,
                              finished_at=2.0, with_step=True)],
                run=RunChange("failed", updated_at=2.0)))
            await store.completion_open_wait({"run_id": run_id, "step_key": "t:0"})
        kept = AttemptRecord("a", "t:0", 1, "err", "x", "y", started_at=1.5, finished_at=2.0)

        def mark(name: str) -> Any:
            return lambda meta: meta.__setitem__("mark", name)
        done = await store.reopen_runs([
            Reopening("a", mark("A"), ["t:0"], [kept]), Reopening("b", mark("B")),
            Reopening("live", mark("L"))], 6.0)
        assert sorted(done) == ["a", "b"]
        assert [(await store.get_run(r)).meta.get("mark") for r in ("a", "b", "live")] == [
            "A", "B", None]
        assert (await store.get_run("a")).status == "queued"
        assert await store.completion_get("a", "t:0") is None
        assert await store.completion_get("b", "t:0") is not None
        _, attempts = await store.load_journal("a")
        assert [(x.attempt, x.status) for x in attempts] == [(1, "err")]
        for run_id in ("a", "b"):
            last = (await store.run_events(run_id))[-1]
            assert (last.seq, last.data, last.at) == (
                4, {"status": "queued", "reopened": True}, 6.0)
        assert len(await store.run_events("live")) == 1


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
