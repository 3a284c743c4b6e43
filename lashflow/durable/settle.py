"""Driving a run until it settles: through short sleeps and, when asked, through any wait.

``Engine.run``/``resume`` return as soon as a run parks. A caller that wants more (a
person at a terminal: a 2-second sleep should not end the command; ``--follow`` should
sit there until someone else signals or completes the run) asks ``Engine.settle``. It
drives the run and the child runs it waits on, deepest first, whenever one is due; a run
another live worker holds is left to it (``may_claim``, the one claim rule).

What it is doing is told through the engine's events (``type: "phase"``), for a live
display; nothing here formats text.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from ..errors import RunBusy
from ..states import STOPPED, RunStatus
from ..store import RunRecord
from ..store.leases import may_claim
from ..tools.clock import Clock
from ..slotted import replace
from .events import Events, PhaseEvent
from .outcome import RunOutcome, Wait

POLL = 0.25            # seconds between looks at the run row while following
FOLLOW_RESUME = 2.0    # a follower re-drives this often: resolutions stored without --resume


class Drives(Protocol):
    """What settling needs of the engine: its clock, owner id, events and three calls."""

    clock: Clock
    owner: str
    events: Events

    async def get(self, run_id: str) -> RunOutcome: ...

    async def get_record(self, run_id: str) -> RunRecord: ...

    async def resume(self, run_id: str) -> RunOutcome: ...


async def settle(engine: Drives, outcome: RunOutcome, max_wait: float,
                 follow: bool) -> RunOutcome:
    """Keep driving ``outcome``'s run, and the child runs it waits on, through sleeps
    ending within ``max_wait`` seconds and, with ``follow``, through any wait until it is
    resolved from elsewhere. A run left waiting lists every wait of its family."""
    run_id = outcome.run_id
    seen: float | None = None
    last_drive = time.monotonic()

    def phase(name: str, *, until: float | None = None, waits: list[Wait] | None = None,
              status: str | None = None) -> None:
        if not engine.events:
            return
        event: PhaseEvent = {"type": "phase", "run_id": run_id, "phase": name}
        if until is not None:
            event["until"] = until
        if waits is not None:
            event["waits"] = waits
        if status is not None:
            event["status"] = status
        engine.events.notify(event)

    while outcome.status in (RunStatus.WAITING, RunStatus.RUNNING):
        now = engine.clock.now()
        if outcome.status == RunStatus.WAITING:
            family = await _family(engine, outcome)
            due = await _due_members(engine, family)
            if due:
                phase("driving")
                for member in due:
                    driven = await _resume(engine, member)
                    if member == run_id:
                        outcome = driven
                if run_id not in due:
                    outcome = await engine.get(run_id)
                last_drive, seen = time.monotonic(), None
                continue
            waits = _family_waits(family)
            own = [w for w in waits if w.kind != "child"]
            sleeps = [w.until for w in own if w.kind in ("sleep", "rate") and w.until is not None]
            only_sleeps = bool(sleeps) and len(sleeps) == len(own)
            if only_sleeps and min(sleeps) - now <= max_wait:
                wake = min(sleeps)
                phase("sleeping", until=wake)
                await asyncio.sleep(max(0.0, wake - now))
                continue
            if not follow:
                return replace(outcome, waiting=waits)
            phase("following", waits=own)
        else:
            phase("elsewhere", status=outcome.status.value)
        await asyncio.sleep(POLL)
        record = await engine.get_record(run_id)
        if record.status in STOPPED:
            return await engine.get(run_id)
        changed = seen is not None and record.updated_at != seen
        seen = record.updated_at
        now = engine.clock.now()
        if record.status == RunStatus.RUNNING and not _claimable(engine, record, now):
            outcome = await engine.get(run_id)
            continue
        due_now = record.wake_at is not None and record.wake_at <= now
        if due_now or changed or record.status == RunStatus.QUEUED or \
                time.monotonic() - last_drive >= FOLLOW_RESUME:
            phase("driving")
            outcome = await _resume(engine, run_id)
            last_drive, seen = time.monotonic(), None
        else:
            outcome = await engine.get(run_id)
    return outcome


def _claimable(engine: Drives, record: RunRecord, now: float) -> bool:
    return may_claim(record.lease_owner, record.lease_expires or 0.0, engine.owner, now)


async def _resume(engine: Drives, run_id: str) -> RunOutcome:
    """Resume, tolerating another worker holding the run (then report what it shows)."""
    try:
        return await engine.resume(run_id)
    except RunBusy:
        return await engine.get(run_id)


async def _family(engine: Drives, root: RunOutcome) -> list[RunOutcome]:
    """The run and every run it waits on through child waits, transitively, each read
    fresh (a parent's record of its children's waits is as of when it parked)."""
    members = [root]
    seen = {root.run_id}
    index = 0
    while index < len(members):
        for wait in members[index].waiting:
            child = wait.child_run_id if wait.kind == "child" else None
            if child and child not in seen:
                seen.add(child)
                members.append(await engine.get(child))
        index += 1
    return members


def _family_waits(family: list[RunOutcome]) -> list[Wait]:
    """Every wait of every waiting member: the root's own and its child waits, then each
    descendant's own waits, tagged with the child run they belong to."""
    root, *descendants = family
    waits = [w for w in root.waiting if w.kind == "child" or not w.child_run_id]
    for member in descendants:
        for wait in member.waiting:
            if wait.kind != "child" and not wait.child_run_id:
                wait = replace(wait, child_run_id=member.run_id)
            if wait.kind != "child" or wait not in waits:
                waits.append(wait)
    return waits


async def _due_members(engine: Drives, family: list[RunOutcome]) -> list[str]:
    """Members to drive now, deepest first: queued, due (a timer ran out, something was
    delivered, a child settled) or, below the root, running under a lease this engine
    may claim (its own, an expired one, a dead owner's); never one another live worker
    holds."""
    now = engine.clock.now()
    due = []
    for member in reversed(family):
        if member.status not in (RunStatus.WAITING, RunStatus.RUNNING, RunStatus.QUEUED):
            continue
        record = await engine.get_record(member.run_id)
        if record.status == RunStatus.QUEUED:
            due.append(record.run_id)
        elif record.status == RunStatus.WAITING and record.wake_at is not None and record.wake_at <= now:
            due.append(record.run_id)
        elif record.status == RunStatus.RUNNING and member is not family[0] and \
                _claimable(engine, record, now):
            due.append(record.run_id)
    return due


__all__ = ["Drives", "settle"]
