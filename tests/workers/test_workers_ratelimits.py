"""Tools' rate limits and global concurrency obeyed by real worker processes sharing one
database, on both backends (ADR 0036).

The rate tests count the slots the store handed out, as each call's tool saw them
(``call.context.rate_slot``), per one-second window: that bound is the limit's promise
and holds strictly, however loaded the machine. Each call's own start is checked to be
at or after its slot. A window of the tools' own start times can hold one call more
than the limit when a call starts a little late after its slot and the next one on
time: that is the machine's scheduling, not the limit, so it is printed, not asserted.
How close the long-run rate comes to the limit depends on the machine keeping up, so
it is measured by ``bench/bench_ratelimits.py``, not asserted here.
"""

from __future__ import annotations

import bisect
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from lashflow import Engine
from lashflow.store import open_store
from workers_support import Db, Fleet, Line, create_runs, read_log, wait_all, wait_for

RATED = Path(__file__).resolve().parent / "rated.lash"
WINDOW = 1.0 - 1e-5  # one second, less float rounding (epoch seconds: ~0.24 us a step)


def most_in_a_window(times: list[float]) -> int:
    """The most of ``times`` that one half-open window of one second holds."""
    ordered = sorted(times)
    return max(bisect.bisect_left(ordered, at + WINDOW) - index
               for index, at in enumerate(ordered))


def calls(log: Path, tag: str) -> list[Line]:
    return [line for line in read_log(log) if line.tag == tag]


def slot_of(line: Line) -> float:
    return float(line.extra.rpartition(",")[2])


def check_slots(lines: list[Line], limit: int, what: str) -> None:
    slots = [slot_of(line) for line in lines]
    assert most_in_a_window(slots) == limit, (what, most_in_a_window(slots))
    late = [line.at - slot_of(line) for line in lines]
    assert min(late) >= -2e-6, f"a call of {what} started before its slot"
    print(f"\n{what}: {len(lines)} calls; most starts in one second (the tools' clock) "
          f"{most_in_a_window([line.at for line in lines])}, slots {limit}; "
          f"start after slot: median {sorted(late)[len(late) // 2] * 1000:.1f} ms, "
          f"max {max(late) * 1000:.1f} ms")


async def test_a_rate_holds_across_workers(db: Db, fleet: Fleet, log: Path) -> None:
    """``@tool(rate="20/s")``, 40 runs of 2 calls in a row then a fan-out of 3 (200 calls,
    about 10 s at the limit) across workers: no second holds more than 20 slots, the
    limit was reached (20 in some second), most calls waited for their slot, every call
    ran once. The bucket is shared by construction, not by luck: a first worker takes the
    runs and drains out (SIGTERM) once it has made its first calls; two more finish them
    (on a loaded machine one worker started first could otherwise take every run)."""
    await create_runs(db.url, RATED, [{"calls": 2, "wide": 3}] * 40, "rate", "rated")
    first = fleet.start(concurrency=16, poll=0.5)
    await fleet.ready()

    async def first_calls_made() -> bool:
        return len(calls(log, "rated")) >= 5
    await wait_for(first_calls_made, fleet, 120, "the first worker's calls")
    os.kill(first.pid, signal.SIGTERM)  # a graceful drain: its calls under way end first
    assert first.wait(timeout=60) == 0
    for _ in range(2):
        fleet.start(concurrency=16, poll=0.5)
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 40, "finished", timeout=300, dead_ok=(first,))
        [bucket] = await store.rate_limits("tool:tools.rated")
    assert set(fleet.stop().values()) == {0}
    lines = calls(log, "rated")
    assert len(lines) == 200
    assert len({(line.run_id, line.step) for line in lines}) == 200
    # A worker that drains may have taken slots for calls it leaves to the others (the
    # bucket counts them: the rate errs on the safe side); at most its 16 runs' widest
    # batch of 3 calls each.
    assert 200 <= bucket.calls <= 200 + 16 * 3, bucket
    pids = Counter(line.pid for line in lines)
    assert first.pid in pids and len(pids) >= 2, pids
    check_slots(lines, 20, "rate 20/s")
    assert bucket.delayed >= 150, bucket  # the limit held calls back, not the workers


async def test_a_named_limit_is_shared_by_two_tools(db: Db, fleet: Fleet, log: Path) -> None:
    """``payments`` at 10/s, defined with the CLI's API; ``settle_payment`` and ``refund`` both
    take from it: their slots together never pass 10 a second."""
    async with Engine(db=db.url) as engine:
        await engine.rate_limits.set("payments", "10/s")
    await create_runs(db.url, RATED, [{"calls": 3}] * 10, "pay", "shared")
    for _ in range(2):
        fleet.start(concurrency=16, poll=0.5)
    await fleet.ready()
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 10, "finished", timeout=300)
    assert set(fleet.stop().values()) == {0}
    lines = calls(log, "payments")
    assert Counter(line.extra.partition(",")[0] for line in lines) == {"settle_payment": 30,
                                                                        "refund": 30}
    check_slots(lines, 10, "payments 10/s")


async def test_global_concurrency_holds_across_workers(db: Db, fleet: Fleet,
                                                       log: Path) -> None:
    """``global_concurrency=2``, 30 runs of a 100 ms call, 3 workers of 8 slots each: the
    tool, counting itself across processes, never saw more than 2 in flight, and saw 2."""
    await create_runs(db.url, RATED, [{"ms": 100, "gate": False}] * 30, "excl", "exclusive")
    for _ in range(3):
        fleet.start(concurrency=8, poll=0.2)
    await fleet.ready()
    async with open_store(db.url) as store:
        await wait_all(store, fleet, 30, "finished", timeout=300)
        assert await store.slots_held(0.0) == {}  # every slot was given back
    assert set(fleet.stop().values()) == {0}
    peak = int((log.parent / "held" / "exclusive").read_text().split()[1])
    assert peak == 2
    assert len(calls(log, "exclusive")) == 30


async def test_a_killed_workers_global_slots_come_back(
        db: Db, fleet: Fleet, log: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker holds both slots (its calls wait on a gate) and is SIGKILLed; it seems to
    run on another machine, so no worker can prove it dead by its pid. Runs submitted
    after the kill are taken by another worker at once, and everything finishes: the dead
    worker's slots came back, and the survivor still never had more than 2 in flight.
    On SQLite only the leases can free them, so no call starts before they ran out; on
    PostgreSQL the dead worker's session proves it gone sooner (ADR 0035)."""
    gate = tmp_path / "gate"
    monkeypatch.setenv("LASHFLOW_WORKERS_GATE", str(gate))
    await create_runs(db.url, RATED, [{"ms": 0, "gate": True}] * 2, "held", "exclusive")
    victim = fleet.start(concurrency=8, poll=0.1, lease_ttl=3.0, host="elsewhere.invalid")
    await fleet.ready()

    async def both_in() -> bool:
        return len(calls(log, "exclusive")) == 2
    await wait_for(both_in, fleet, 120, "the victim to hold both slots")
    fleet.kill(victim, signal.SIGKILL)
    (log.parent / "held" / "exclusive").write_text("0 0")  # the victim's two never leave
    gate.touch()
    async with open_store(db.url) as store:
        expiry = min(run.lease_expires for run in await store.list_runs()
                     if run.lease_owner is not None)
        await create_runs(db.url, RATED, [{"ms": 50, "gate": False}] * 6, "after",
                          "exclusive")
        fleet.start(concurrency=8, poll=0.1)
        await wait_all(store, fleet, 8, "finished", timeout=120, dead_ok=(victim,))
        assert await store.slots_held(0.0) == {}
    assert set(fleet.stop().values()) == {0}
    later = [line for line in calls(log, "exclusive") if line.pid != victim.pid]
    assert len({line.run_id for line in later}) == 8
    assert int((log.parent / "held" / "exclusive").read_text().split()[1]) == 2
    if db.name == "sqlite":
        assert min(line.at for line in later) > expiry  # none while its leases held them
