"""The run list and a run's detail, in both backends: newest first, filters, keyset
pages that neither skip nor repeat a run, one read for a run with its journal and
children, and the cancel watcher's one query."""

from __future__ import annotations

from typing import Any

import pytest

from lashflow.errors import UsageError
from lashflow.store import Commit, RunChange, RunQuery, RunRecord, StepRecord


def run(run_id: str, created: float, *, status: str = "queued", process: str | None = "p",
        parent: str | None = None) -> RunRecord:
    return RunRecord(run_id, "src", process, {"n": run_id}, "in", status=status,
                     created_at=created, updated_at=created, parent_run_id=parent)


async def test_pages_are_newest_first_and_cover_every_run_once(backend: Any) -> None:
    async with backend.make() as store:
        # equal creation times too: the run id breaks the tie
        for i in range(23):
            await store.create_run(run(f"r{i:02d}", 100.0 + i // 3))
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.query_runs(RunQuery(limit=5, cursor=cursor))
            seen += [r.run_id for r in page.runs]
            assert len(page.runs) <= 5
            cursor = page.next_cursor
            if cursor is None:
                break
        expected = sorted((f"r{i:02d}" for i in range(23)),
                          key=lambda rid: (100.0 + int(rid[1:]) // 3, rid), reverse=True)
        assert seen == expected


async def test_filters_combine(backend: Any) -> None:
    async with backend.make() as store:
        await store.create_run(run("a", 1, status="finished", process="x"))
        await store.create_run(run("b", 2, status="waiting", process="y"))
        await store.create_run(run("c", 3, status="failed", process="x", parent="a"))
        await store.create_run(run("d", 4, status="finished", process="x", parent="a"))

        async def ids(**filters: Any) -> list[str]:
            return [r.run_id for r in (await store.query_runs(RunQuery(**filters))).runs]

        assert await ids() == ["d", "c", "b", "a"]
        assert await ids(statuses=("finished",)) == ["d", "a"]
        assert await ids(statuses=("finished", "waiting")) == ["d", "b", "a"]
        assert await ids(process="x") == ["d", "c", "a"]
        assert await ids(parent="a") == ["d", "c"]
        assert await ids(since=2, until=4) == ["c", "b"]
        assert await ids(statuses=("finished", "failed"), parent="a", limit=1) == ["d"]
        two = await store.query_runs(RunQuery(statuses=("finished", "failed"), limit=1))
        rest = await store.query_runs(RunQuery(statuses=("finished", "failed"),
                                               cursor=two.next_cursor))
        assert [r.run_id for r in two.runs + rest.runs] == ["d", "c", "a"]
        with pytest.raises(UsageError, match="bad cursor"):
            await store.query_runs(RunQuery(cursor="garbage!"))


async def test_run_detail_reads_the_run_its_journal_and_children(backend: Any) -> None:
    async with backend.make() as store:
        assert await store.run_detail("nope") is None
        await store.create_run(run("parent", 1))
        await store.create_run(run("kid", 2, parent="parent", status="waiting"))
        await store.commit(Commit("parent", None, steps=[
            StepRecord("parent", "s:1", "tool", "tools.a", "h", "done", {"status": "ok"},
                       seq=1)]))
        detail = await store.run_detail("parent")
        assert detail is not None and detail.run.run_id == "parent"
        assert [s.step_key for s in detail.steps] == ["s:1"]
        assert [(c.run_id, c.status) for c in detail.children] == [("kid", "waiting")]
        assert detail.journal_error is None


async def test_cancel_requests_names_only_asked_runs_with_a_request(backend: Any) -> None:
    async with backend.make() as store:
        for name in ("a", "b", "c"):
            await store.create_run(run(name, 1))
        await store.request_cancel("a")
        await store.request_cancel("c")
        assert await store.cancel_requests(["a", "b"]) == {"a"}
        assert await store.cancel_requests([]) == set()
        assert await store.cancel_requests([f"x{i}" for i in range(1200)] + ["c"]) == {"c"}


async def test_summaries_carry_what_a_list_shows(backend: Any) -> None:
    async with backend.make() as store:
        await store.create_run(run("w", 5))
        await store.commit(Commit("w", None, run=RunChange(
            "waiting", waiting=[{"kind": "sleep", "step": "s:1", "resolve": "x", "until": 9.0}],
            wake_at=9.0, updated_at=6.0)))
        await store.set_note("w", "worker z lacks tools")
        [summary] = (await store.query_runs(RunQuery())).runs
        assert (summary.status, summary.wake_at, summary.updated_at, summary.note) == (
            "waiting", 9.0, 6.0, "worker z lacks tools")
        assert summary.waiting[0]["kind"] == "sleep"


async def test_retention_deletes_only_settled_runs_and_unused_blobs(backend: Any) -> None:
    big = "z" * 70_000  # over the blob threshold
    async with backend.make() as store:
        await store.create_run(run("old", 1, status="finished"))
        await store.create_run(run("old-waiting", 1, status="waiting"))
        await store.create_run(run("new", 50, status="failed"))
        for name in ("old", "new"):
            await store.commit(Commit(name, None, steps=[
                StepRecord(name, "s:1", "tool", "t", "h", "done",
                           {"status": "ok", "value": big + name}, seq=1)]))
        assert await store.stale_runs(10, ("finished", "failed", "waiting"), 10) == ["old"]
        assert await store.delete_runs(["old", "old-waiting"]) == 1  # never a waiting run
        assert await store.delete_unreferenced_blobs(10) == 1
        assert await store.delete_unreferenced_blobs(10) == 0
        assert await store.get_run("old") is None
        assert await store.get_run("old-waiting") is not None
        steps, _ = await store.load_journal("new")
        assert steps[0].outcome["value"] == big + "new"
