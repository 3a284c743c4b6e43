"""Runs: idempotent create, listing, sources, cancel requests, due and orphaned runs."""

from __future__ import annotations

import subprocess
import sys
import socket
from typing import Any

from lashflow.store import Commit, RunChange, RunRecord, Store
from lashflow.store.leases import new_owner_id


def make_run(run_id: str, **fields: Any) -> RunRecord:
    fields.setdefault("source_hash", "src")
    fields.setdefault("process", "main")
    fields.setdefault("input", {"n": 1})
    fields.setdefault("input_hash", "in")
    return RunRecord(run_id=run_id, **fields)


def dead_owner() -> str:
    """An owner id of this host whose process has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:deadbeef"


async def test_create_run_round_trips_every_field(store: Store) -> None:
    run = make_run("r-1", input={"name": "Zoë", "items": [1, 2.5, None, {"b": 1, "a": 2}]},
                   status="waiting", result={"x": [1]}, error={"code": "boom", "message": "m"},
                   waiting=[{"kind": "key", "key": "k"}], parent_run_id="parent",
                   created_at=12.5, updated_at=13.25, lease_owner="someone", lease_expires=99.5,
                   generation=3, cancel_requested=True, wake_at=42.0, meta={"tools": ["a.py"]})
    stored, created = await store.create_run(run)
    assert created is True
    assert stored == run
    fetched = await store.get_run("r-1")
    assert fetched == run
    assert list(fetched.input["items"][3]) == ["b", "a"]  # key order survives


async def test_create_run_is_idempotent_and_returns_the_existing_row(store: Store) -> None:
    first, created = await store.create_run(make_run("r-1", input={"n": 1}, created_at=1.0))
    assert created
    again, created = await store.create_run(make_run("r-1", source_hash="other", input={"n": 2},
                                                     created_at=2.0))
    assert created is False
    assert again == first
    assert again.source_hash == "src" and again.input == {"n": 1}


async def test_get_run_of_an_unknown_id_is_none(store: Store) -> None:
    assert await store.get_run("nope") is None


async def test_list_runs_orders_filters_and_limits(store: Store) -> None:
    specs = [("b", 2.0, "queued"), ("a", 2.0, "running"), ("c", 1.0, "waiting"),
             ("Z", 3.0, "queued"), ("d", 0.5, "finished")]
    for run_id, created_at, status in specs:
        await store.create_run(make_run(run_id, created_at=created_at, status=status))
    assert [r.run_id for r in await store.list_runs()] == ["d", "c", "a", "b", "Z"]
    assert [r.run_id for r in await store.list_runs("queued")] == ["b", "Z"]
    assert [r.run_id for r in await store.list_runs(limit=2)] == ["d", "c"]
    assert [r.run_id for r in await store.list_runs("queued", limit=1)] == ["b"]
    assert await store.list_runs("cancelled") == []


async def test_run_ids_sort_by_code_point_on_ties(store: Store) -> None:
    for run_id in ["b", "B", "a", "A", "_", "é"]:
        await store.create_run(make_run(run_id, created_at=1.0))
    assert [r.run_id for r in await store.list_runs()] == sorted(["b", "B", "a", "A", "_", "é"])


async def test_sources_are_content_addressed_and_exact(backend: Any, store: Store) -> None:
    text = "process p() { finish 1 }\n// ünïcode ✓ and a NUL \x00 byte\n"
    await store.put_source("h1", text)
    await store.put_source("h1", "ignored: the hash is already stored")
    assert await store.get_source("h1") == text
    assert await store.get_source("missing") is None
    async with backend.make() as other:  # another process: first writer wins there too
        await other.put_source("h1", "ignored as well")
        assert await other.get_source("h1") == text
        await other.put_source("h2", "second")
    assert await store.get_source("h2") == "second"


async def test_request_cancel_sets_the_flag(store: Store) -> None:
    await store.create_run(make_run("r"))
    await store.request_cancel("r")
    await store.request_cancel("unknown")  # harmless
    run = await store.get_run("r")
    assert run is not None and run.cancel_requested is True


async def test_due_runs_are_waiting_runs_whose_timer_fell_due(store: Store) -> None:
    await store.create_run(make_run("late", status="waiting", wake_at=5.0))
    await store.create_run(make_run("early", status="waiting", wake_at=1.0))
    await store.create_run(make_run("exact", status="waiting", wake_at=10.0))
    await store.create_run(make_run("future", status="waiting", wake_at=10.5))
    await store.create_run(make_run("no-timer", status="waiting"))
    await store.create_run(make_run("running", status="running", wake_at=1.0))
    assert await store.due_runs(10.0) == ["early", "late", "exact"]
    assert await store.due_runs(10.0, limit=2) == ["early", "late"]
    assert await store.due_runs(0.5) == []
    # a commit that parks a run on a timer makes it due
    await store.commit(Commit("running", None, run=RunChange("waiting", wake_at=2.0)))
    assert await store.due_runs(3.0) == ["early", "running"]


async def test_orphaned_runs(store: Store) -> None:
    live = new_owner_id()  # this process: alive
    await store.create_run(make_run("queued-free", status="queued", created_at=1.0))
    await store.create_run(make_run("expired", status="running", created_at=2.0,
                                    lease_owner="elsewhere:1:x", lease_expires=50.0))
    await store.create_run(make_run("dead", status="running", created_at=3.0,
                                    lease_owner=dead_owner(), lease_expires=500.0))
    await store.create_run(make_run("alive", status="running", created_at=4.0,
                                    lease_owner=live, lease_expires=500.0))
    await store.create_run(make_run("remote", status="running", created_at=5.0,
                                    lease_owner="other-host:1:x", lease_expires=500.0))
    await store.create_run(make_run("parked", status="waiting", created_at=6.0))
    await store.create_run(make_run("done", status="finished", created_at=7.0,
                                    lease_owner="elsewhere:1:x", lease_expires=1.0))
    assert await store.orphaned_runs(100.0) == ["queued-free", "expired", "dead"]
    assert await store.orphaned_runs(1000.0) == ["queued-free", "expired", "dead", "alive", "remote"]


async def test_mark_due_makes_a_waiting_run_due_no_later_than_asked(store: Store) -> None:
    await store.create_run(make_run("parked", status="waiting"))
    await store.create_run(make_run("timer", status="waiting", wake_at=50.0))
    await store.create_run(make_run("sooner", status="waiting", wake_at=5.0))
    await store.create_run(make_run("busy", status="running"))
    for run_id in ("parked", "timer", "sooner", "busy", "unknown"):
        await store.mark_due(run_id, 10.0)
    assert await store.due_runs(10.0) == ["sooner", "parked", "timer"]
    assert (await store.get_run("sooner")).wake_at == 5.0  # type: ignore[union-attr]
    assert (await store.get_run("busy")).wake_at is None  # type: ignore[union-attr]


async def test_set_note_keeps_the_rest_of_meta(store: Store) -> None:
    await store.create_run(make_run("r", meta={"z": 1, "a": [2]}))
    await store.set_note("r", "worker w1 cannot run it: tool tools.x missing")
    run = await store.get_run("r")
    assert run is not None
    assert run.meta == {"z": 1, "a": [2], "note": "worker w1 cannot run it: tool tools.x missing"}
    assert list(run.meta) == ["z", "a", "note"]
    await store.set_note("r", None)
    assert (await store.get_run("r")).meta == {"z": 1, "a": [2]}  # type: ignore[union-attr]
    await store.set_note("unknown", "ignored")


async def test_claimable_lists_queued_orphaned_and_due_runs(store: Store) -> None:
    await store.create_run(make_run("queued", status="queued", created_at=1.0))
    await store.create_run(make_run("due", status="waiting", wake_at=5.0, created_at=2.0))
    await store.create_run(make_run("later", status="waiting", wake_at=50.0, created_at=3.0))
    await store.create_run(make_run("held", status="running", created_at=4.0,
                                    lease_owner=new_owner_id(), lease_expires=100.0))
    assert await store.claimable(10.0) == ["queued", "due"]
    assert await store.claimable(10.0, limit=1) == ["queued"]
