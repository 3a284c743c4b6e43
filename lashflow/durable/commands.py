"""What the outside world does to runs: resolve completion keys, signal, cancel.

Each first records what happened (so it survives any crash), then moves the run on:
here at once when asked to and when no other process drives it, else by marking it due
for whichever worker comes next.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LashflowError, MissingTools, RunBusy, RunSettled
from ..json_kinds import check_json_text
from ..lang.names import did_you_mean
from ..states import SETTLED, RunStatus
from ..store import RunRecord, Store
from ..tools.clock import Clock
from ..tools.completion import CompletionAlreadyResolved, Resolution, ResolutionSource
from .driver import Driver
from .programs import Programs, signal_names
from .reads import Reads
from .tool_runner import ToolRunner
from ..slotted import Slotted


class Delivery(Slotted):
    """A resolved completion key: the run it belongs to and its status after delivery.
    ``duplicate``: the very same answer was recorded before (a sender's retry), so this
    one changed nothing; a different answer is refused (``completion_already_resolved``)."""

    __slots__ = ("run_id", "status", "duplicate")

    def __init__(self, run_id: str, status: RunStatus, duplicate: bool = False) -> None:
        self.run_id = run_id
        self.status = status
        self.duplicate = duplicate


def same_answer(winner: Resolution | None, result: Any) -> bool:
    """Whether the recorded resolution came from a resolver with the very same answer."""
    if winner is None or winner.source is not ResolutionSource.RESOLVER:
        return False
    again = Resolution.from_result(result, at=winner.at)
    return (winner.kind, winner.value, winner.code, winner.message) == (
        again.kind, again.value, again.code, again.message)


class Commands:
    def __init__(self, store: Store, clock: Clock, driver: Driver, tools: ToolRunner,
                 reads: Reads, programs: Programs) -> None:
        self.store = store
        self.programs = programs
        self.clock = clock
        self.driver = driver
        self.tools = tools
        self.reads = reads

    async def deliver(self, key: str, result: Any, *, resume: bool = True,
                      background: bool = False) -> Delivery:
        """Resolve a completion key (first writer wins) and, with ``resume``, drive the run
        on here (in the background with ``background``). The write that resolves the key
        also marks the run due, so a worker takes it if this process does not."""
        check_json_text(getattr(result, "value", result))  # before anything is written
        try:
            run_id = await self.tools.deliver_completion(key, result)
        except CompletionAlreadyResolved as exc:
            if not same_answer(exc.winner, result):
                raise
            run_id = self.tools.run_of(key)
            return Delivery(run_id, await self._after_delivery(
                run_id, resume, lambda run: True, woken=True, background=background), True)
        return Delivery(run_id, await self._after_delivery(
            run_id, resume, lambda run: True, woken=True, background=background))

    async def signal(self, run_id: str, name: str, payload: Any = None, *,
                     resume: bool = True, sender: str | None = None) -> RunStatus:
        check_json_text(payload)  # before anything is written
        run = await self.reads.require(run_id)
        if run.status in SETTLED:
            raise RunSettled(f"run {run_id} is {run.status}; it takes no signals")
        declared = await self._declared_signals(run)
        if name not in declared:
            names = ", ".join(f"`{n}`" for n in declared) or "none"
            raise LashflowError(f"run {run_id} ({run.process or 'main block'}) takes no "
                                f"signal `{name}`; its signals: {names}", code="unknown_signal",
                                hint=did_you_mean(name, declared))
        await self.store.add_signal(run_id, name, payload, sender=sender)
        return await self._after_delivery(run_id, resume, lambda current: any(
            w.get("kind") == "signal" and w.get("signal") == name for w in current.waiting))

    async def _declared_signals(self, run: RunRecord) -> list[str]:
        """The signal names the run's process declares or waits for."""
        text = await self.store.get_source(run.source_hash)
        if text is None or run.process is None:
            return []
        decl = self.programs.parse(text).process(run.process)
        return signal_names(decl) if decl is not None else []

    async def cancel(self, run_id: str, reason: str | None = None) -> RunStatus:
        """Cancel a run (``reason`` is kept on it and shown); a settled run is left as it
        is and its status returned."""
        run = await self.reads.require(run_id)
        if run.status in SETTLED:
            return RunStatus(run.status)
        if reason:
            await self.store.update_meta(run_id,
                                         lambda meta: meta.__setitem__("cancel_reason", reason))
        await self.store.request_cancel(run_id)
        if run.status == RunStatus.PAUSED:  # the cancel must be settled by a drive: queue it
            await self.store.unpause_runs([run_id], self.clock.now())
            run.status = RunStatus.QUEUED
        active = self.driver.active(run_id)
        if active is not None:  # driven here right now: it stops at its next effect
            active.flags.cancel_reason = reason
            active.flags.request_cancel()
            return RunStatus.RUNNING
        if run.status in (RunStatus.WAITING, RunStatus.QUEUED, RunStatus.NEEDS_ATTENTION):
            # settle it now; a drive about to start here reads the request when it claims
            self.tools.load_for_run(run)
            try:
                return (await self.driver.join(run_id)).status
            except RunBusy:
                pass
        return (await self.reads.require(run_id)).status

    async def _after_delivery(self, run_id: str, resume: bool,
                              relevant: Callable[[RunRecord], bool], *,
                              woken: bool = False, background: bool = False) -> RunStatus:
        """Drive the run on here (``resume``; started in the background and answered at
        once with ``background``) or leave it due for the workers. ``woken``: the
        delivery's own write already marked the run due (a completion does)."""
        run = await self.reads.require(run_id)
        if run.status == RunStatus.RUNNING:  # maybe parking on it elsewhere right now: Store.wake
            if not woken:
                await self.store.wake(run_id, self.clock.now())
            return RunStatus.RUNNING
        if run.status != RunStatus.WAITING or not relevant(run):
            return run.status
        if not resume or self.driver.active(run_id) is not None:
            if not woken:
                await self.store.mark_due(run_id, self.clock.now())
            return run.status
        self.tools.load_for_run(run)
        if background:  # a run another worker holds makes this drive end at its claim
            self.driver.spawn(run_id)
            return RunStatus(run.status)
        try:
            outcome = await self.driver.join(run_id)
            await self.driver.drain_follow_ups()
            return outcome.status
        except (RunBusy, MissingTools):
            pass
        if not woken:
            await self.store.mark_due(run_id, self.clock.now())
        return (await self.reads.require(run_id)).status


__all__ = ["Commands", "Delivery", "same_answer"]
