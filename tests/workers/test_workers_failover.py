"""Failover without waiting for the lease: a worker SIGKILLed while it drives 100 runs,
each with its first step recorded and its second in flight. The lease is an hour long, so
a run that finishes was taken over because the worker was seen dead, not because its
lease ran out. On PostgreSQL the victim believes it runs on another host (no pid to
check): the server ends its session and frees its session lock, and the survivor sees
that (ADR 0035). On SQLite (one machine) the survivor sees its pid gone."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import asyncpg
import pytest

from lashflow.store import open_store
from lashflow.store.pg_wakeups import LOCK_CLASS
from workers_support import (
    GATED, Db, Fleet, check_journal, create_runs, executions, journals, read_log, scaled,
    wait_all, wait_for,
)

HOUR = 3600.0


async def test_a_killed_workers_runs_are_taken_over_before_its_lease_ends(
        db: Db, fleet: Fleet, log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = scaled("failover_runs", 100)
    gate = tmp_path / "gate"
    monkeypatch.setenv("LASHFLOW_WORKERS_GATE", str(gate))
    ids = await create_runs(db.url, GATED, [{"n": index} for index in range(count)], "fo")
    victim = fleet.start(concurrency=count, poll=0.2, lease_ttl=HOUR,
                         host="elsewhere.invalid" if db.name == "postgres" else None)

    async def all_in_flight() -> bool:  # every run: first step recorded, the gate entered
        return len({line.run_id for line in read_log(log) if line.tag == "gate"}) == count
    await wait_for(all_in_flight, fleet, 180, f"the victim to hold {count} runs at the gate")
    survivor = fleet.start(concurrency=count, poll=0.2, lease_ttl=HOUR)
    await fleet.ready()
    fleet.kill(victim, signal.SIGKILL)
    killed_at = time.time()
    gate.touch()
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=180, dead_ok=(victim,))
    assert set(fleet.stop().values()) == {0}

    runs, steps, attempts = await journals(db.url)
    calls = executions(read_log(log))
    resumed = []
    for index, run_id in enumerate(ids):
        assert (runs[run_id].status, runs[run_id].result) == ("finished", index + 3)
        first, second, third = check_journal(steps[run_id], attempts[run_id])
        # recorded before the kill: never again; in flight at the kill: once more, by the
        # survivor; after it: once, by the survivor
        assert [line.pid for line in calls[(run_id, first)]] == [victim.pid]
        assert [line.pid for line in calls[(run_id, second)]] == [victim.pid, survivor.pid]
        assert [line.pid for line in calls[(run_id, third)]] == [survivor.pid]
        resumed.append(calls[(run_id, second)][1].at)
    print(f"\n{db.name}: all {count} runs of a SIGKILLed worker resumed by another within "
          f"{max(resumed) - killed_at:.2f} s of the kill (lease: {HOUR:g} s)")


async def test_a_worker_cut_off_from_the_database_is_fenced(
        db: Db, fleet: Fleet, log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A network cut longer than the keepalive bound, simulated: the victim is paused
    (SIGSTOP) and the server ends its dedicated session, as it would once the probes go
    unanswered. Its runs move at once; when it comes back its writes are refused, and
    the step after the gate runs once."""
    if db.name != "postgres":
        return assert_sqlite_has_no_sessions(db)
    count = scaled("fenced_runs", 20)
    gate = tmp_path / "gate"
    monkeypatch.setenv("LASHFLOW_WORKERS_GATE", str(gate))
    ids = await create_runs(db.url, GATED, [{"n": index} for index in range(count)], "cut")
    victim = fleet.start(concurrency=count, poll=0.2, lease_ttl=HOUR, host="cut-off.invalid")

    async def all_in_flight() -> bool:
        return len({line.run_id for line in read_log(log) if line.tag == "gate"}) == count
    await wait_for(all_in_flight, fleet, 180, f"the victim to hold {count} runs at the gate")
    fleet.kill(victim, signal.SIGSTOP)
    admin = await asyncpg.connect(db.raw_url)
    try:
        owners = {row[0] for row in await admin.fetch("SELECT lease_owner FROM lashflow_runs")}
        assert len(owners) == 1, owners  # the victim holds them all
        # its session alone: other tests' workers share this server
        ended = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = "
            "'advisory' AND classid = $1::bigint::oid AND objid = hashtext($2)::oid "
            "AND objsubid = 2 AND granted", LOCK_CLASS, owners.pop())
    finally:
        await admin.close()
    assert ended >= 1
    survivor = fleet.start(concurrency=count, poll=0.2, lease_ttl=HOUR)
    await fleet.ready()

    async def all_taken() -> bool:
        return sum(line.tag == "gate" and line.pid == survivor.pid
                   for line in read_log(log)) == count
    await wait_for(all_taken, fleet, 180, "the survivor to take every run", dead_ok=(victim,))
    fleet.kill(victim, signal.SIGCONT)
    gate.touch()
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=180)

    async def victim_fenced() -> bool:  # its refused write may come after the last finish
        return "its lease moved to another worker" in fleet.output(victim)[1]
    await wait_for(victim_fenced, fleet, 180, "the victim to find its lease moved")
    err = fleet.output(victim)[1]
    assert set(fleet.stop().values()) == {0}
    runs, steps, attempts = await journals(db.url)
    calls = executions(read_log(log))
    for run_id in ids:
        assert runs[run_id].status == "finished"
        first, second, third = check_journal(steps[run_id], attempts[run_id])
        assert [line.pid for line in calls[(run_id, first)]] == [victim.pid]
        # the gate ended in both; only the survivor's outcome was recorded, and the
        # victim, fenced, went no further
        assert sorted(line.pid for line in calls[(run_id, second)]) == sorted(
            [victim.pid, survivor.pid])
        assert [line.pid for line in calls[(run_id, third)]] == [survivor.pid]
    assert "its lease moved to another worker" in err, err[-2000:]


def assert_sqlite_has_no_sessions(db: Db) -> None:
    """SQLite runs on one machine: owners are judged by pid, never by a session."""
    from lashflow.store.leases import holds_session, new_owner_id
    from lashflow.store.sqlite import SqliteStore
    assert not SqliteStore.holds_sessions
    assert not holds_session(new_owner_id(session=SqliteStore.holds_sessions))
