"""Retention: old settled runs go with their journals and the blobs only they used, in
short batches while a worker keeps running beside it; waiting and recent runs stay."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from lashflow import Engine, RunStatus, tool
from lashflow.testing import FakeClock

DAY = 86400.0


@tool
async def big(n: int) -> str:
    return f"{n}:" + "y" * 100_000  # over the blob threshold


def count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


async def test_gc_deletes_old_settled_runs_beside_a_worker(tmp_path: Path) -> None:
    db = tmp_path / "gc.db"
    url = f"sqlite:///{db}"
    clock = FakeClock()
    async with Engine(db=url, tools=[big], clock=clock) as engine:
        for i in range(250):
            outcome = await engine.run(f"x = await tools.big({{n: {i}}})?\nfinish len(x)")
            assert outcome.status is RunStatus.FINISHED
        parked = await engine.run('sleep for "9000h"\nfinish 1', run_id="still-waiting")
        assert parked.status is RunStatus.WAITING
        clock.advance(40 * DAY)
        recent = await engine.run("x = await tools.big({n: 999})?\nfinish len(x)",
                                  run_id="recent")
        assert recent.status is RunStatus.FINISHED
        assert count(db, "blobs") == 251
        dry = await engine.gc(30 * DAY, dry_run=True)
        assert (dry.runs, dry.dry_run) == (250, True) and count(db, "runs") == 252

        async with Engine(db=url, tools=[big]) as worker:
            queued = [await worker.create(f"x = await tools.big({{n: {i}}})?\nfinish 1")
                      for i in range(1000, 1020)]
            stop = asyncio.Event()
            work = asyncio.ensure_future(worker.work(4, stop=stop, poll=0.01))
            report = await engine.gc(30 * DAY)
            for record in queued:  # real state, polled until the worker has finished them
                while (await worker.get(record.run_id)).status is not RunStatus.FINISHED:
                    await asyncio.sleep(0.01)
            stop.set()
            await work
        assert (report.runs, report.dry_run) == (250, False)
        assert report.blobs == 250
        remaining = {r.run_id for r in (await engine.runs(limit=100)).runs}
        assert {"still-waiting", "recent"} <= remaining and len(remaining) == 22
        assert count(db, "blobs") == 21  # the recent run's and the worker's runs'
        assert (await engine.get("recent")).status is RunStatus.FINISHED
