"""The ``Engine``: the public Python API that starts, drives, resumes and inspects runs.

One engine drives many runs at once in one event loop. Driving a run means: take its
lease, read its journal once, re-run the interpreter from the start with the durable host
(recorded effects replay, the first unrecorded one runs for real) and write how it ended:
settled, or parked on waits.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import LashflowError, LimitExceeded, RunConflict, UnknownRun, UsageError
from ..store import Commit, Fenced, RunChange, RunRecord, open_store
from ..store.base import JournalCorrupt
from ..store.leases import new_owner_id, owner_is_dead
from ..interp import effects as fx
from .canonical import digest
from .host import (
    DurableHost, Drained, FailTurn, NeedsAttention, ReplayMismatch, RunCancelled, check_journal,
)
from ..interp.errors import LashRuntimeError
from .outcome import SETTLED, AttemptView, RunError, RunOutcome, RunStatus, StepView, Wait
from ..interp.values import from_json, to_json

log = logging.getLogger("lashflow.engine")

LEASE_TTL = 30.0
CANCEL_POLL = 0.5  # seconds between checks for cancels requested by other processes


@dataclass(slots=True)
class _Compiled:
    module: Any
    program: Any
    source_hash: str


@dataclass(slots=True)
class _RunContext:
    run: RunRecord
    generation: int
    compiled: _Compiled
    cancel_requested: bool = False
    retry_interrupted: bool = False
    drain_requested: bool = False
    host: Any = None

    def request_cancel(self) -> None:
        """Stop at the next effect; in-flight attempts get their grace, then are cancelled."""
        self.cancel_requested = True
        if self.host is not None:
            self.host.cancel_event.set()


@dataclass(slots=True)
class RunHandle:
    run_id: str
    task: asyncio.Task[RunOutcome] | None = field(default=None, repr=False)

    async def result(self) -> RunOutcome:
        if self.task is None:
            raise UsageError("this handle has no run being driven")
        return await self.task


def source_digest(source: str) -> str:
    return "sha256:" + hashlib.sha256(source.encode()).hexdigest()


class _SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class Engine:
    """``async with Engine(db=...) as engine: outcome = await engine.run("flow.lash")``."""

    def __init__(self, db: str | None = None, tools: Iterable[Any] = (), modules: Iterable[str] = (),
                 plugins: Any = None, retry: Any = None, model_provider: Any = None,
                 clock: Any = None, *, concurrency: int = 64, limits: Any = None,
                 lease_ttl: float = LEASE_TTL) -> None:
        self.db = db
        self._initial_tools = list(tools)
        self._initial_modules = [str(m) for m in modules]
        self.plugins = plugins
        self.default_retry = retry
        self.model_provider = model_provider
        self.clock = clock or _SystemClock()
        self.concurrency = concurrency
        from ..interp.limits import Limits

        self.limits: Limits = limits or Limits()  # SPEC 8: every run of this engine
        self.lease_ttl = lease_ttl
        self.owner = new_owner_id()
        self.store = open_store(db)
        self._compiled: dict[str, _Compiled] = {}
        self._tasks: dict[str, asyncio.Task[RunOutcome]] = {}
        self._active: dict[str, _RunContext] = {}
        self._draining = False  # a worker loop is stopping: runs starting now stop at once
        self._wakeups: set[asyncio.Task[RunOutcome]] = set()
        self._cancel_watch: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(concurrency)
        self._loaded_modules: set[str] = set()
        self._opened = False
        self.listeners: list[Any] = []

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> "Engine":
        from .tool_runner import ToolRunner

        await self.store.open()
        self._opened = True
        self.tool_runner = ToolRunner(self)
        for item in self._initial_tools:
            self.tool_runner.add_tool(item)
        for module in self._initial_modules:
            self.load_tools(module)
        self.tool_runner.validate_plugins(self.plugins)
        await self.tool_runner.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._cancel_watch is not None:
            self._cancel_watch.cancel()
        tasks = [t for t in self._tasks.values() if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.store.close()
        self._opened = False

    def notify(self, event: dict[str, Any]) -> None:
        """Progress events for live displays: ``{"type": "tools" | "step" | "run", ...}``.

        ``tools``: calls now in flight (``tools``: names); ``step``: a step recorded
        (``step``, ``kind``, ``tool``, ``status``); ``run``: the drive ended (``status``).
        Listeners must be quick; they run on the engine's loop.
        """
        for listener in self.listeners:
            listener(event)

    def load_tools(self, module_or_path: str) -> None:
        """Import a tool module (name or ``.py`` path) once and register its tools."""
        key = str(Path(module_or_path).resolve()) if module_or_path.endswith(".py") else module_or_path
        if key in self._loaded_modules:
            return
        self.tool_runner.load_module(key)
        self._loaded_modules.add(key)

    # -- compiling ---------------------------------------------------------------------
    def compile(self, source: str) -> _Compiled:
        """Parse, link against the registered tools and compile; cached per source text."""
        source_hash = source_digest(source)
        compiled = self._compiled.get(source_hash)
        if compiled is None:
            from ..lang import link, parse
            from ..interp.compiler import compile_module

            module = link(parse(source), self.tool_runner.catalog())
            compiled = _Compiled(module, compile_module(module, self.tool_runner.catalog()),
                                 source_hash)
            self._compiled[source_hash] = compiled
        return compiled

    def _read_source(self, source_or_path: str | os.PathLike[str]) -> tuple[str, str | None]:
        if isinstance(source_or_path, os.PathLike) or (
                isinstance(source_or_path, str) and source_or_path.endswith(".lash")
                and "\n" not in source_or_path):
            path = Path(source_or_path)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise UsageError(f"no such file: {path}", code="file_not_found") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"cannot read {path}: {exc}") from None
            beside = path.with_suffix(".py")
            if beside.exists():
                self.load_tools(str(beside))
            return text, str(path)
        return str(source_or_path), None

    @staticmethod
    def _entry(module: Any, process: str | None) -> Any:
        if process is not None:
            decl = module.process(process)
            if decl is None:
                names = ", ".join(p.name for p in module.processes) or "none"
                raise UsageError(f"no process `{process}` in this file (processes: {names})")
            return decl
        if module.main:
            return None
        if len(module.processes) == 1:
            return module.processes[0]
        if not module.processes:
            raise UsageError("the file has no main block and no process to run")
        names = ", ".join(p.name for p in module.processes)
        raise UsageError(f"the file has several processes ({names}); choose one with --process")

    # -- starting ---------------------------------------------------------------------------
    async def create(self, source_or_path: str | os.PathLike[str], process: str | None = None,
                     input: Any = None, run_id: str | None = None) -> RunRecord:
        """Validate and store a new run (status ``queued``) without driving it."""
        run, _, _ = await self._create(source_or_path, process, input, run_id, claim=False)
        return run

    async def _create(self, source_or_path: str | os.PathLike[str], process: str | None,
                      input: Any, run_id: str | None, *,
                      claim: bool) -> tuple[RunRecord, "_Compiled", bool]:
        """Store a new run; returns (run as stored, compiled, created by this call).

        With ``claim`` a new run is stored already ``running`` under this engine's lease
        (generation 1), in the same transaction: the caller drives it at once with no
        claim, no re-read and no journal load (it has none). An existing run is returned
        as stored, for the caller to join or drive the usual way."""
        from ..interp.inputs import check_input

        text, path = self._read_source(source_or_path)
        compiled = self.compile(text)
        decl = self._entry(compiled.module, process)
        data = {} if input is None else input
        check_input(compiled.module, decl, data, self.tool_runner.resource_types())
        process_name = decl.name if decl is not None else None
        input_hash = digest({"process": process_name, "input": data})
        now = self.clock.now()
        run = RunRecord(
            run_id=run_id or f"run_{os.urandom(8).hex()}", source_hash=compiled.source_hash,
            process=process_name, input=data, input_hash=input_hash, status="queued",
            created_at=now, updated_at=now,
            meta={"file": path, "tool_modules": sorted(self._loaded_modules)})
        if claim:
            run.status, run.generation = "running", 1
            run.lease_owner, run.lease_expires = self.owner, now + self.lease_ttl
        with self.store.writing():
            await self.store.put_source(compiled.source_hash, text)
            stored, created = await self.store.create_run(run)
        if not created and (stored.source_hash != run.source_hash or stored.input_hash != input_hash):
            raise RunConflict(f"run {run.run_id} already exists with a different "
                              f"{'source' if stored.source_hash != run.source_hash else 'input'}")
        return (run if created else stored), compiled, created

    async def start(self, source_or_path: str | os.PathLike[str], process: str | None = None,
                    input: Any = None, run_id: str | None = None) -> RunHandle:
        run, compiled, created = await self._create(source_or_path, process, input, run_id,
                                                    claim=True)
        if created:
            return RunHandle(run.run_id, self._spawn(run.run_id, fresh=(run, compiled)))
        return RunHandle(run.run_id, self._spawn(run.run_id))

    async def run(self, source_or_path: str | os.PathLike[str], process: str | None = None,
                  input: Any = None, run_id: str | None = None) -> RunOutcome:
        run, compiled, created = await self._create(source_or_path, process, input, run_id,
                                                    claim=True)
        if created:
            return await self._spawn(run.run_id, fresh=(run, compiled))
        return await self._join(run.run_id)

    def _spawn(self, run_id: str, *, fresh: tuple[RunRecord, "_Compiled"] | None = None,
               **options: Any) -> asyncio.Task[RunOutcome]:
        task = self._tasks.get(run_id)
        if task is None or task.done():
            loop = asyncio.get_running_loop()
            if fresh is not None:
                task = loop.create_task(self._drive_fresh(*fresh))
            else:
                task = loop.create_task(self.drive(run_id, **options))
            writer = self.store.register_writer()  # counts from now: see Store.register_writer
            task.add_done_callback(lambda _: writer.release())
            self._tasks[run_id] = task
            task.add_done_callback(lambda done: self._forget(run_id, done))
        return task

    def _forget(self, run_id: str, task: asyncio.Task[RunOutcome]) -> None:
        """A settled or parked run keeps nothing in memory."""
        if self._tasks.get(run_id) is task:
            del self._tasks[run_id]
        if not task.cancelled():
            task.exception()  # mark retrieved; callers that care awaited it already

    async def _join(self, run_id: str, **options: Any) -> RunOutcome:
        task = self._tasks.get(run_id)
        if task is not None and not task.done():
            return await asyncio.shield(task)
        return await self.drive(run_id, **options)

    # -- driving ---------------------------------------------------------------------------
    async def resume(self, run_id: str, source: str | os.PathLike[str] | None = None, *,
                     retry_interrupted: bool = False) -> RunOutcome:
        run = await self._require(run_id)
        if run.status in SETTLED:
            return await self.get(run_id)
        self._load_run_tools(run)
        outcome = await self._join(run_id, source=source, retry_interrupted=retry_interrupted)
        await self._drain_wakeups()
        return outcome

    async def recover(self) -> list[RunOutcome]:
        """Drive every run whose owner is gone, and every waiting run whose timer is due."""
        now = self.clock.now()
        run_ids = await self.store.orphaned_runs(now)
        run_ids += [r for r in await self.store.due_runs(now, limit=10_000) if r not in run_ids]
        outcomes = []
        for run_id in run_ids:
            run = await self.store.get_run(run_id)
            if run is not None:
                self._load_run_tools(run)
        for outcome in await asyncio.gather(*(self._join(r) for r in run_ids)):
            outcomes.append(outcome)
        return outcomes

    def _load_run_tools(self, run: RunRecord) -> None:
        """Import the tool modules the run was started with, where this machine has them
        (a worker elsewhere brings its own with ``--tools``)."""
        for module in run.meta.get("tool_modules", []):
            if module in self._loaded_modules or (module.endswith(".py")
                                                  and not os.path.exists(module)):
                continue
            try:
                self.load_tools(module)
            except LashflowError:
                continue  # reported as missing tools when the run is driven

    async def _require(self, run_id: str) -> RunRecord:
        run = await self.store.get_run(run_id)
        if run is None:
            raise UnknownRun(f"no run with id {run_id!r}")
        return run

    async def drive(self, run_id: str, *, source: str | os.PathLike[str] | None = None,
                    retry_interrupted: bool = False) -> RunOutcome:
        async with self._slots:
            return await self._drive(run_id, source, retry_interrupted)

    async def _drive(self, run_id: str, source: Any, retry_interrupted: bool) -> RunOutcome:
        run = await self._require(run_id)
        if run.status in SETTLED:
            return self._outcome(run)
        generation = await self.store.claim(run_id, self.owner, self.lease_ttl, self.clock.now())
        if generation is None:
            raise LashflowError(f"run {run_id} is being driven by another worker",
                                code="run_busy")
        run = await self._require(run_id)
        if run.status in SETTLED:
            await self._release(run, generation)
            return self._outcome(run)
        if source is not None:
            text, _ = self._read_source(source)
            compiled = self.compile(text)
            if compiled.source_hash != run.source_hash:
                await self.store.put_source(compiled.source_hash, text)
        else:
            text = await self.store.get_source(run.source_hash)
            if text is None:
                raise LashflowError(f"run {run_id}: its source is missing from the database",
                                    code="db_error")
            try:
                compiled = self.compile(text)
            except LashflowError as exc:
                # It linked when it was created: what fails now is this worker's tool set.
                await self.store.set_note(run_id, f"worker {self.owner} cannot run it: {exc.message}")
                await self._release(run, generation)
                raise LashflowError(f"run {run_id} needs tools this worker lacks: {exc.message}",
                                    code="missing_tools") from None
        if run.meta.get("note"):  # a worker that lacked the tools said so: this one has them
            await self.store.set_note(run_id, None)
        ctx = _RunContext(run, generation, compiled, cancel_requested=run.cancel_requested,
                          retry_interrupted=retry_interrupted)
        return await self._drive_claimed(ctx, fresh=False)

    async def _drive_fresh(self, run: RunRecord, compiled: "_Compiled") -> RunOutcome:
        """A run this engine just created under its own lease: nothing to read first."""
        async with self._slots:
            return await self._drive_claimed(_RunContext(run, run.generation, compiled),
                                             fresh=True)

    async def _drive_claimed(self, ctx: "_RunContext", *, fresh: bool) -> RunOutcome:
        run_id = ctx.run.run_id
        ctx.drain_requested = self._draining
        self._active[run_id] = ctx
        self._ensure_cancel_watch()
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(ctx))
        try:
            return await self._execute(ctx, fresh=fresh)
        except Fenced:
            log.warning("run %s: its lease moved to another worker; this one stopped driving it",
                        run_id)
            return self._outcome(await self._require(run_id))
        finally:
            heartbeat.cancel()
            self._active.pop(run_id, None)

    def _ensure_cancel_watch(self) -> None:
        if self._cancel_watch is None or self._cancel_watch.done():
            self._cancel_watch = asyncio.get_running_loop().create_task(self._watch_cancels())

    async def _watch_cancels(self) -> None:
        """Cancels requested from other processes reach the runs this engine drives."""
        while self._active:
            await asyncio.sleep(CANCEL_POLL)
            if not self._active:
                return
            try:
                running = await self.store.list_runs("running")
            except LashflowError:
                continue
            for run in running:
                ctx = self._active.get(run.run_id)
                if ctx is not None and run.cancel_requested and not ctx.cancel_requested:
                    ctx.request_cancel()

    async def _heartbeat(self, ctx: _RunContext) -> None:
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            ok = await self.store.renew(ctx.run.run_id, self.owner, ctx.generation, self.lease_ttl,
                                        self.clock.now())
            if not ok:
                return

    async def _release(self, run: RunRecord, generation: int) -> None:
        await self.store.commit(Commit(run.run_id, generation, run=RunChange(
            run.status, run.result, run.error, run.waiting, run.wake_at, release_lease=True,
            updated_at=self.clock.now())))

    async def _execute(self, ctx: _RunContext, *, fresh: bool = False) -> RunOutcome:
        from ..interp.vm import execute

        run = ctx.run
        steps: list[Any] = []
        attempts: list[Any] = []
        try:
            if not fresh:  # a run created a moment ago under our lease has no journal yet
                steps, attempts = await self.store.load_journal(run.run_id)
                check_journal(run.run_id, steps)
        except JournalCorrupt as exc:
            if not ctx.cancel_requested:
                return await self._journal_corrupt(ctx, exc)
            steps, attempts = [], []  # a cancel replays nothing
        host = DurableHost(self, ctx, steps, attempts)
        ctx.host = host
        if ctx.cancel_requested:
            return await self._settle_cancelled(ctx, host)
        if run.status != "running":
            await self.store.commit(Commit(run.run_id, ctx.generation,
                                           run=RunChange("running", waiting=[],
                                                          updated_at=self.clock.now())))
        compiled = ctx.compiled
        args = {k: from_json(v) for k, v in run.input.items()}
        if run.process is not None:
            args = self.tool_runner.bind_resources(compiled.module, run.process, args)
        change: RunChange
        try:
            result = await execute(compiled.program, host, process=run.process, args=args,
                                   limits=self.limits)
            if result.status == "finished":
                change = RunChange("finished", result=to_json(result.value))
            else:
                change = RunChange("failed", error=self._error_json(result.error))
        except fx.Parked as parked:
            waits = [w if isinstance(w, Wait) else Wait(**w) for w in parked.waits]
            # a timer or a completion deadline makes the run due again on its own
            due = [w.until for w in waits if w.until is not None]
            change = RunChange("waiting", waiting=[w.to_json() for w in waits],
                               wake_at=min(due) if due else None)
        except Drained:
            change = RunChange("queued")
        except RunCancelled:
            return await self._settle_cancelled(ctx, host)
        except (ReplayMismatch, NeedsAttention) as exc:
            change = RunChange("needs_attention", error={"code": exc.code, "message": exc.message})
        except FailTurn as exc:
            change = RunChange("failed", error={"code": exc.code, "message": exc.message})
        except LashRuntimeError as exc:
            change = RunChange("failed", error=self._runtime_error_json(exc, compiled))
        except LimitExceeded as exc:
            change = RunChange("failed", error={"code": "limit_exceeded", "message": exc.message})
        except (Fenced, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug or an infrastructure fault, not the program's doing
            if isinstance(exc, LashflowError) and exc.code == "db_error":
                raise  # the store is failing: writing the failure would fail too
            log.exception("run %s stopped on an internal error", run.run_id)
            change = RunChange("needs_attention", error={
                "code": "internal_error",
                "message": f"lashflow stopped this run on an internal error: "
                           f"{type(exc).__name__}: {exc}; the journal is intact, "
                           f"`lashflow resume {run.run_id}` retries"})
        if ctx.cancel_requested and change.status in ("finished", "failed"):
            # the cancel landed while an attempt was in flight: the call came back cancelled
            # and the program ended on it (e.g. through `?`); the run was cancelled.
            return await self._settle_cancelled(ctx, host)
        change.release_lease = True
        change.updated_at = self.clock.now()
        steps, attempts = host.take_held()  # the last batch's outcomes go with the end
        await self.store.commit(Commit(run.run_id, ctx.generation, steps, attempts, run=change))
        host.notify_steps(steps)
        run.status, run.result, run.error, run.waiting = (change.status, change.result,
                                                          change.error, change.waiting)
        outcome = self._outcome(run, prints=host.prints)
        if change.status in SETTLED and run.parent_run_id:
            await self._wake_parent(run.parent_run_id)
        self.notify({"type": "run", "run_id": run.run_id, "status": change.status})
        return outcome

    def _error_json(self, error: Any) -> dict[str, Any]:
        if isinstance(error, dict):
            return error
        code = getattr(error, "code", "process_failed")
        message = getattr(error, "message", str(error))
        return {"code": code, "message": message}

    @staticmethod
    def _runtime_error_json(exc: Any, compiled: _Compiled) -> dict[str, Any]:
        from ..errors import position_of

        data = {"code": "runtime_error", "message": exc.message, "kind": exc.kind}
        span = getattr(exc, "span", None)
        if span is not None:
            start = span[0] if isinstance(span, tuple) else getattr(span, "start", 0)
            pos = position_of(compiled.module.source, start)
            data["line"], data["column"] = pos.line, pos.column
        return data

    async def _journal_corrupt(self, ctx: _RunContext, exc: JournalCorrupt) -> RunOutcome:
        """A journal row cannot be trusted: never replay from it; an operator must look."""
        change = RunChange("needs_attention", error={"code": exc.code, "message": exc.message},
                           release_lease=True, updated_at=self.clock.now())
        await self.store.commit(Commit(ctx.run.run_id, ctx.generation, run=change))
        ctx.run.status, ctx.run.error, ctx.run.waiting = change.status, change.error, []
        self.notify({"type": "run", "run_id": ctx.run.run_id, "status": change.status})
        return self._outcome(ctx.run)

    async def _settle_cancelled(self, ctx: _RunContext, host: DurableHost) -> RunOutcome:
        await host.flush_held()
        await self.tool_runner.cancel_pending(host)
        change = RunChange("cancelled", error={"code": "cancelled",
                                               "message": "lashlang process was cancelled"},
                           release_lease=True, updated_at=self.clock.now())
        await self.store.commit(Commit(ctx.run.run_id, ctx.generation, run=change))
        ctx.run.status, ctx.run.error, ctx.run.waiting = "cancelled", change.error, []
        if ctx.run.parent_run_id:
            await self._wake_parent(ctx.run.parent_run_id)
        return self._outcome(ctx.run, prints=host.prints)

    # -- workers ---------------------------------------------------------------------------
    async def work(self, concurrency: int | None = None, *, stop: asyncio.Event | None = None,
                   poll: float = 0.5, idle_exit: float | None = None,
                   retry_skipped: float = 30.0) -> int:
        """Drive queued, due and orphaned runs until ``stop`` is set; returns runs driven.

        Claims go through the store's lease (SKIP LOCKED on PostgreSQL), so any number of
        workers can share one database. On ``stop`` no new run is claimed and runs in
        flight stop at their next effect boundary (attempts in flight finish and are
        journaled), then go back to the queue with their lease released.
        ``idle_exit``: return once nothing was claimable for that many seconds (tests).
        """
        slots = concurrency or self.concurrency
        stop = stop or asyncio.Event()
        inflight: dict[str, asyncio.Task[Any]] = {}
        skipped: dict[str, float] = {}  # run -> when to try again (missing tools)
        driven = 0
        idle_since = time.monotonic()
        stopper = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                free = slots - len(inflight)
                if free > 0:
                    now = self.clock.now()
                    # Other workers list the same oldest runs: each takes a random few of
                    # a wider window, so they seldom race for the same claim.
                    ready = await self.store.claimable(now, limit=4 * free + len(inflight))
                    if stop.is_set():
                        break  # stopped while listing: claim nothing more
                    if len(ready) > free:
                        random.shuffle(ready)
                    for run_id in ready:
                        if run_id in inflight or skipped.get(run_id, 0.0) > time.monotonic():
                            continue
                        inflight[run_id] = asyncio.ensure_future(self._work_one(run_id, skipped,
                                                                                retry_skipped))
                        driven += 1
                        if len(inflight) >= slots:
                            break
                if inflight:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                    break
                waiter = asyncio.ensure_future(self.store.wait_for_work(poll))
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
            stopper.cancel()
            # Runs in flight stop at their next effect; runs whose claim is still under way
            # (not yet in ``_active``) see the flag when their drive begins.
            self._draining = True
            for ctx in self._active.values():
                ctx.drain_requested = True
            try:
                if inflight:
                    await asyncio.gather(*inflight.values(), return_exceptions=True)
            finally:
                self._draining = False
        return driven

    async def _work_one(self, run_id: str, skipped: dict[str, float], retry_after: float) -> None:
        try:
            run = await self._require(run_id)
            now = self.clock.now()
            if run.status == "waiting" and (run.wake_at is None or run.wake_at > now):
                return  # parked since it was listed (by the worker that held it): not due
            if (run.lease_owner not in (None, self.owner) and run.lease_expires >= now
                    and not owner_is_dead(run.lease_owner)):
                return  # another worker took it since it was listed: no claim to lose
            self._load_run_tools(run)
            # through the engine's task registry: a run this engine already drives (a
            # child it started, a parent it woke) is joined, never driven twice at once
            await self._spawn(run_id)
        except LashflowError as exc:
            if exc.code == "missing_tools":
                skipped[run_id] = time.monotonic() + retry_after
            elif exc.code not in ("run_busy", "unknown_run"):
                raise

    # -- children --------------------------------------------------------------------------
    @staticmethod
    def child_run_id(parent_run_id: str, step: str) -> str:
        return "run_" + hashlib.sha256(f"{parent_run_id}/{step}".encode()).hexdigest()[:24]

    async def create_child(self, ctx: _RunContext, child_id: str, process: str,
                           args: dict[str, Any]) -> None:
        now = self.clock.now()
        run = RunRecord(run_id=child_id, source_hash=ctx.compiled.source_hash, process=process,
                        input=args, input_hash=digest({"process": process, "input": args}),
                        status="queued", parent_run_id=ctx.run.run_id, created_at=now,
                        updated_at=now, meta=ctx.run.meta)
        await self.store.create_run(run)

    def spawn_child(self, child_id: str) -> None:
        if child_id not in self._tasks:
            self._spawn(child_id)

    async def join_child(self, child_id: str) -> tuple[Any, list[Wait]]:
        """The child's result wrapper once settled (or None while it is parked) and, while
        parked, what it waits on (so the parent's waits say what would move it on)."""
        try:
            outcome = await self._join(child_id)
        except LashflowError as exc:
            if exc.code != "run_busy":
                raise
            run = await self._require(child_id)
            outcome = self._outcome(run)
        waits = []
        for wait in outcome.waiting:
            if wait.child_run_id is None:
                wait.child_run_id = child_id
            waits.append(wait)
        return self.child_wrapper(outcome), waits

    @staticmethod
    def child_wrapper(outcome: RunOutcome) -> Any:
        if outcome.status is RunStatus.FINISHED:
            return {"ok": True, "value": outcome.result}
        if outcome.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            return {"ok": False, "error": outcome.error.message if outcome.error else "failed"}
        return None

    async def _wake_parent(self, parent_id: str) -> None:
        """A child settled: drive its parent on if it was parked waiting for a child."""
        parent = await self.store.get_run(parent_id)
        if parent is not None and parent.status == "running" and parent_id not in self._active:
            await self.store.wake(parent_id, self.clock.now())  # parking on us elsewhere?
        if parent is not None and parent.status == "waiting" and parent_id not in self._active:
            if any(w.get("kind") == "child" for w in parent.waiting):
                await self.store.mark_due(parent_id, self.clock.now())
                self._wakeups.add(self._spawn(parent_id))

    async def _drain_wakeups(self) -> None:
        """Wait for the parents woken by settling children (and theirs, transitively)."""
        while self._wakeups:
            task = self._wakeups.pop()
            try:
                await task
            except LashflowError as exc:
                if exc.code != "run_busy":
                    raise

    # -- outside events ----------------------------------------------------------------------
    async def complete(self, key: str, result: Any, *, resume: bool = True) -> RunStatus:
        """Resolve a completion key (first writer wins) and, with ``resume``, drive the run
        on here; otherwise (or if another worker holds it) mark it due for the workers."""
        run_id = await self.tool_runner.deliver_completion(key, result)
        return await self._after_delivery(run_id, resume, lambda run: True)

    async def _after_delivery(self, run_id: str, resume: bool, relevant: Any) -> RunStatus:
        run = await self._require(run_id)
        if run.status == "running":  # maybe parking on it elsewhere right now: Store.wake
            await self.store.wake(run_id, self.clock.now())
            return RunStatus.RUNNING
        if run.status != "waiting" or not relevant(run):
            return RunStatus(run.status)
        if resume and run_id not in self._active:
            self._load_run_tools(run)
            try:
                outcome = await self._join(run_id)
                await self._drain_wakeups()
                return outcome.status
            except LashflowError as exc:
                if exc.code not in ("run_busy", "missing_tools"):
                    raise
        await self.store.mark_due(run_id, self.clock.now())
        return RunStatus((await self._require(run_id)).status)

    async def signal(self, run_id: str, name: str, payload: Any = None, *,
                     resume: bool = True) -> RunStatus:
        run = await self._require(run_id)
        if run.status in SETTLED:
            raise LashflowError(f"run {run_id} is {run.status}; it takes no signals",
                                code="run_settled")
        await self.store.add_signal(run_id, name, payload)
        return await self._after_delivery(run_id, resume, lambda current: any(
            w.get("kind") == "signal" and w.get("signal") == name for w in current.waiting))

    async def cancel(self, run_id: str) -> RunStatus:
        run = await self._require(run_id)
        if run.status in SETTLED:
            return RunStatus(run.status)
        await self.store.request_cancel(run_id)
        active = self._active.get(run_id)
        if active is not None:
            active.request_cancel()
            return RunStatus.RUNNING
        if run.status in ("waiting", "queued", "needs_attention"):
            self._load_run_tools(run)
            try:
                return (await self.drive(run_id)).status
            except LashflowError as exc:
                if exc.code != "run_busy":
                    raise
        return RunStatus((await self._require(run_id)).status)

    # -- inspection ----------------------------------------------------------------------
    def _outcome(self, run: RunRecord, prints: list[str] | None = None) -> RunOutcome:
        return RunOutcome(
            run_id=run.run_id, status=RunStatus(run.status),
            result=run.result if run.status == "finished" else None,
            error=RunError.from_json(run.error),
            waiting=[Wait.from_json(w) for w in run.waiting] if run.status == "waiting" else [],
            prints=[self.tool_runner.project(p) for p in prints] if prints else [])

    async def get(self, run_id: str) -> RunOutcome:
        run = await self._require(run_id)
        try:
            steps, _ = await self.store.load_journal(run_id)
            check_journal(run_id, steps)
        except JournalCorrupt:
            steps = []  # the run's own row still reads; steps() reports the corruption
        prints = [s.outcome["text"] for s in steps if s.kind == "print" and s.outcome]
        return self._outcome(run, prints=prints)

    async def get_record(self, run_id: str) -> RunRecord:
        return await self._require(run_id)

    async def list(self, status: str | None = None) -> list[RunOutcome]:
        return [self._outcome(r) for r in await self.store.list_runs(status)]

    async def steps(self, run_id: str) -> list[StepView]:
        await self._require(run_id)
        steps, attempts = await self.store.load_journal(run_id)
        check_journal(run_id, steps)
        by_step: dict[str, list[AttemptView]] = {}
        for a in attempts:
            by_step.setdefault(a.step_key, []).append(AttemptView(
                a.attempt, a.status, a.code, a.message, a.started_at, a.finished_at,
                a.detail.get("usage")))
        views = []
        for s in steps:
            projected = self._preview(s)
            views.append(StepView(s.step_key, s.kind, s.tool, s.status, by_step.get(s.step_key, []),
                                  s.outcome, projected))
        return views

    def _preview(self, step: Any) -> str | None:
        """What the run history shows of a step, through the output budget."""
        outcome = step.outcome
        if outcome is None:
            return None
        if step.kind == "tool":
            if outcome.get("status") == "ok":
                return self.tool_runner.project(outcome.get("value"))
            return outcome.get("message") or outcome.get("status")
        if step.kind in ("print", "yield", "wake"):
            return self.tool_runner.project(outcome.get("text", ""))
        return self.tool_runner.project(outcome)

    async def waiting(self) -> list[tuple[str, Wait]]:
        out = []
        for run in await self.store.list_runs("waiting"):
            out.extend((run.run_id, Wait.from_json(w)) for w in run.waiting)
        return out


__all__ = ["Engine", "RunHandle", "source_digest"]
