"""Driving runs: claim -> replay -> settle.

Driving a run means: take its lease, read its journal once, re-run the interpreter from
the start with the durable host (recorded effects replay, the first unrecorded one runs
for real) and write how it ended: settled, or parked on waits. One ``Driver`` drives many
runs at once in one event loop; each run is driven by at most one task here (``spawn``
and ``join`` go through one registry) and by at most one process anywhere (the lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
from shlex import quote
from typing import Any, AsyncIterator, Awaitable, Callable

from ..errors import (DbError, Fenced, JournalCorrupt, LashflowError, LimitExceeded, MissingTools,
                      RunBusy, RunPaused)
from ..interp import effects as fx
from ..interp.errors import LashRuntimeError
from ..interp.limits import Limits
from ..interp.values import to_json
from ..states import KEPT_PAUSED, SETTLED, RunStatus
from ..store import Claimed, Commit, RunChange, RunRecord, Store
from ..telemetry import Telemetry
from ..tools.clock import Clock
from .canonical import digest
from .cancels import CancelWatcher
from .pauses import paused_message
from .endings import (Drained, FailTurn, NeedsAttention, PausedOnExhausted, ReplayMismatch,
                      RunCancelled)
from .events import Events
from .heartbeat import LeaseKeeper
from .host import DurableHost
from .journal import DriveFlags, RunJournal
from .outcome import RunOutcome, Wait
from .ratelimits import due_at
from .ports import Family
from .programs import Compiled, Programs, source_digest
from .reads import Reads
from .replay import ReplayMachine, check_journal
from .tool_runner import ToolRunner
from ..slotted import Slotted

log = logging.getLogger("lashflow.engine")


DRAIN_GRACE = 10.0  # seconds a closing engine waits for drives to reach an effect boundary


class Drive(Slotted):
    """One drive of one run: the lease generation it holds and what it runs."""

    __slots__ = ("run", "generation", "compiled", "flags", "lease_lost")

    def __init__(
            self,
            run: RunRecord,
            generation: int,
            compiled: Compiled,
            flags: DriveFlags | None = None,
            lease_lost: bool = False,  # a renewal found the lease gone (``heartbeat``)
    ) -> None:
        self.run = run
        self.generation = generation
        self.compiled = compiled
        self.flags = DriveFlags() if flags is None else flags
        self.lease_lost = lease_lost


class Slot:
    """A drive's place among the ``concurrency`` drives of this process. A drive that
    only waits for its children lends its slot to them (else parents that fill every
    slot would wait forever for children that cannot start)."""

    __slots__ = ("_semaphore", "_held")

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self._semaphore = semaphore
        self._held = False

    async def __aenter__(self) -> "Slot":
        await self._semaphore.acquire()
        self._held = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        if self._held:
            self._held = False
            self._semaphore.release()

    @contextlib.asynccontextmanager
    async def lent(self) -> AsyncIterator[None]:
        """Give the slot up for the block, take one again after it (if cancelled while
        taking it back, the drive simply ends without one)."""
        self.release()
        try:
            yield
        finally:
            await self._semaphore.acquire()
            self._held = True


# The slot of the drive the current task runs (each drive is a task of its own).
_CURRENT_SLOT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar(
    "lashflow_drive_slot", default=None)


class Driver:
    def __init__(self, store: Store, clock: Clock, limits: Limits, programs: Programs,
                 tools: ToolRunner, reads: Reads, events: Events, *, owner: str,
                 lease_ttl: float, concurrency: int) -> None:
        self.store = store
        self.clock = clock
        self.limits = limits
        self.programs = programs
        self.tools = tools
        self.reads = reads
        self.events = events
        self.owner = owner
        self.lease_ttl = lease_ttl
        self.family: Family | None = None  # wired by the engine once both exist
        self.telemetry: Telemetry | None = None  # wired by the engine when it opens
        self._tasks: dict[str, asyncio.Task[RunOutcome]] = {}
        self._active: dict[str, Drive] = {}
        self._slots = asyncio.Semaphore(concurrency)
        self._draining = False  # a worker loop is stopping: drives starting now stop at once
        self._follow_ups: set[asyncio.Task[RunOutcome]] = set()
        self._cancels = CancelWatcher(store, self._active)
        self._leases = LeaseKeeper(store, self._active, owner, lambda: self.lease_ttl,
                                   clock.now)

    # -- the task registry ---------------------------------------------------------------
    def spawn(self, run_id: str, *, fresh: tuple[RunRecord, Compiled] | None = None,
              **options: Any) -> asyncio.Task[RunOutcome]:
        """The task driving ``run_id`` here: the running one, or a new one."""
        task = self._tasks.get(run_id)
        if task is None or task.done():
            loop = asyncio.get_running_loop()
            if fresh is not None:
                task = loop.create_task(self._drive_fresh(*fresh))
            else:
                task = loop.create_task(self._drive(run_id, **options))
            self._tasks[run_id] = task
            writer = self.store.register_writer()  # counts from now: see Store.register_writer
            task.add_done_callback(lambda done: self._forget(run_id, done, writer))
        return task

    def _forget(self, run_id: str, task: asyncio.Task[RunOutcome], writer: Any) -> None:
        """A settled or parked run keeps nothing in memory."""
        writer.release()
        if self._tasks.get(run_id) is task:
            del self._tasks[run_id]
        if not task.cancelled():
            task.exception()  # mark retrieved; callers that care awaited it already

    def is_driving(self, run_id: str) -> bool:
        task = self._tasks.get(run_id)
        return task is not None and not task.done()

    def active(self, run_id: str) -> Drive | None:
        """The drive of ``run_id`` under way in this process, if any."""
        return self._active.get(run_id)

    async def join(self, run_id: str, **options: Any) -> RunOutcome:
        """Wait for the drive under way here, or drive the run now (through the task
        registry either way: one run is never driven twice at once in one process)."""
        return await asyncio.shield(self.spawn(run_id, **options))

    @contextlib.asynccontextmanager
    async def slot_lent(self) -> AsyncIterator[None]:
        """While the current drive only waits for other runs, its slot is theirs."""
        slot = _CURRENT_SLOT.get()
        if slot is None:
            yield
            return
        async with slot.lent():
            yield

    def follow_up(self, task: asyncio.Task[RunOutcome]) -> None:
        """A drive started because of another (a parent woken by its child): callers
        that promise to return once things settled wait for it (``drain_follow_ups``)."""
        self._follow_ups.add(task)

    async def drain_follow_ups(self) -> None:
        """Wait for the follow-up drives (and theirs, transitively)."""
        while self._follow_ups:
            try:
                await self._follow_ups.pop()
            except RunBusy:
                pass

    async def close(self, grace: float = DRAIN_GRACE) -> None:
        """Stop every drive at its next effect boundary (it goes back to the queue, or
        stays parked), waiting up to ``grace`` seconds; cancel what is still running then
        (its lease dies with this process, and ``recover`` takes it over). A drive that
        starts meanwhile (a parent woken by a child that settled) is waited for too: it
        stops as it begins. Nothing this driver started is left running, so the store
        can close at once after it (a task left behind would hold a connection)."""
        self.begin_drain()
        try:
            async with asyncio.timeout(grace):
                while pending := self._pending():
                    await asyncio.wait(pending)
        except TimeoutError:
            pass
        while pending := self._pending():  # and what starts while those unwind
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._cancels.stop()
        await self._leases.stop()

    def _pending(self) -> list[asyncio.Task[RunOutcome]]:
        return [task for task in self._tasks.values() if not task.done()]

    # -- draining (a worker stopping) -------------------------------------------------------
    def begin_drain(self) -> None:
        """Runs in flight stop at their next effect; runs whose claim is still under way
        see the flag when their drive begins."""
        self._draining = True
        for drive in self._active.values():
            drive.flags.drain_requested = True

    def end_drain(self) -> None:
        self._draining = False

    # -- driving ---------------------------------------------------------------------------
    async def _drive(self, run_id: str, *, source: str | os.PathLike[str] | None = None,
                     retry_interrupted: bool = False, claimed: Claimed | None = None
                     ) -> RunOutcome:
        async with Slot(self._slots) as slot:
            _CURRENT_SLOT.set(slot)
            return await self._claim_and_drive(run_id, source, retry_interrupted, claimed)

    async def _drive_fresh(self, run: RunRecord, compiled: Compiled) -> RunOutcome:
        """A run this engine just created under its own lease: nothing to read first."""
        async with Slot(self._slots) as slot:
            _CURRENT_SLOT.set(slot)
            return await self._drive_claimed(Drive(run, run.generation, compiled), fresh=True)

    async def _claim_and_drive(self, run_id: str, source: Any, retry_interrupted: bool,
                               claimed: Claimed | None = None) -> RunOutcome:
        # the claim hands back the run as claimed: no read before or after it (a worker
        # hands over a run its queue's turn claimed already: ``Store.take_queued``)
        if claimed is None:
            claimed = await self.store.claim_run(run_id, self.owner, self.lease_ttl,
                                                 self.clock.now())
        if claimed is None:
            known = await self.reads.require(run_id)  # raises UnknownRun if there is none
            if known.status in SETTLED:
                return await self.reads.get(run_id)
            if known.status == RunStatus.PAUSED:
                raise RunPaused(paused_message(known))
            queue = known.meta.get("queue")
            if isinstance(queue, dict) and known.lease_owner is None:
                raise RunBusy(f"run {run_id} waits for its turn in queue {queue.get('name')!r} "
                              "(a worker starts it when the queue's limits allow)")
            raise RunBusy(f"run {run_id} is being driven by another worker")
        run, generation = claimed.run, claimed.run.generation
        if (self.telemetry is not None and self.telemetry.metrics is not None
                and claimed.taken_from not in (None, self.owner)):
            self.telemetry.metrics.add("lashflow_lease_takeovers_total")
        if run.status in SETTLED:
            await self._release(run, generation)
            return await self.reads.get(run_id)  # with its prints, as `get` gives them
        try:
            _check_input(run)
            if source is not None:
                text = self.tools.read_source(source).text
                compiled = self.programs.compile(text)
                if compiled.source_hash != run.source_hash:
                    await self.store.put_source(compiled.source_hash, text)
            else:
                compiled = await self._compile_stored(run, generation)
        except JournalCorrupt as exc:
            return await self._refuse_corrupt(run, generation, exc)
        if run.meta.get("note"):  # a worker that lacked the tools said so: this one has them
            await self.store.set_note(run_id, None)
        drive = Drive(run, generation, compiled, DriveFlags(
            cancel_requested=run.cancel_requested, retry_interrupted=retry_interrupted))
        return await self._drive_claimed(drive, fresh=False)

    async def _compile_stored(self, run: RunRecord, generation: int) -> Compiled:
        compiled = self.programs.cached(run.source_hash)
        if compiled is not None:  # compiled here from a text with exactly this digest
            return compiled
        text = await self.store.get_source(run.source_hash)
        if text is None:
            raise DbError(f"run {run.run_id}: its source is missing from the database")
        if source_digest(text) != run.source_hash:
            raise JournalCorrupt(f"run {run.run_id}: its stored source does not match its hash "
                                 "(edited in the database?); it is not run from it")
        try:
            return self.programs.compile(text)
        except LashflowError as exc:
            # It linked when it was created: what fails now is this worker's tool set.
            await self.store.set_note(run.run_id,
                                      f"worker {self.owner} cannot run it: {exc.message}")
            await self._release(run, generation)
            raise MissingTools(f"run {run.run_id} needs tools this worker lacks: "
                               f"{exc.message}") from None

    async def _drive_claimed(self, drive: Drive, *, fresh: bool) -> RunOutcome:
        run_id = drive.run.run_id
        drive.flags.drain_requested = self._draining
        self._active[run_id] = drive
        self._cancels.ensure_running()
        self._leases.ensure_running()
        if self.events.listeners:
            self.events.notify({"type": "drive", "run_id": run_id, "process": drive.run.process,
                                "resumed": drive.generation > 1})
        try:
            if self.telemetry is None:
                return await self._execute(drive, fresh=fresh)
            return await self._execute_reported(drive, fresh, self.telemetry)
        except Fenced:
            log.warning("run %s: its lease moved to another worker; this one stopped driving it",
                        run_id)
            return self.reads.outcome_of(await self.reads.require(run_id))
        finally:
            self._active.pop(run_id, None)

    async def _execute_reported(self, drive: Drive, fresh: bool,
                                telemetry: Telemetry) -> RunOutcome:
        """``_execute`` inside the drive's span, counted by how it ended."""
        run = drive.run
        tracing = telemetry.tracing
        if tracing is None:
            outcome = await self._execute(drive, fresh=fresh)
        else:
            with tracing.drive(run.run_id, run.process, drive.generation, run.meta.get("trace"),
                               drive.generation > 1) as span:
                outcome = await self._execute(drive, fresh=fresh)
                tracing.drive_ended(span, outcome.status.value,
                                    [(w.kind, w.step) for w in outcome.waiting],
                                    outcome.error.code if outcome.error else None)
        if telemetry.metrics is not None:
            telemetry.metrics.add("lashflow_drives_total", (("status", outcome.status.value),))
        return outcome

    async def _release(self, run: RunRecord, generation: int) -> None:
        await self.store.commit(Commit(run.run_id, generation, run=RunChange(
            run.status, run.result, run.error, run.waiting, run.wake_at, release_lease=True,
            updated_at=self.clock.now())))

    async def _execute(self, drive: Drive, *, fresh: bool) -> RunOutcome:
        execute = _interpreter()
        run = drive.run
        steps: list[Any] = []
        attempts: list[Any] = []
        try:
            if not fresh:  # a run created a moment ago under our lease has no journal yet
                steps, attempts = await self.store.load_journal(run.run_id)
                check_journal(run.run_id, steps)
        except JournalCorrupt as exc:
            if not drive.flags.cancel_requested:
                return await self._journal_corrupt(drive, exc)
            steps, attempts = [], []  # a cancel replays nothing
        machine = ReplayMachine(run.run_id, steps, attempts, run.meta.get("retries"))
        journal = RunJournal(self.store, machine, drive.generation, self.clock, self.events)
        assert self.family is not None
        host = DurableHost(run, drive.compiled.source_hash, journal, self.tools, self.family,
                           drive.flags, self.limits)
        if drive.flags.cancel_requested:
            return await self._settle_cancelled(drive, host)
        if run.status != RunStatus.RUNNING:
            await self.store.commit(Commit(run.run_id, drive.generation, run=RunChange(
                RunStatus.RUNNING, waiting=[], updated_at=self.clock.now())))
        compiled = drive.compiled
        child = run.parent_run_id is not None  # its input was a record of its parent's
        # the stored JSON as it is: the interpreter converts each argument it binds (so
        # converting here too walked the input twice); binding resources gets a copy
        args = run.input
        if run.process is not None:
            args = self.tools.bind_resources(compiled.module, run.process, dict(args))
        change: RunChange
        try:
            result = await execute(compiled.program, host, process=run.process, args=args,
                                   limits=self.limits, ordered_args=child)
            if result.status == RunStatus.FINISHED:
                change = RunChange(RunStatus.FINISHED, result=to_json(result.value))
            else:
                change = RunChange(RunStatus.FAILED, error=_failed_json(result.error, compiled))
        except fx.Parked as parked:
            waits = [w if isinstance(w, Wait) else Wait(**w) for w in parked.waits]
            # a timer or a completion deadline makes the run due again on its own
            due = [at for w in waits if (at := due_at(w)) is not None]
            change = RunChange(RunStatus.WAITING, waiting=[w.to_json() for w in waits],
                               wake_at=min(due) if due else None)
        except Drained:
            change = RunChange(RunStatus.QUEUED)
        except PausedOnExhausted as exc:  # who, when and why shown as any pause's
            info = {"by": "retry policy", "at": self.clock.now(), "reason": exc.message,
                    "step": exc.step, "was": RunStatus.RUNNING.value}
            await self.store.update_meta(run.run_id, lambda meta: meta.__setitem__("paused",
                                                                                   info))
            run.meta["paused"] = info
            change = RunChange(RunStatus.PAUSED, error={"code": exc.code, "message": exc.message})
        except RunCancelled:
            return await self._settle_cancelled(drive, host)
        except (ReplayMismatch, NeedsAttention) as exc:
            change = RunChange(RunStatus.NEEDS_ATTENTION, error={"code": exc.code, "message": exc.message})
        except FailTurn as exc:
            change = RunChange(RunStatus.FAILED, error={"code": exc.code, "message": exc.message})
        except LashRuntimeError as exc:
            change = RunChange(RunStatus.FAILED, error=_runtime_error_json(exc, compiled))
        except LimitExceeded as exc:
            change = RunChange(RunStatus.FAILED, error={"code": "limit_exceeded", "message": exc.message})
        except (Fenced, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug or an infrastructure fault, not the program's doing
            if isinstance(exc, DbError) and not isinstance(exc, JournalCorrupt):
                raise  # the store is failing: writing the failure would fail too
            log.exception("run %s stopped on an internal error", run.run_id)
            change = RunChange(RunStatus.NEEDS_ATTENTION, error={
                "code": "internal_error",
                "message": f"lashflow stopped this run on an internal error: "
                           f"{type(exc).__name__}: {exc}; the journal is intact, "
                           f"`lashflow resume {quote(run.run_id)}` retries"})
        if drive.flags.cancel_requested and change.status in (RunStatus.FINISHED, RunStatus.FAILED):
            # the cancel landed while an attempt was in flight: the call came back cancelled
            # and the program ended on it (e.g. through `?`); the run was cancelled.
            return await self._settle_cancelled(drive, host)
        return await self._settle(drive, host, change)

    async def _settle(self, drive: Drive, host: DurableHost, change: RunChange) -> RunOutcome:
        """Write how the drive ended, with the last batch's held outcomes, in one commit."""
        run = drive.run
        change.release_lease = True
        change.updated_at = self.clock.now()
        steps, attempts = host.machine.take_held()  # folded into the run's last write
        wake = run.parent_run_id if change.status in SETTLED else None  # see Commit.wake
        await self.store.commit(Commit(run.run_id, drive.generation, steps, attempts, run=change,
                                       wake=wake, wake_at=change.updated_at or 0.0))
        host.journal.notify_steps(steps)
        run.status, run.result, run.error, run.waiting = (change.status, change.result,
                                                          change.error, change.waiting)
        if drive.flags.pause_requested and change.status in KEPT_PAUSED:
            run.status = (await self.reads.require(run.run_id)).status  # paused, or not now
        outcome = self.reads.outcome_of(run, prints=host.prints.texts(run.run_id))
        if change.status in SETTLED and run.parent_run_id:
            assert self.family is not None
            await self.family.wake_parent(run.parent_run_id)
        if self.events.listeners:  # (the event is built only for a listener)
            self.events.notify({"type": "run", "run_id": run.run_id, "status": change.status,
                                "waiting": [(w.kind, w.step) for w in outcome.waiting],
                                "error": outcome.error.code if outcome.error else None})
        return outcome

    async def _journal_corrupt(self, drive: Drive, exc: JournalCorrupt) -> RunOutcome:
        return await self._refuse_corrupt(drive.run, drive.generation, exc)

    async def _refuse_corrupt(self, run: RunRecord, generation: int,
                              exc: JournalCorrupt) -> RunOutcome:
        """A journal row, the run's stored source or its input cannot be trusted: never
        replay from it; the run needs an operator."""
        change = RunChange(RunStatus.NEEDS_ATTENTION, error={"code": exc.code, "message": exc.message},
                           release_lease=True, updated_at=self.clock.now())
        await self.store.commit(Commit(run.run_id, generation, run=change))
        run.status, run.error, run.waiting = change.status, change.error, []
        self.events.notify({"type": "run", "run_id": run.run_id, "status": change.status,
                            "error": exc.code})
        return self.reads.outcome_of(run)

    async def _settle_cancelled(self, drive: Drive, host: DurableHost) -> RunOutcome:
        await host.journal.flush_held()
        steps, attempts = await self.tools.cancel_pending(host.journal)
        reason = drive.flags.cancel_reason
        if reason is None:  # a cancel from another process wrote its reason after our claim
            stored = await self.store.get_run(drive.run.run_id)
            reason = (stored or drive.run).meta.get("cancel_reason")
        message = "lashlang process was cancelled" + (f": {reason}" if reason else "")
        change = RunChange(RunStatus.CANCELLED, error={"code": "cancelled", "message": message},
                           release_lease=True, updated_at=self.clock.now())
        await self.store.commit(Commit(drive.run.run_id, drive.generation, steps, attempts,
                                       run=change, wake=drive.run.parent_run_id,
                                       wake_at=change.updated_at or 0.0))
        host.journal.notify_steps(steps)
        drive.run.status, drive.run.error, drive.run.waiting = change.status, change.error, []
        self.events.notify({"type": "run", "run_id": drive.run.run_id, "status": change.status,
                            "error": "cancelled"})
        if drive.run.parent_run_id:
            assert self.family is not None
            await self.family.wake_parent(drive.run.parent_run_id)
        return self.reads.outcome_of(drive.run, prints=host.prints.texts(drive.run.run_id))


@functools.cache
def _interpreter() -> Callable[..., Awaitable[fx.RunResult]]:
    """The interpreter's entry, imported with the first drive (the compiler brings it) and
    kept: an import statement in ``_execute`` cost 0.8 us a run."""
    from ..interp.vm import execute

    return execute


def _check_input(run: RunRecord) -> None:
    """The run's stored input is the one it was created with (its hash was taken then)."""
    if digest({"process": run.process, "input": run.input}) != run.input_hash:
        raise JournalCorrupt(f"run {run.run_id}: its stored input does not match its hash "
                             "(edited in the database?); it is not run with it")


def _error_json(error: Any) -> dict[str, Any]:
    if isinstance(error, dict):
        return error
    return {"code": getattr(error, "code", "process_failed"),
            "message": getattr(error, "message", str(error))}


def _failed_json(error: Any, compiled: Compiled) -> dict[str, Any]:
    """A ``fail``'s error, naming the statement's site (the graph marks it)."""
    from ..lang.sites import fail_site

    data = _error_json(error)
    span = getattr(error, "span", None)
    site = fail_site(compiled.module, span[0]) if span else None
    if site is not None:
        data["site"] = site
    return data


def _runtime_error_json(exc: LashRuntimeError, compiled: Compiled) -> dict[str, Any]:
    from ..errors import position_of

    data: dict[str, Any] = {"code": "runtime_error", "message": exc.message, "kind": exc.kind}
    span = getattr(exc, "span", None)
    if span is not None:
        start = span[0] if isinstance(span, tuple) else getattr(span, "start", 0)
        pos = position_of(compiled.module.source, start)
        data["line"], data["column"] = pos.line, pos.column
    return data


__all__ = ["Drive", "Driver"]
