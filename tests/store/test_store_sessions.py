"""PostgreSQL judges a lease holder marked ``@db`` by its session lock (ADR 0035): held by
a live session, its runs stay its own; the moment that session ends, another claims them
though the lease has an hour left. An unmarked holder is never judged by a free lock."""

from __future__ import annotations

from typing import Any

import asyncpg

from lashflow.store import RunRecord
from lashflow.store.leases import SESSION_MARK, new_owner_id, owner_is_dead
from lashflow.store.pg_wakeups import LOCK_CLASS

NOW = 1000.0
HOUR = 3600.0


def queued(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, source_hash="src", process=None, input={}, input_hash="in",
                     status="queued")


async def hold(backend: Any, run_id: str, owner: str) -> None:
    """The lease as another worker, on another machine, would have written it."""
    await backend.tamper("UPDATE {runs} SET status = 'running', lease_owner = $1, "
                         "lease_expires = $2, generation = 1 WHERE run_id = $3",
                         owner, NOW + HOUR, run_id)


async def test_a_holder_is_dead_when_its_session_ends(postgres_backend: Any) -> None:
    elsewhere = f"elsewhere.invalid:1:feedbeef{SESSION_MARK}"  # no pid to judge
    unmarked = "elsewhere.invalid:2:feedbeef"  # never took a lock: a free one proves nothing
    session = await asyncpg.connect(postgres_backend.url)
    await session.execute("SELECT pg_advisory_lock($1, hashtext($2))", LOCK_CLASS, elsewhere)
    async with postgres_backend.make() as store:
        assert store.holds_sessions
        claimant = new_owner_id(session=True)
        assert not owner_is_dead(elsewhere)  # the pid is not asked about a marked owner
        for run_id, owner in (("alive", elsewhere), ("unmarked", unmarked)):
            await store.create_run(queued(run_id))
            await hold(postgres_backend, run_id, owner)
        assert await store.claimable(NOW) == []
        assert await store.claim_run("alive", claimant, 30.0, NOW) is None
        assert await store.orphaned_runs(NOW) == []

        await session.close()  # the server ends the session: the lock is free at once
        assert await store.claimable(NOW) == ["alive"]
        assert store.owner_gone(elsewhere) and not store.owner_gone(unmarked)
        assert await store.orphaned_runs(NOW) == ["alive"]
        claimed = await store.claim_run("alive", claimant, 30.0, NOW)
        assert claimed is not None and claimed.taken_from == elsewhere
        assert claimed.run.generation == 2  # fenced: the old holder's writes are refused
        assert await store.claim_run("unmarked", claimant, 30.0, NOW) is None


async def test_a_claimant_holds_its_own_lock_before_its_first_lease(postgres_backend: Any) -> None:
    async with postgres_backend.make() as store:
        owner = new_owner_id(session=True)
        await store.create_run(queued("q"))
        assert await store.claim_run("q", owner, 30.0, NOW) is not None
        probe = await asyncpg.connect(postgres_backend.url)
        try:  # another session cannot take it: the owner's session holds it
            assert not await probe.fetchval("SELECT pg_try_advisory_lock($1, hashtext($2))",
                                             LOCK_CLASS, owner)
        finally:
            await probe.close()
        async with postgres_backend.make() as other:  # to whom the owner is alive
            assert await other.claimable(NOW) == []
