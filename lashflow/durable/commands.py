"""What the outside world does to runs: resolve completion keys, signal, cancel.

Each first records what happened (so it survives any crash), then moves the run on:
here at once when asked to and when no other process drives it, else by marking it due
for whichever worker comes next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import MissingTools, RunBusy, RunSettled
from ..states import SETTLED, RunStatus
from ..store import RunRecord, Store
from ..tools.clock import Clock
from .driver import Driver
from .reads import Reads
from .tool_runner import ToolRunner


@dataclass(slots=True)
class Delivery:
    """A resolved completion key: the run it belongs to and its status after delivery."""

    run_id: str
    status: RunStatus


class Commands:
    def __init__(self, store: Store, clock: Clock, driver: Driver, tools: ToolRunner,
                 reads: Reads) -> None:
        self.store = store
        self.clock = clock
        self.driver = driver
        self.tools = tools
        self.reads = reads

    async def deliver(self, key: str, result: Any, *, resume: bool = True) -> Delivery:
        """Resolve a completion key (first writer wins) and, with ``resume``, drive the run
        on here; otherwise (or if another worker holds it) mark it due for the workers."""
        run_id = await self.tools.deliver_completion(key, result)
        return Delivery(run_id, await self._after_delivery(run_id, resume, lambda run: True))

    async def signal(self, run_id: str, name: str, payload: Any = None, *,
                     resume: bool = True) -> RunStatus:
        run = await self.reads.require(run_id)
        if run.status in SETTLED:
            raise RunSettled(f"run {run_id} is {run.status}; it takes no signals")
        await self.store.add_signal(run_id, name, payload)
        return await self._after_delivery(run_id, resume, lambda current: any(
            w.get("kind") == "signal" and w.get("signal") == name for w in current.waiting))

    async def cancel(self, run_id: str) -> RunStatus:
        run = await self.reads.require(run_id)
        if run.status in SETTLED:
            return RunStatus(run.status)
        await self.store.request_cancel(run_id)
        active = self.driver.active(run_id)
        if active is not None:  # driven here right now: it stops at its next effect
            active.flags.request_cancel()
            return RunStatus.RUNNING
        if run.status in ("waiting", "queued", "needs_attention"):
            # settle it now; a drive about to start here reads the request when it claims
            self.tools.load_for_run(run)
            try:
                return (await self.driver.join(run_id)).status
            except RunBusy:
                pass
        return RunStatus((await self.reads.require(run_id)).status)

    async def _after_delivery(self, run_id: str, resume: bool,
                              relevant: Callable[[RunRecord], bool]) -> RunStatus:
        run = await self.reads.require(run_id)
        if run.status == "running":  # maybe parking on it elsewhere right now: Store.wake
            await self.store.wake(run_id, self.clock.now())
            return RunStatus.RUNNING
        if run.status != "waiting" or not relevant(run):
            return RunStatus(run.status)
        if resume and self.driver.active(run_id) is None:
            self.tools.load_for_run(run)
            try:
                outcome = await self.driver.join(run_id)
                await self.driver.drain_follow_ups()
                return outcome.status
            except (RunBusy, MissingTools):
                pass
        await self.store.mark_due(run_id, self.clock.now())
        return RunStatus((await self.reads.require(run_id)).status)


__all__ = ["Commands", "Delivery"]
