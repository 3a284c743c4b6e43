"""Bulk actions by query (ADR 0032): retry of 1,000 failed runs while a worker drives
them on, a dry run that changes nothing, the query's filters, both backends."""

from __future__ import annotations

import asyncio
import pytest

from lashflow import Engine, LashflowError, RunStatus, ToolResult, tool
from lashflow.durable.selection import parse_where

STATE = {"down": True, "calls": 0}


@tool
async def charge(n: int) -> ToolResult:
    STATE["calls"] += 1
    if STATE["down"]:
        return ToolResult.failure("card service down", code="card_down")
    return ToolResult.ok(n)


PAY = "process pay(n: int) {\n  r = await tools.charge({n: n})?\n  finish r\n}"
NAP = 'process nap() {\n  sleep for "1h"\n  finish 1\n}'


@pytest.fixture(autouse=True)
def fresh() -> None:
    STATE.update(down=True, calls=0)


async def failed_runs(engine: Engine, count: int, prefix: str = "f") -> None:
    async def one(i: int) -> None:
        outcome = await engine.run(PAY, "pay", {"n": i}, run_id=f"{prefix}{i:05d}")
        assert outcome.status is RunStatus.FAILED
    for start in range(0, count, 50):
        await asyncio.gather(*(one(i) for i in range(start, min(count, start + 50))))


async def statuses(engine: Engine) -> dict[str, tuple[str, float]]:
    found: dict[str, tuple[str, float]] = {}
    cursor = None
    while True:
        page = await engine.runs(limit=1000, cursor=cursor)
        found.update({r.run_id: (r.status.value, r.updated_at) for r in page.runs})
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


async def test_bulk_retry_of_1000_failed_runs_with_a_worker_beside_it(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[charge]) as engine:
        await failed_runs(engine, 1000)
        await engine.run(NAP, run_id="napping")  # waiting: not retryable, skipped
        assert STATE["calls"] == 1000
        STATE["down"] = False
        stop = asyncio.Event()
        async with Engine(db=backend_url, tools=[charge]) as beside:
            working = asyncio.create_task(beside.work(8, stop=stop, poll=0.05))
            seen: list[int] = []
            report = await engine.bulk("retry", "status=failed and error=runtime_error",
                                       progress=lambda r: seen.append(r.seen))
            assert (report.state, report.matched, report.acted, report.skipped) == \
                ("done", 1000, 1000, 0)
            assert seen[0] == 0 and seen[-1] == 1000 and len(seen) >= 2
            for _ in range(6000):  # until the worker has driven every one (a hang guard)
                page = await engine.runs(status="finished", limit=1000)
                if len(page.runs) == 1000:
                    break
                await asyncio.sleep(0.1)
            stop.set()
            await working
        assert len((await engine.runs(status="finished", limit=1000)).runs) == 1000
        assert STATE["calls"] == 2000  # the failed step ran once more per run, no more
        assert (await engine.get("napping")).status is RunStatus.WAITING


async def test_a_dry_run_changes_nothing(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[charge]) as engine:
        await failed_runs(engine, 30)
        for i in range(5):
            await engine.run(NAP, run_id=f"nap{i}")
        await engine.pause("nap0")
        before = await statuses(engine)
        expected = {"cancel": 5, "retry": 31, "pause": 4, "unpause": 1, "gc": 30}
        for action, acted in expected.items():
            report = await engine.bulk(action, "all", dry_run=True)
            assert (report.matched, report.acted, report.dry_run) == (35, acted, True), action
        assert await statuses(engine) == before


async def test_bulk_pause_unpause_cancel_and_gc_by_filter(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[charge]) as engine:
        await failed_runs(engine, 10)
        for i in range(6):
            await engine.run(NAP, run_id=f"nap{i}")
        paused = await engine.bulk("pause", "process=nap", reason="maintenance", by="ops")
        assert (paused.matched, paused.acted) == (6, 6)
        page = await engine.runs(status="paused", limit=100)
        assert {r.paused["by"] for r in page.runs if r.paused} == {"ops"}
        assert len(page.runs) == 6
        unpaused = await engine.bulk("unpause", "status=paused")
        assert unpaused.acted == 6
        cancelled = await engine.bulk("cancel", "process=nap and status=queued",
                                      reason="not needed")
        assert cancelled.acted == 6
        await engine.recover()  # the next drive settles each cancel
        assert len((await engine.runs(status="cancelled", limit=100)).runs) == 6
        gone = await engine.bulk("gc", "status=failed,cancelled and error=runtime_error")
        assert (gone.matched, gone.acted) == (10, 10)
        assert {r.process for r in (await engine.runs(limit=100)).runs} == {"nap"}


async def test_bulk_by_queue_and_key(backend_url: str) -> None:
    """``queue=`` and ``key=`` select the runs waiting in a queue, and of one key in it."""
    async with Engine(db=backend_url, tools=[charge]) as engine:
        await engine.queues.create("mail")
        await engine.queues.create("sms")
        for i, (queue, key) in enumerate([("mail", "acme"), ("mail", "acme"), ("mail", "beta"),
                                          ("sms", "acme")]):
            await engine.create(NAP, run_id=f"q{i}", queue=queue, key=key)
        await engine.create(NAP, run_id="plain")
        dry = await engine.bulk("pause", "queue=mail", dry_run=True)
        assert (dry.matched, dry.acted) == (3, 3)
        paused = await engine.bulk("pause", "queue=mail and key=acme", reason="acme is down")
        assert sorted(paused.sample) == ["q0", "q1"]
        by_key = await engine.bulk("pause", "key=acme and status=queued")
        assert by_key.sample == ["q3"]
        assert {r.run_id for r in (await engine.runs(status="paused", limit=10)).runs} == {
            "q0", "q1", "q3"}


def test_the_where_expression() -> None:
    now = 1_000_000.0
    query = parse_where("status=failed,cancelled and process=pay error=card_down "
                        "created<2h updated>1d version=3 parent=p1 queue=mail key='acme co'",
                        now)
    assert query.statuses == ("failed", "cancelled") and query.processes == ("pay",)
    assert query.error_codes == ("card_down",) and query.versions == (3,)
    assert (query.until, query.updated_since, query.parent) == (now - 7200, now - 86400, "p1")
    assert (query.queue, query.key) == ("mail", "acme co")
    assert "failed" not in parse_where("status!=failed", now).statuses
    for bad, needle in (("colour=red", "unknown field"), ("status=done", "unknown status"),
                        ("created=2h", "compare times"), ("version=x", "a number"),
                        ("status", "cannot read"), ("", "at least one"),
                        ("queue=a,b", "one queue"), ("key!=x", "takes =")):
        with pytest.raises(LashflowError) as info:
            parse_where(bad, now)
        assert info.value.code == "usage_error" and needle in info.value.message, bad
