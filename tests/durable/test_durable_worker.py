"""The worker loop on SQLite: queued runs drained by workers, graceful stop, missing tools."""

from __future__ import annotations

import asyncio

from lashflow import Engine, RunStatus, tool

CALLS: list[tuple[str, int]] = []


@tool
async def step(run: str, i: int) -> int:
    CALLS.append((run, i))
    await asyncio.sleep(0.005)
    return i + 1


FIVE = """
process five(name: str) {
  i = 0
  while i < 5 { i = await tools.step({ run: name, i: i })? }
  finish name
}
"""


async def test_workers_drive_submitted_runs_exactly_once_per_step(db_url: str) -> None:
    CALLS.clear()
    async with Engine(db=db_url, tools=[step]) as submitter:
        for n in range(40):
            await submitter.create(FIVE, input={"name": f"r{n}"}, run_id=f"r{n}")
    async with Engine(db=db_url, tools=[step]) as a, Engine(db=db_url, tools=[step]) as b:
        driven = await asyncio.gather(a.work(4, idle_exit=0.5, poll=0.05),
                                      b.work(4, idle_exit=0.5, poll=0.05))
        assert sum(driven) >= 40
        runs = await a.list()
        assert {r.status for r in runs} == {RunStatus.FINISHED} and len(runs) == 40
    assert len(CALLS) == 200 and len(set(CALLS)) == 200


async def test_stop_hands_runs_back_and_another_worker_finishes_them(db_url: str) -> None:
    CALLS.clear()
    async with Engine(db=db_url, tools=[step]) as submitter:
        for n in range(6):
            await submitter.create(FIVE, input={"name": f"s{n}"}, run_id=f"s{n}")
    async with Engine(db=db_url, tools=[step]) as first:
        stop = asyncio.Event()
        worker = asyncio.create_task(first.work(6, stop=stop, poll=0.05))
        while len(CALLS) < 8:
            await asyncio.sleep(0.005)
        stop.set()
        await asyncio.wait_for(worker, timeout=10)
        states = {r.status for r in await first.list()}
        assert RunStatus.RUNNING not in states  # nothing is left holding a lease
        assert RunStatus.QUEUED in states
    async with Engine(db=db_url, tools=[step]) as second:
        await second.work(6, idle_exit=0.3, poll=0.05)
        assert {r.status for r in await second.list()} == {RunStatus.FINISHED}
    assert len(CALLS) == 30 and len(set(CALLS)) == 30


async def test_a_worker_without_the_tools_leaves_the_run_and_says_why(db_url: str) -> None:
    CALLS.clear()
    async with Engine(db=db_url, tools=[step]) as submitter:
        await submitter.create(FIVE, input={"name": "t"}, run_id="needs-step")
    async with Engine(db=db_url) as bare:
        await bare.work(2, idle_exit=0.3, poll=0.05)
        record = await bare.get_record("needs-step")
        assert record.status == "queued"
        assert "cannot run it" in record.meta["note"] and "step" in record.meta["note"]
    async with Engine(db=db_url, tools=[step]) as able:
        await able.work(2, idle_exit=0.3, poll=0.05)
        assert (await able.get("needs-step")).status is RunStatus.FINISHED


async def test_a_database_error_on_one_run_does_not_stop_the_worker(db_url: str, caplog) -> None:
    """The first claim of a run fails as a locked database would; the worker logs it,
    keeps serving, and finishes the run on a later pass."""
    from lashflow.errors import DbError

    CALLS.clear()
    async with Engine(db=db_url, tools=[step]) as submitter:
        await submitter.create(FIVE, input={"name": "u"}, run_id="flaky")
    async with Engine(db=db_url, tools=[step]) as worker:
        real_claim = worker.store.claim_run
        failures = []

        async def claim_once_failing(*args, **kwargs):
            if not failures:
                failures.append(args[0])
                raise DbError("database error: database is locked")
            return await real_claim(*args, **kwargs)

        worker.store.claim_run = claim_once_failing  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(worker.work(2, stop=stop, poll=0.05))
        for _ in range(400):
            if (await worker.get_record("flaky")).status == "finished":
                break
            await asyncio.sleep(0.025)
        stop.set()
        await asyncio.wait_for(task, timeout=10)
        assert failures == ["flaky"]
        assert (await worker.get("flaky")).status is RunStatus.FINISHED
    assert "run flaky: database error: database is locked" in caplog.text
    assert len(CALLS) == 5
