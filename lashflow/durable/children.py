"""Child runs: a ``start`` creates one, ``await`` joins it, and a settling child moves
its parent on. A child's id derives from its parent and the ``start`` step, so every
replay of the parent finds the same child."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from ..errors import RunBusy
from ..states import RunStatus
from ..store import RunRecord, Store
from ..tools.clock import Clock
from .canonical import digest
from .commands import Commands
from .driver import Driver
from .outcome import RunOutcome, Wait
from .reads import Reads


def child_wrapper(outcome: RunOutcome) -> Any:
    """What ``await`` on a child handle gives: a result wrapper, or ``None`` while the
    child has not settled."""
    if outcome.status is RunStatus.FINISHED:
        return {"ok": True, "value": outcome.result}
    if outcome.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        return {"ok": False, "error": outcome.error.message if outcome.error else "failed"}
    return None


class Children:
    """The ``Family`` the durable host and the driver are wired with."""

    def __init__(self, store: Store, clock: Clock, driver: Driver, reads: Reads,
                 commands: Commands) -> None:
        self.store = store
        self.clock = clock
        self.driver = driver
        self.reads = reads
        self.commands = commands

    def child_id(self, parent_run_id: str, step: str) -> str:
        return "run_" + hashlib.sha256(f"{parent_run_id}/{step}".encode()).hexdigest()[:24]

    async def create(self, parent: RunRecord, source_hash: str, child_id: str, process: str,
                     args: dict[str, Any], depth: int) -> None:
        now = self.clock.now()
        meta = {key: value for key, value in parent.meta.items() if key not in ("note", "trace")}
        meta["depth"] = depth
        telemetry = self.driver.telemetry
        if telemetry is not None and telemetry.tracing is not None:  # under the parent's drive
            meta["trace"] = telemetry.tracing.origin(process, child_id)
        await self.store.create_run(RunRecord(
            run_id=child_id, source_hash=source_hash, process=process, input=args,
            input_hash=digest({"process": process, "input": args}), status=RunStatus.QUEUED,
            parent_run_id=parent.run_id, created_at=now, updated_at=now, meta=meta))

    def spawn(self, child_id: str) -> None:
        if not self.driver.is_driving(child_id):
            self.driver.spawn(child_id)

    async def join_all(self, child_ids: list[str]) -> list[tuple[Any, list[Wait]]]:
        if not child_ids:
            return []
        async with self.driver.slot_lent():  # only waiting: the children may use the slot
            return list(await asyncio.gather(*(self._join(c) for c in child_ids)))

    async def _join(self, child_id: str) -> tuple[Any, list[Wait]]:
        try:
            outcome = await self.driver.join(child_id)
        except RunBusy:
            outcome = self.reads.outcome_of(await self.reads.require(child_id))
        waits = []
        for wait in outcome.waiting:
            if wait.child_run_id is None:
                wait.child_run_id = child_id
            waits.append(wait)
        return child_wrapper(outcome), waits

    async def cancel(self, run_id: str) -> None:
        await self.commands.cancel(run_id)

    async def signal(self, run_id: str, name: str, payload: Any, *, sender: str) -> None:
        await self.commands.signal(run_id, name, payload, sender=sender)

    async def wake_parent(self, parent_id: str) -> None:
        """Drive a parent waiting on the child that just settled, here and now. Its
        wake-up itself is already durable: it was in the child's settling commit
        (``Commit.wake``), so a worker finds it due even if this process dies first."""
        parent = await self.store.get_run(parent_id)
        if parent is None or self.driver.active(parent_id) is not None:
            return
        if parent.status == RunStatus.WAITING and any(w.get("kind") == "child" for w in parent.waiting):
            self.driver.follow_up(self.driver.spawn(parent_id))


__all__ = ["Children", "child_wrapper"]
