"""The worker loop: claim queued, due and orphaned runs and drive them, until stopped.

Claims go through the store's lease (SKIP LOCKED on PostgreSQL), so any number of
workers can share one database. On stop no new run is claimed and runs in flight stop
at their next effect boundary (attempts in flight finish and are journaled), then go
back to the queue with their lease released.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from ..errors import MissingTools, RunBusy, UnknownRun
from ..states import RunStatus
from ..store import Claimed, Store
from ..store.leases import may_claim
from ..tools.clock import Clock
from .driver import Driver
from .outcome import RunOutcome
from .ratelimits import due_at
from .reads import Reads
from .tool_runner import ToolRunner

if TYPE_CHECKING:
    from .schedules import Scheduler

log = logging.getLogger("lashflow.engine")
MAX_DUE = 10_000  # due times a worker remembers (beyond them it finds runs by its poll)


class Worker:
    def __init__(self, store: Store, clock: Clock, driver: Driver, tools: ToolRunner,
                 reads: Reads) -> None:
        self.store = store
        self.clock = clock
        self.driver = driver
        self.tools = tools
        self.reads = reads
        self.scheduler: Scheduler | None = None  # fires schedules' ticks beside the runs
        # when runs this worker parked come due (a heap): it looks again then, not a poll
        # later (a run parked for a rate slot comes due just before the slot)
        self._due: list[float] = []

    async def work(self, slots: int, *, stop: asyncio.Event, poll: float,
                   idle_exit: float | None, retry_skipped: float,
                   schedules: bool = True) -> int:
        """Drive runs until ``stop`` is set; returns how many drives were started.
        ``idle_exit``: return once nothing was claimable for that many seconds (tests)."""
        inflight: dict[str, asyncio.Task[Any]] = {}
        skipped: dict[str, float] = {}  # run -> when to try again (missing tools)
        driven = 0
        idle_since = time.monotonic()
        stopper = asyncio.ensure_future(stop.wait())
        waiter: asyncio.Future[None] | None = None
        firing = asyncio.ensure_future(self.scheduler.loop(stop)) \
            if schedules and self.scheduler is not None else None
        try:
            while not stop.is_set():
                free = slots - len(inflight)
                rate_wait: float | None = None
                if free > 0:
                    # Runs of queues come first: the new ones their queues' turn claims
                    # for this worker at once (ADR 0037), then those being resumed, in
                    # the order their queues rank them. Other workers list the same
                    # oldest unqueued runs: each takes a random few of a wider window,
                    # so they seldom race for the same claim.
                    now = self.clock.now()
                    later = {r for r, at in skipped.items() if at > time.monotonic()}
                    take = await self.store.take_queued(
                        now, free, self.driver.owner, self.driver.lease_ttl, skip=later)
                    for claimed in take.claimed:
                        run_id = claimed.run.run_id
                        inflight[run_id] = asyncio.ensure_future(
                            self._work_one(run_id, skipped, retry_skipped, claimed))
                        driven += 1
                    ready = [] if stop.is_set() else await self.store.claimable(
                        now, limit=4 * free + len(inflight))
                    if len(ready) > free:
                        random.shuffle(ready)
                    if take.allowed_at is not None:  # a rate: look again when it allows
                        rate_wait = max(0.0, take.allowed_at - self.clock.now())
                    for run_id in take.listed + ready:
                        if stop.is_set() or len(inflight) >= slots:
                            break  # stopped while listing: claim nothing more
                        if run_id in inflight or run_id in later:
                            continue
                        inflight[run_id] = asyncio.ensure_future(
                            self._work_one(run_id, skipped, retry_skipped))
                        driven += 1
                if inflight:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                    break
                timeout = poll if rate_wait is None else min(poll, rate_wait)
                if self._due:
                    timeout = min(timeout, max(0.0, self._due[0] - self.clock.now()))
                    while self._due and self._due[0] <= self.clock.now():
                        heapq.heappop(self._due)  # looked for once more right after this
                waiter = asyncio.ensure_future(self.store.wait_for_work(timeout))
                await asyncio.wait([waiter, stopper, *inflight.values()],
                                   return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                for run_id in [r for r, t in inflight.items() if t.done()]:
                    failure = inflight.pop(run_id).exception()
                    if failure is not None:
                        # One run's trouble (a locked database, a lost connection) must not
                        # stop the worker: say so, and try that run again a little later.
                        log.error("run %s: %s", run_id, getattr(failure, "message", failure))
                        skipped[run_id] = time.monotonic() + min(retry_skipped, 2.0)
        finally:
            # every task this loop made ends before it returns: a wait left pending would
            # outlive the store it waits on
            helpers = [t for t in (stopper, waiter, firing) if t is not None]
            for t in helpers:
                t.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self.driver.begin_drain()
            try:
                if inflight:
                    await asyncio.gather(*inflight.values(), return_exceptions=True)
            finally:
                self.driver.end_drain()
        return driven

    async def _work_one(self, run_id: str, skipped: dict[str, float], retry_after: float,
                        claimed: Claimed | None = None) -> None:
        try:
            if claimed is not None:  # claimed for us already: drive it
                self.tools.load_for_run(claimed.run)
                self._note_due(await self.driver.spawn(run_id, claimed=claimed))
                return
            run = await self.reads.require(run_id)
            now = self.clock.now()
            if run.status == RunStatus.WAITING and (run.wake_at is None or run.wake_at > now):
                return  # parked since it was listed (by the worker that held it): not due
            if not may_claim(run.lease_owner, run.lease_expires, self.driver.owner, now,
                             is_dead=self.store.owner_gone):
                return  # another worker took it since it was listed: no claim to lose
            self.tools.load_for_run(run)
            # through the driver's task registry: a run this process already drives (a
            # child it started, a parent it woke) is joined, never driven twice at once
            self._note_due(await self.driver.spawn(run_id))
        except MissingTools:
            skipped[run_id] = time.monotonic() + retry_after
        except (RunBusy, UnknownRun):
            pass

    def _note_due(self, outcome: RunOutcome) -> None:
        """Remember when a run this worker parked comes due on its own."""
        due = [at for wait in outcome.waiting if (at := due_at(wait)) is not None]
        if due and len(self._due) < MAX_DUE:
            heapq.heappush(self._due, min(due))


__all__ = ["Worker"]
