"""What only the PostgreSQL backend has: prefixed tables, row locks, URL options."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lashflow.errors import DbError
from lashflow.store import Commit, RunRecord, StepRecord, open_store
from lashflow.store.postgres import PostgresBackend, PostgresStore


def make_run(run_id: str, **fields: Any) -> RunRecord:
    return RunRecord(run_id=run_id, source_hash="src", process=None, input={}, input_hash="in",
                     **fields)


async def test_every_table_is_prefixed_so_a_shared_database_is_fine(postgres_backend: Any) -> None:
    async with postgres_backend.make():
        pass
    tables = await postgres_backend.tables()
    assert set(tables) == {"lashflow_meta", "lashflow_sources", "lashflow_runs", "lashflow_steps",
                           "lashflow_attempts", "lashflow_completions", "lashflow_signals",
                           "lashflow_blobs", "lashflow_versions",
                           "lashflow_schedules", "lashflow_events", "lashflow_queues",
                           "lashflow_queue_keys", "lashflow_buckets", "lashflow_rate_limits",
                           "lashflow_tool_slots"}


async def test_a_postgresql_url_opens_a_postgres_store(postgres_backend: Any) -> None:
    store = open_store(postgres_backend.url)
    assert isinstance(store, PostgresStore)
    async with store:
        assert len(await store.secret()) == 32


async def test_a_claim_never_queues_behind_a_lock_on_a_run_it_cannot_take(
        postgres_backend: Any) -> None:
    async with postgres_backend.make() as store:
        await store.create_run(make_run("r"))
        assert await store.claim("r", "w1", ttl=60, now=1.0) == 1
        release = await postgres_backend.hold_run_lock("r")  # e.g. w1 committing
        try:
            # the lock is held until ``release``: a claim that queued behind it would
            # never answer, and wait_for would raise instead
            assert await asyncio.wait_for(store.claim("r", "w2", ttl=60, now=2.0), 60) is None
        finally:
            await release()


async def test_a_locked_run_its_owner_may_take_is_claimed_once_the_lock_goes(
        postgres_backend: Any) -> None:
    async with postgres_backend.make() as store:
        await store.create_run(make_run("r"))
        assert await store.claim("r", "w1", ttl=60, now=1.0) == 1
        release = await postgres_backend.hold_run_lock("r")
        claim = asyncio.ensure_future(store.claim("r", "w1", ttl=60, now=2.0))
        await asyncio.sleep(0.2)
        assert not claim.done()  # "ours" is not refused just because the row is busy
        await release()
        assert await asyncio.wait_for(claim, 5) == 2


async def test_group_commits_of_two_workers_on_overlapping_runs_do_not_deadlock(
        postgres_backend: Any) -> None:
    async with postgres_backend.make() as first, postgres_backend.make() as second:
        run_ids = [f"r{i:02d}" for i in range(20)]
        for run_id in run_ids:
            await first.create_run(make_run(run_id))

        async def writer(store: Any, name: str, order: list[str]) -> None:
            for round_ in range(5):
                await asyncio.gather(*[store.commit(Commit(run_id, None, steps=[StepRecord(
                    run_id, f"{name}:{round_}", "tool", seq=round_)])) for run_id in order])

        await asyncio.wait_for(asyncio.gather(writer(first, "a", run_ids),
                                              writer(second, "b", run_ids[::-1])), 60)
        for run_id in run_ids:
            steps, _ = await first.load_journal(run_id)
            assert len(steps) == 10


async def test_pool_size_in_the_url_is_ours_and_checked(postgres_backend: Any) -> None:
    async with open_store(postgres_backend.url_with(pool_size="2")) as store:
        assert store.backend._pool.get_max_size() == 2  # type: ignore[attr-defined]
        await asyncio.gather(*[store.add_signal("r", "s", i) for i in range(10)])
    with pytest.raises(DbError, match="pool_size"):
        await open_store(postgres_backend.url_with(pool_size="many")).open()


async def test_statement_cache_size_in_the_url_is_ours(postgres_backend: Any) -> None:
    async with open_store(postgres_backend.url_with(statement_cache_size="0")) as store:
        await store.create_run(make_run("r"))
        assert await store.claim("r", "w1", ttl=60, now=1.0) == 1
        assert await store.claim("r", "w1", ttl=60, now=1.0) == 2
    with pytest.raises(DbError, match="statement_cache_size"):
        await open_store(postgres_backend.url_with(statement_cache_size="-1")).open()


async def test_an_unopened_or_closed_store_says_so(postgres_backend: Any) -> None:
    store = postgres_backend.make()
    with pytest.raises(DbError, match="not open"):
        await store.get_run("r")
    async with store:
        pass
    with pytest.raises(DbError, match="not open"):
        await store.commit(Commit("r", None))


async def test_a_plain_group_is_one_statement_and_a_rewriting_group_a_transaction(
        postgres_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    for name in ("_apply_in_one_statement", "_apply_in_transaction"):
        original = getattr(PostgresBackend, name)

        def spy(self: Any, *args: Any, _name: str = name, _original: Any = original) -> Any:
            used.append(_name)
            return _original(self, *args)
        monkeypatch.setattr(PostgresBackend, name, spy)
    async with postgres_backend.make() as store:
        await store.create_run(make_run("r"))
        await asyncio.gather(*[store.commit(Commit("r", None, steps=[
            StepRecord("r", f"k{i}", "tool", seq=i)])) for i in range(3)])
        assert used == ["_apply_in_one_statement"]
        await asyncio.gather(*[store.commit(Commit("r", None, steps=[
            StepRecord("r", "same", "tool", seq=9, outcome=i)])) for i in range(3)])
        assert used == ["_apply_in_one_statement", "_apply_in_transaction"]
        steps, _ = await store.load_journal("r")
        assert [(s.step_key, s.outcome) for s in steps] == [
            ("k0", None), ("k1", None), ("k2", None), ("same", 2)]
