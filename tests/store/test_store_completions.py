"""Completion rows and signals: atomic first-writer-wins, deadlines, ordinals."""

from __future__ import annotations

import asyncio
from typing import Any

from lashflow.store import RunRecord, Store


def wait_row(step_key: str = "s:0", **fields: Any) -> dict[str, Any]:
    row = {"run_id": "r", "step_key": step_key, "deadline_at": None, "on_timeout": "fail_turn",
           "on_cancel": "cancel_external", "module": "tools", "tool": "approve"}
    row.update(fields)
    return row


async def test_completion_get_of_an_unknown_key_is_none(store: Store) -> None:
    assert await store.completion_get("r", "s:0") is None


async def test_open_wait_inserts_a_waiting_row_and_keeps_its_fields(store: Store) -> None:
    row = await store.completion_open_wait(wait_row(deadline_at=100.0))
    expected = {"run_id": "r", "step_key": "s:0", "waiting": True, "deadline_at": 100.0,
                "on_timeout": "fail_turn", "on_cancel": "cancel_external", "module": "tools",
                "tool": "approve", "resolution": None}
    assert row == expected
    again = await store.completion_open_wait(wait_row(deadline_at=500.0, tool="other"))
    assert again == expected  # already waiting: the first wait's fields stay
    assert await store.completion_get("r", "s:0") == expected


async def test_a_resolution_delivered_before_the_wait_stays(store: Store) -> None:
    early, verdict = await store.completion_settle("r", "s:0", {"ok": True, "value": 1},
                                                   now=1.0, respect_deadline=True)
    assert verdict == "won"
    assert early["waiting"] is False and early["resolution"] == {"ok": True, "value": 1}
    row = await store.completion_open_wait(wait_row(deadline_at=100.0))
    assert row["waiting"] is True and row["deadline_at"] == 100.0 and row["tool"] == "approve"
    assert row["resolution"] == {"ok": True, "value": 1}
    assert await store.completion_open_waits("r") == []  # resolved: not an open wait


async def test_settle_first_writer_wins(store: Store) -> None:
    await store.completion_open_wait(wait_row())
    row, verdict = await store.completion_settle("r", "s:0", {"ok": True, "value": "first"},
                                                 now=5.0, respect_deadline=True)
    assert verdict == "won" and row["resolution"] == {"ok": True, "value": "first"}
    row, verdict = await store.completion_settle("r", "s:0", {"ok": True, "value": "second"},
                                                 now=6.0, respect_deadline=False)
    assert verdict == "already_resolved" and row["resolution"] == {"ok": True, "value": "first"}
    stored = await store.completion_get("r", "s:0")
    assert stored is not None and stored["resolution"] == {"ok": True, "value": "first"}


async def test_exactly_one_of_many_concurrent_settlers_wins(backend: Any) -> None:
    async with backend.make() as first, backend.make() as second:
        await first.completion_open_wait(wait_row())
        stores = [first, second]
        results = await asyncio.gather(*[
            stores[i % 2].completion_settle("r", "s:0", {"ok": True, "value": i}, now=1.0,
                                            respect_deadline=True) for i in range(20)])
        verdicts = [verdict for _, verdict in results]
        assert verdicts.count("won") == 1
        assert verdicts.count("already_resolved") == 19
        winner = verdicts.index("won")
        assert all(row["resolution"] == {"ok": True, "value": winner} for row, _ in results)
        stored = await second.completion_get("r", "s:0")
        assert stored is not None and stored["resolution"] == {"ok": True, "value": winner}


async def test_concurrent_settlers_of_a_key_nobody_waits_on_yet(store: Store) -> None:
    results = await asyncio.gather(*[
        store.completion_settle("r", "early:0", {"ok": True, "value": i}, now=1.0,
                                respect_deadline=True) for i in range(10)])
    assert [verdict for _, verdict in results].count("won") == 1


async def test_a_deadline_respecting_settle_after_the_deadline_is_expired(store: Store) -> None:
    await store.completion_open_wait(wait_row(deadline_at=100.0))
    row, verdict = await store.completion_settle("r", "s:0", {"ok": True}, now=100.0,
                                                 respect_deadline=True)
    assert verdict == "expired" and row["resolution"] is None
    assert (await store.completion_get("r", "s:0"))["resolution"] is None  # type: ignore[index]
    # the timeout itself is recorded without respecting the deadline
    row, verdict = await store.completion_settle("r", "s:0", {"ok": False, "error": "timeout"},
                                                 now=100.0, respect_deadline=False)
    assert verdict == "won"
    _, verdict = await store.completion_settle("r", "s:0", {"ok": True}, now=101.0,
                                               respect_deadline=True)
    assert verdict == "already_resolved"  # resolved wins once there is a resolution


async def test_a_settle_before_the_deadline_wins(store: Store) -> None:
    await store.completion_open_wait(wait_row(deadline_at=100.0))
    _, verdict = await store.completion_settle("r", "s:0", {"ok": True}, now=99.5,
                                               respect_deadline=True)
    assert verdict == "won"


async def test_open_waits_lists_only_unresolved_waiting_rows(store: Store) -> None:
    await store.completion_open_wait(wait_row("b:0"))
    await store.completion_open_wait(wait_row("a:0", deadline_at=3.0))
    await store.completion_open_wait(wait_row("c:0"))
    await store.completion_open_wait(wait_row("x:0", run_id="other"))
    await store.completion_settle("r", "c:0", {"ok": True}, now=1.0, respect_deadline=True)
    await store.completion_settle("r", "never-waited:0", {"ok": True}, now=1.0,
                                  respect_deadline=True)
    rows = await store.completion_open_waits("r")
    assert sorted(row["step_key"] for row in rows) == ["a:0", "b:0"]
    assert all(row["waiting"] and row["resolution"] is None for row in rows)


async def test_a_won_settle_with_wake_at_makes_its_run_due_in_the_same_write(store: Store) -> None:
    """A delivered completion and the due mark of its run are one write: no crash can
    leave a run with a resolved key that no worker looks at."""
    for run_id, status in (("waiting-run", "waiting"), ("running-run", "running"),
                           ("queued-run", "queued")):
        await store.create_run(RunRecord(run_id, "src", None, {}, "h", status=status))
        await store.completion_open_wait(wait_row(run_id=run_id))
    assert await store.due_runs(100.0) == []
    _, verdict = await store.completion_settle("waiting-run", "s:0", {"ok": True, "value": 1},
                                               now=5.0, respect_deadline=True, wake_at=5.0)
    assert verdict == "won"
    assert await store.due_runs(100.0) == ["waiting-run"]
    # a running run keeps the wake time through its park (it may be parking on this key)
    await store.completion_settle("running-run", "s:0", {"ok": True, "value": 1}, now=6.0,
                                  respect_deadline=True, wake_at=6.0)
    assert (await store.get_run("running-run")).wake_at == 6.0
    # a queued run is claimable anyway: nothing to mark
    await store.completion_settle("queued-run", "s:0", {"ok": True, "value": 1}, now=6.0,
                                  respect_deadline=True, wake_at=6.0)
    assert (await store.get_run("queued-run")).wake_at is None
    # a settle that loses (already resolved) wakes nobody
    await store.create_run(RunRecord("late", "src", None, {}, "h", status="waiting"))
    await store.completion_settle("late", "s:0", {"ok": True, "value": 1}, now=7.0,
                                  respect_deadline=True)
    _, verdict = await store.completion_settle("late", "s:0", {"ok": True, "value": 2}, now=8.0,
                                               respect_deadline=True, wake_at=8.0)
    assert verdict == "already_resolved"
    assert (await store.get_run("late")).wake_at is None
