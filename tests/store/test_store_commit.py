"""Journal writes: round trip in order, upserts, blobs, fencing and group commit."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from lashflow.store import AttemptRecord, Commit, Fenced, RunChange, RunRecord, StepRecord, Store
from lashflow.store.base import BLOB_THRESHOLD

Counter = Callable[[Store], list[int]]


def make_run(run_id: str, **fields: Any) -> RunRecord:
    return RunRecord(run_id=run_id, source_hash="src", process=None, input={}, input_hash="in",
                     **fields)


async def started_run(store: Store, run_id: str, owner: str = "w1") -> int:
    await store.create_run(make_run(run_id))
    generation = await store.claim(run_id, owner, ttl=60, now=1.0)
    assert generation is not None
    return generation


async def test_journal_round_trip_in_order(store: Store) -> None:
    generation = await started_run(store, "r")
    steps = [StepRecord("r", f"site{i}:0", "tool", tool=f"tools.t{i}", args_hash=f"h{i}",
                        status="done", outcome={"ok": True, "value": [i, "é", 1.5, None]},
                        detail={"attempts": 1}, seq=i, created_at=float(i), updated_at=float(i))
             for i in range(5)]
    # written out of order, in several commits: read back by seq
    await store.commit(Commit("r", generation, steps=[steps[3], steps[1]]))
    await store.commit(Commit("r", generation, steps=[steps[4], steps[0], steps[2]]))
    attempts = [AttemptRecord("r", "site3:0", 1, "ok", started_at=1.0, finished_at=2.0),
                AttemptRecord("r", "site1:0", 1, "err", "tool_exception", "boom",
                              {"retry_in": 0.5}, 3.0, 4.0),
                AttemptRecord("r", "site1:0", 2, "ok", started_at=5.0, finished_at=6.0)]
    for attempt in attempts:
        await store.commit(Commit("r", generation, attempts=[attempt]))
    loaded_steps, loaded_attempts = await store.load_journal("r")
    assert loaded_steps == steps
    assert loaded_attempts == attempts  # in the order they were written, not by key


async def test_upserts_keep_identity_and_position(store: Store) -> None:
    generation = await started_run(store, "r")
    await store.commit(Commit("r", generation,
                              steps=[StepRecord("r", "a:0", "tool", tool="t", args_hash="h",
                                                status="started", seq=0, created_at=1.0,
                                                updated_at=1.0)],
                              attempts=[AttemptRecord("r", "a:0", 1, "started", started_at=1.0)]))
    await store.commit(Commit("r", generation,
                              steps=[StepRecord("r", "b:0", "sleep", status="pending", seq=1,
                                                detail={"wake_at": 9.0})],
                              attempts=[AttemptRecord("r", "b:0", 1, "pending")]))
    # the outcome arrives: same keys, new status/outcome; seq/kind/tool/started_at stay
    await store.commit(Commit("r", generation,
                              steps=[StepRecord("r", "a:0", "other", tool="x", args_hash="y",
                                                status="done", outcome=7, seq=99,
                                                detail={"n": 1}, created_at=5.0, updated_at=5.0)],
                              attempts=[AttemptRecord("r", "a:0", 1, "ok", "c", "m", {"u": 1},
                                                      started_at=4.0, finished_at=5.0)]))
    steps, attempts = await store.load_journal("r")
    assert steps[0] == StepRecord("r", "a:0", "tool", tool="t", args_hash="h", status="done",
                                  outcome=7, detail={"n": 1}, seq=0, created_at=1.0,
                                  updated_at=5.0)
    assert [s.step_key for s in steps] == ["a:0", "b:0"]
    assert attempts == [AttemptRecord("r", "a:0", 1, "ok", "c", "m", {"u": 1}, 1.0, 5.0),
                        AttemptRecord("r", "b:0", 1, "pending")]


async def test_run_change_updates_the_run_row(store: Store) -> None:
    generation = await started_run(store, "r")
    waits = [{"kind": "key", "step_key": "s:0"}, {"kind": "sleep", "wake_at": 50.0}]
    await store.commit(Commit("r", generation, run=RunChange("waiting", waiting=waits, wake_at=50.0,
                                                             updated_at=42.0)))
    run = await store.get_run("r")
    assert run is not None
    assert (run.status, run.waiting, run.wake_at, run.lease_owner) == ("waiting", waits, 50.0, "w1")
    assert run.updated_at == 42.0  # the caller's clock, never the store's
    await store.commit(Commit("r", generation, run=RunChange(
        "failed", error={"code": "tool_exception", "message": "x"}, release_lease=True)))
    run = await store.get_run("r")
    assert run is not None
    assert (run.status, run.error, run.result, run.waiting, run.wake_at) == (
        "failed", {"code": "tool_exception", "message": "x"}, None, [], None)
    assert run.lease_owner is None and run.generation == generation


async def test_a_journal_of_another_run_is_empty(store: Store) -> None:
    assert await store.load_journal("nothing") == ([], [])


async def test_outcomes_over_64_kib_go_to_one_content_addressed_blob(backend: Any,
                                                                     store: Store) -> None:
    generation = await started_run(store, "r")
    big = {"text": "x" * (BLOB_THRESHOLD + 10), "n": [1, 2, 3]}
    at_limit = "y" * (BLOB_THRESHOLD - 2)  # its JSON is exactly 64 KiB: stays inline
    await store.commit(Commit("r", generation, steps=[
        StepRecord("r", "a:0", "tool", outcome=big, seq=0),
        StepRecord("r", "b:0", "tool", outcome=big, seq=1),
        StepRecord("r", "c:0", "tool", outcome=at_limit, seq=2)]))
    await store.commit(Commit("r", generation, steps=[StepRecord("r", "d:0", "tool", outcome=big,
                                                                 seq=3)]))
    steps, _ = await store.load_journal("r")
    assert [s.outcome for s in steps] == [big, big, at_limit, big]
    assert await backend.count("blobs") == 1
    # an upsert that makes the outcome small again reads back inline
    await store.commit(Commit("r", generation, steps=[StepRecord("r", "a:0", "tool", outcome=1)]))
    steps, _ = await store.load_journal("r")
    assert steps[0].outcome == 1


async def test_identical_big_tool_values_share_one_blob_whatever_their_times(
        backend: Any, store: Store) -> None:
    """A tool outcome's big value is the blob, not the whole outcome (whose times differ
    from call to call), so the same output stored twice is stored once."""
    generation = await started_run(store, "r")
    value = {"report": "z" * (BLOB_THRESHOLD + 10)}
    outcomes = [{"status": "ok", "attempts": 1, "value": value, "started_at": float(i),
                 "finished_at": i + 0.5} for i in range(3)]
    await store.commit(Commit("r", generation, steps=[
        StepRecord("r", f"s{i}:1", "tool", status="done", outcome=outcome, seq=i)
        for i, outcome in enumerate(outcomes)]))
    steps, _ = await store.load_journal("r")
    assert [s.outcome for s in steps] == outcomes
    assert await backend.count("blobs") == 1


async def test_a_stale_generation_is_fenced_while_the_rest_of_its_group_commits(
        backend: Any, store: Store, count_transactions: Counter) -> None:
    stale = await started_run(store, "a")
    await started_run(store, "b")
    await started_run(store, "c")
    fresh = await store.claim("a", "w2", ttl=60, now=100.0)  # w1's lease on "a" expired
    assert fresh == stale + 1
    counter = count_transactions(store)

    def write(run_id: str, generation: int | None, key: str) -> Commit:
        return Commit(run_id, generation, steps=[StepRecord(run_id, key, "tool", outcome=key)],
                      attempts=[AttemptRecord(run_id, key, 1, "ok")])

    results = await asyncio.gather(
        store.commit(write("a", stale, "stale:0")),
        store.commit(write("b", 1, "b:0")),
        store.commit(write("a", fresh, "fresh:0")),
        store.commit(write("missing", 1, "m:0")),
        store.commit(write("c", None, "admin:0")),  # no fencing: admin writes
        store.commit(write("c", 1, "c:0")),
        return_exceptions=True)
    assert counter[0] == 1  # all six were one group
    assert isinstance(results[0], Fenced) and isinstance(results[3], Fenced)
    assert [results[i] for i in (1, 2, 4, 5)] == [None] * 4
    async with backend.make() as other:  # durable, as seen by another connection
        assert [s.step_key for s in (await other.load_journal("a"))[0]] == ["fresh:0"]
        assert [a.step_key for a in (await other.load_journal("a"))[1]] == ["fresh:0"]
        assert [s.step_key for s in (await other.load_journal("b"))[0]] == ["b:0"]
        assert {s.step_key for s in (await other.load_journal("c"))[0]} == {"admin:0", "c:0"}
        assert await other.load_journal("missing") == ([], [])


async def test_a_fenced_run_change_does_not_touch_the_run(store: Store) -> None:
    stale = await started_run(store, "r")
    await store.claim("r", "w2", ttl=60, now=100.0)
    with pytest.raises(Fenced):
        await store.commit(Commit("r", stale, run=RunChange("finished", result=1,
                                                            release_lease=True)))
    run = await store.get_run("r")
    assert run is not None and run.status == "queued" and run.lease_owner == "w2"


async def test_group_commit_of_50_concurrent_committers(backend: Any, store: Store,
                                                        count_transactions: Counter) -> None:
    generations = {f"r{i}": await started_run(store, f"r{i}") for i in range(50)}
    counter = count_transactions(store)
    async with backend.make() as observer:
        async def one_run(run_id: str) -> None:
            key = f"{run_id}:s:0"
            await store.commit(Commit(
                run_id, generations[run_id],
                steps=[StepRecord(run_id, key, "tool", tool="t", outcome={"run": run_id})],
                attempts=[AttemptRecord(run_id, key, 1, "ok")],
                run=RunChange("running")))
            # returned => durable: another connection sees it at once
            steps, attempts = await observer.load_journal(run_id)
            assert [s.outcome for s in steps] == [{"run": run_id}]
            assert len(attempts) == 1

        await asyncio.gather(*[one_run(run_id) for run_id in generations])
    assert 1 <= counter[0] <= 3, f"{counter[0]} transactions for 50 concurrent commits"
    async with backend.make() as reopened:
        for run_id in generations:
            steps, _ = await reopened.load_journal(run_id)
            assert [s.step_key for s in steps] == [f"{run_id}:s:0"]
            assert (await reopened.get_run(run_id)).status == "running"  # type: ignore[union-attr]


async def test_commits_keep_flowing_in_groups_under_load(store: Store,
                                                         count_transactions: Counter) -> None:
    runs = {f"r{i}": await started_run(store, f"r{i}") for i in range(20)}
    counter = count_transactions(store)

    async def drive(run_id: str) -> None:
        for n in range(10):
            await store.commit(Commit(run_id, runs[run_id],
                                      steps=[StepRecord(run_id, f"s{n}", "tool", seq=n, outcome=n)]))

    await asyncio.gather(*[drive(run_id) for run_id in runs])
    for run_id in runs:
        steps, _ = await store.load_journal(run_id)
        assert [s.outcome for s in steps] == list(range(10))
    assert counter[0] < 200 / 2, "concurrent commits were not grouped"


async def test_close_waits_for_queued_commits(backend: Any) -> None:
    store = backend.make()
    await store.open()
    generation = await started_run(store, "r")
    pending = [asyncio.ensure_future(store.commit(Commit(
        "r", generation, steps=[StepRecord("r", f"s{i}", "tool", seq=i)]))) for i in range(5)]
    await asyncio.sleep(0)
    await store.close()
    await asyncio.gather(*pending)
    async with backend.make() as reopened:
        assert len((await reopened.load_journal("r"))[0]) == 5


async def test_a_group_that_writes_a_row_twice_applies_the_writes_in_order(
        backend: Any, store: Store, count_transactions: Counter) -> None:
    generation = await started_run(store, "r")
    stale = await started_run(store, "s")
    await store.claim("s", "w2", ttl=60, now=100.0)
    counter = count_transactions(store)
    started = Commit("r", generation,
                     steps=[StepRecord("r", "k:0", "tool", tool="t", status="started", seq=0,
                                       created_at=1.0, updated_at=1.0)],
                     attempts=[AttemptRecord("r", "k:0", 1, "started", started_at=1.0)],
                     run=RunChange("running"))
    finished = Commit("r", generation,
                      steps=[StepRecord("r", "k:0", "tool", tool="t", status="done", outcome="v",
                                        seq=0, created_at=2.0, updated_at=2.0)],
                      attempts=[AttemptRecord("r", "k:0", 1, "ok", started_at=2.0, finished_at=2.0),
                                AttemptRecord("r", "k:0", 2, "ok")],
                      run=RunChange("finished", result="v", release_lease=True))
    fenced = Commit("s", stale, steps=[StepRecord("s", "k:0", "tool", status="started")],
                    run=RunChange("failed"))
    results = await asyncio.gather(store.commit(started), store.commit(fenced),
                                   store.commit(finished), return_exceptions=True)
    assert counter[0] == 1
    assert results[0] is None and isinstance(results[1], Fenced) and results[2] is None
    async with backend.make() as other:
        steps, attempts = await other.load_journal("r")
        assert [(s.status, s.outcome, s.created_at, s.updated_at) for s in steps] == [
            ("done", "v", 1.0, 2.0)]
        assert [(a.attempt, a.status, a.started_at) for a in attempts] == [(1, "ok", 1.0),
                                                                           (2, "ok", None)]
        run = await other.get_run("r")
        assert run is not None and (run.status, run.result, run.lease_owner) == ("finished", "v", None)
        assert await other.load_journal("s") == ([], [])
        assert (await other.get_run("s")).status == "queued"  # type: ignore[union-attr]


async def test_a_lone_first_attempt_reads_back_the_same_on_both_backends(backend: Any) -> None:
    """ADR 0010: an attempt marked ``with_step`` may live in its step's row (SQLite keeps
    it there); ``load_journal`` gives back the same records either way, and an attempt
    that is not marked, or whose step is not written done with it, keeps its own row."""
    store = backend.make()
    async with store:
        generation = await started_run(store, "r")
        done = StepRecord("r", "a:0", "tool", tool="t", args_hash="h", status="done",
                          outcome={"ok": True, "value": 1}, seq=0, created_at=1.0, updated_at=2.0)
        first = AttemptRecord("r", "a:0", 1, "ok", None, None, {}, 1.0, 2.0, with_step=True)
        failed = StepRecord("r", "b:0", "tool", tool="t", args_hash="h", status="done",
                            outcome={"ok": False, "error": "x"}, seq=1, created_at=3.0,
                            updated_at=4.0)
        unmarked = AttemptRecord("r", "b:0", 1, "err", "tool_error", "x", {}, 3.0, 4.0)
        # marked, but its step is not in the same change: it needs a row of its own
        alone = AttemptRecord("r", "c:0", 1, "ok", None, None, {}, 5.0, 6.0, with_step=True)
        await store.commit(Commit("r", generation, steps=[done, failed], attempts=[first, unmarked]))
        await store.commit(Commit("r", generation, steps=[StepRecord(
            "r", "c:0", "tool", tool="t", status="done", outcome=None, seq=2)]))
        await store.commit(Commit("r", generation, attempts=[alone]))
        steps, attempts = await store.load_journal("r")
        assert [s.detail for s in steps] == [{}, {}, {}]
        back = sorted(attempts, key=lambda a: a.step_key)
        assert back == [first, unmarked, alone]
        # read back, ``with_step`` says the attempt lives in its step's row (ADR 0038)
        assert [a.with_step for a in back] == [backend.name == "sqlite", False, False]
        rows = await backend.count("attempts")
        assert rows == (2 if backend.name == "sqlite" else 3)


async def test_a_settling_child_makes_its_parent_due_in_the_same_commit(store: Store) -> None:
    """The parent's wake-up travels in the child's settling commit, so no crash between
    the two can leave a parent waiting on a child that finished (found by the crash
    campaign: a worker killed right after the child settled)."""
    await store.create_run(RunRecord("parent", "src", None, {}, "h", status="waiting",
                                     waiting=[{"kind": "child", "step": "s:1"}]))
    await store.create_run(RunRecord("child", "src", "kid", {}, "h", status="running",
                                     parent_run_id="parent"))
    generation = await store.claim("child", "w:1:x", 30.0, 5.0)
    assert await store.due_runs(100.0) == []
    await store.commit(Commit("child", generation, run=RunChange("finished", result=1,
                                                                  updated_at=7.0),
                              wake="parent", wake_at=7.0))
    assert await store.due_runs(100.0) == ["parent"]
    assert (await store.get_run("parent")).wake_at == 7.0
    # fenced: a child commit refused for a stale lease wakes nobody
    await store.create_run(RunRecord("p2", "src", None, {}, "h", status="waiting"))
    await store.create_run(RunRecord("c2", "src", "kid", {}, "h", status="running",
                                     parent_run_id="p2"))
    stale = await store.claim("c2", "w:1:x", 30.0, 5.0)
    await store.claim("c2", "w:2:y", 30.0, 1e9)  # another worker takes the lease over
    with pytest.raises(Fenced):
        await store.commit(Commit("c2", stale, run=RunChange("finished", result=1),
                                  wake="p2", wake_at=8.0))
    assert (await store.get_run("p2")).wake_at is None


async def test_a_group_of_many_runs_and_a_program_between_keeps_each_runs_order(
        store: Store, count_transactions: Counter) -> None:
    """Commits of several runs grouped with a program between them (a run created in the
    same transaction) and a fenced commit: each run's steps and events come out in its
    commits' order, and the fenced commit writes nothing."""
    generations = {run_id: await started_run(store, run_id) for run_id in ("a", "b", "c")}
    stale = generations["c"]
    generations["c"] = await store.claim("c", "w2", ttl=60, now=100.0)  # type: ignore[assignment]
    counter = count_transactions(store)

    def write(run_id: str, n: int, generation: int) -> Any:
        return store.commit(Commit(run_id, generation, steps=[StepRecord(
            run_id, f"s{n}", "tool", tool="t", status="done", outcome=n, seq=n,
            created_at=float(n), updated_at=float(n))]))

    results = await asyncio.gather(
        write("a", 0, generations["a"]), write("b", 0, generations["b"]),
        write("c", 0, stale), write("a", 1, generations["a"]),
        store.create_run(make_run("d")),
        write("b", 1, generations["b"]), write("c", 1, generations["c"]),
        write("a", 2, generations["a"]), return_exceptions=True)
    assert counter[0] == 1  # one transaction for all of them
    assert isinstance(results[2], Fenced)
    assert [r for i, r in enumerate(results) if i not in (2, 4)] == [None] * 6
    for run_id, keys in (("a", ["s0", "s1", "s2"]), ("b", ["s0", "s1"]), ("c", ["s1"])):
        steps, _ = await store.load_journal(run_id)
        assert [s.step_key for s in steps] == keys
        events = [e for e in await store.run_events(run_id) if e.kind != "run"]
        assert [e.data["step"] for e in events] == keys
        offsets = [e.seq for e in await store.run_events(run_id)]
        assert offsets == list(range(1, len(offsets) + 1))
    assert [e.seq for e in await store.run_events("d")] == [1]
