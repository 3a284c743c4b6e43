"""The claim rule, one table: ``may_claim`` decides it, and each store's claim (whose SQL
repeats the cheap part of the rule) and orphan search agree with it row for row."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from lashflow.store import RunRecord, Store
from lashflow.store.leases import may_claim, owner_is_dead

HOST = socket.gethostname()
ME = f"{HOST}:1:mine"
LIVE = f"{HOST}:{os.getpid()}:other"  # this very process: provably alive
REMOTE = "another-host.invalid:1:other"  # another machine's: never provably dead
DEAD = "dead"  # replaced by a real owner id whose process has exited


def dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process
    owner = f"{HOST}:{child.pid}:gone"
    assert owner_is_dead(owner)
    return owner


# holder, lease expires, claimant (None: anyone), steal from dead, may claim at now=10
TABLE: list[tuple[str | None, float, str | None, bool, bool]] = [
    (None, 0.0, ME, True, True),          # nobody holds it
    (ME, 100.0, ME, True, True),          # our own, still live
    (LIVE, 100.0, ME, True, False),       # another live worker's
    (LIVE, 9.5, ME, True, True),          # expired
    (LIVE, 10.0, ME, True, False),        # held through its last instant
    (DEAD, 100.0, ME, True, True),        # its holder died on this host
    (DEAD, 100.0, ME, False, False),      # ... unless told not to take it from the dead
    (REMOTE, 100.0, ME, True, False),     # another host's: cannot be proven dead
    (REMOTE, 9.0, ME, True, True),        # ... but its lease does expire
    (None, 0.0, None, True, True),        # orphaned: nobody holds it
    (LIVE, 100.0, None, True, False),     # held: not orphaned
    (LIVE, 9.0, None, True, True),        # expired: orphaned
    (DEAD, 100.0, None, True, True),      # dead holder: orphaned
]
NOW = 10.0


def _row(row: tuple[str | None, float, str | None, bool, bool],
         dead: str) -> tuple[str | None, float, str | None, bool, bool]:
    holder, expires, claimant, steal, expected = row
    return (dead if holder == DEAD else holder), expires, claimant, steal, expected


@pytest.mark.parametrize("row", TABLE)
def test_the_rule(row: tuple[str | None, float, str | None, bool, bool]) -> None:
    holder, expires, claimant, steal, expected = row
    asked: list[str] = []

    def is_dead(owner: str) -> bool:
        asked.append(owner)
        return owner == DEAD
    assert may_claim(holder, expires, claimant, NOW, steal_from_dead=steal,
                     is_dead=is_dead) is expected
    # the process table is read last, and only when nothing else decides
    decided = holder is None or holder == claimant or expires < NOW or not steal
    assert asked == ([] if decided else [holder])


async def test_each_store_claims_by_the_rule(store: Store) -> None:
    dead = dead_owner()
    rows = [_row(row, dead) for row in TABLE]
    for index, (holder, expires, claimant, steal, expected) in enumerate(rows):
        run_id = f"r{index}"
        await store.create_run(RunRecord(run_id, "src", None, {}, "h", status="queued",
                                         lease_owner=holder, lease_expires=expires,
                                         generation=3))
        assert may_claim(holder, expires, claimant, NOW, steal_from_dead=steal) is expected
        if claimant is None:  # "may anyone?" is the orphan search
            assert (run_id in await store.orphaned_runs(NOW)) is expected, rows[index]
            continue
        claimed = await store.claim_run(run_id, claimant, ttl=60, now=NOW, steal_from_dead=steal)
        assert (claimed is not None) is expected, rows[index]
        stored = await store.get_run(run_id)
        assert stored is not None
        if claimed is None:  # nothing written
            assert (stored.lease_owner, stored.lease_expires, stored.generation) == (
                holder, expires, 3)
            continue
        assert claimed.taken_from == holder
        assert claimed.run == stored
        assert (stored.lease_owner, stored.lease_expires, stored.generation) == (
            claimant, NOW + 60, 4)


async def test_a_settled_run_is_never_claimed(store: Store) -> None:
    for status in ("finished", "failed", "cancelled"):
        await store.create_run(RunRecord(status, "src", None, {}, "h", status=status))
        assert await store.claim_run(status, ME, ttl=60, now=NOW) is None
        stored: Any = await store.get_run(status)
        assert (stored.lease_owner, stored.generation) == (None, 0)
