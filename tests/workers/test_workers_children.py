"""Child runs under workers: a parent drives the children it starts in its own engine,
and the worker loop (woken at once by the children's NOTIFY on PostgreSQL) lists those
same queued children. Each must be driven once: every step's side effect happens once and
no worker ever loses a lease to itself."""

from __future__ import annotations

from pathlib import Path

from lashflow.store import open_store
from workers_support import (
    FANOUT, Db, Fleet, check_journal, create_runs, executions, journals, read_log, wait_all,
)

PARENTS, CHILDREN = 6, 6


async def test_children_are_driven_once(db: Db, fleet: Fleet, log: Path) -> None:
    workers = [fleet.start(concurrency=16, poll=0.05) for _ in range(2)]
    await fleet.ready()
    ids = await create_runs(db.url, FANOUT, [{"k": CHILDREN}] * PARENTS, "fan", process="fan")
    total = PARENTS * (1 + CHILDREN)
    async with open_store(db.url) as store:
        await wait_all(store, fleet, total, "finished", timeout=120)
    assert set(fleet.stop().values()) == {0}
    runs, steps, attempts = await journals(db.url)
    assert [runs[run_id].result for run_id in ids] == [CHILDREN] * PARENTS
    calls = executions(read_log(log))
    kids = [run for run in runs.values() if run.parent_run_id is not None]
    assert len(kids) == PARENTS * CHILDREN
    for kid in kids:
        keys = check_journal(steps[kid.run_id], attempts[kid.run_id])
        assert len(keys) == 2
        for key in keys:
            assert len(calls[(kid.run_id, key)]) == 1, calls[(kid.run_id, key)]
    assert len(calls) == 2 * PARENTS * CHILDREN
    for proc in workers:
        assert "lease moved" not in fleet.output(proc)[1]
