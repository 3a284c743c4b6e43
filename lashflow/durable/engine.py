"""The ``Engine``: the public Python API that starts, drives, resumes and inspects runs.

A thin facade. The work is done by the parts it wires together (see docs/architecture.md):
``Programs`` (compile cache), ``ToolRunner`` (tools, dispatch, completion keys),
``Driver`` (claim -> replay -> settle), ``Children``, ``Commands`` (complete, signal,
cancel), ``Worker`` (the worker loop), ``Reads`` (what the engine tells about runs),
``settle`` (drive until settled) and ``check_file`` (check a file, run nothing).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import os
from functools import cached_property
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable

from ..errors import DbError, InputInvalid, RunBusy, RunConflict, UsageError
from ..interp.limits import Limits
from ..json_kinds import check_json_text, storable_text
from ..slotted import Slotted
from ..states import SETTLED, RunStatus
from ..store import RunQuery, RunRecord, Store, open_store
from ..store.events import RunEvent
from ..store.leases import new_owner_id
from ..telemetry import Metrics, Telemetry
from ..tools.clock import Clock, RealClock
from .canonical import digest
from .checking import FileCheck, check_file
from .children import Children
from .commands import Commands, Delivery
from .driver import Driver
from .events import Events, Listener
from .pauses import Pauses
from ..tools.definition import ON_EXHAUSTED
from .resolve import MISSING, Resolver
from .run_ids import new_run_id
from .operator import GcReport, Operator, collect
from .outcome import CompletionInfo, RunDetail, RunOutcome, RunPage, StepView, Wait
from .programs import Compiled, Programs, Source, entry_of, is_source_path
from .reads import Reads
from .settle import settle
from .ratelimits import CallLimiter
from .tool_runner import ToolRunner
from .worker import Worker

if TYPE_CHECKING:  # built on first use: `lashflow run` and `resume` never import them
    from .bulk import Bulk, BulkReport, Progress
    from .live import EventHub
    from .queues import Queues
    from .ratelimit_api import RateLimits
    from .schedule_api import Schedules
    from .verifier import Verifier, VerifyReport
    from .versions import Deployment, Upgrade, Versions
    from .verify import Verdict

LEASE_TTL = 30.0


class RunHandle(Slotted):
    __slots__ = ("run_id", "task")

    def __init__(self, run_id: str, task: asyncio.Task[RunOutcome] | None = None) -> None:
        self.run_id = run_id
        self.task = task

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r})"

    async def result(self) -> RunOutcome:
        if self.task is None:
            raise UsageError("this handle has no run being driven")
        return await self.task


class Engine:
    """``async with Engine(db=...) as engine: outcome = await engine.run("flow.lash")``.

    ``db``: a database URL or a plain SQLite path (default ``$LASHFLOW_DB``, else
    ``.lashflow/lashflow.db``). ``tools``: decorated functions or tool objects;
    ``modules``: module names or ``.py`` paths whose tools are loaded. ``clock``: a
    ``lashflow.testing.FakeClock`` in tests. ``concurrency``: runs driven at once here
    (a parked run does not count). ``limits``: what one run may use (``Limits``).
    ``create=False``: where there is no database yet, opening raises ``NoDatabase`` and
    makes none (for tools that only read); ``readonly``: the database refuses every
    write (for ``verify``). ``store``: a ``Store`` built by the caller instead of one
    opened from ``db`` (``lashflow.testing`` wraps one to simulate a crash).
    ``telemetry``: None finds OpenTelemetry
    providers the application installed before the engine opens (``Telemetry.detect``),
    True also counts for ``/metrics``, False reports nothing, or a ``Telemetry``."""

    def __init__(self, db: str | None = None, tools: Iterable[Any] = (), modules: Iterable[str] = (),
                 plugins: Any = None, model_provider: Any = None, clock: Clock | None = None, *,
                 concurrency: int = 64, limits: Limits | None = None,
                 lease_ttl: float = LEASE_TTL, create: bool = True, readonly: bool = False,
                 telemetry: Telemetry | bool | None = None, store: Store | None = None) -> None:
        self.db = db
        self.clock: Clock = clock or RealClock()
        self.concurrency = concurrency
        self.limits = limits or Limits()
        self.store = (store if store is not None
                      else open_store(db, create=create, readonly=readonly))
        self.owner = new_owner_id(session=self.store.holds_sessions)
        self.events = Events()
        self.plugins = plugins
        self._initial_tools = list(tools)
        self._initial_modules = [str(m) for m in modules]
        self.tools = ToolRunner(self.store, self.clock, self.events, model_provider)
        self.tools.limiter = CallLimiter(self.store, self.clock, self.owner)
        self.programs = Programs(self.tools.catalog)
        self.reads = Reads(self.store, self.tools, self.clock)
        self.operator = Operator(self.store, self.clock, self.reads)
        self.driver = Driver(self.store, self.clock, self.limits, self.programs, self.tools,
                             self.reads, self.events, owner=self.owner, lease_ttl=lease_ttl,
                             concurrency=concurrency)
        self.commands = Commands(self.store, self.clock, self.driver, self.tools, self.reads,
                                 self.programs)
        self.driver.family = Children(self.store, self.clock, self.driver, self.reads,
                                      self.commands)
        self.worker = Worker(self.store, self.clock, self.driver, self.tools, self.reads)
        self.pauses = Pauses(self.store, self.clock, self.reads, self.driver.active)
        self.resolver = Resolver(self.store, self.clock, self.reads, self.tools)
        # process name (or "*" for every one) -> what its runs do when a call's retries
        # run out ("fail" or "pause"), unless the run or the tool says otherwise
        self.exhausted_defaults: dict[str, str] = {}
        self._telemetry_choice = telemetry
        self.telemetry: Telemetry | None = None

    # Parts a run or a resume never uses are built (and their modules imported) on first
    # use: kill -> first resumed step pays for no schedule or version code (ADR 0034).
    @cached_property
    def bulk_actions(self) -> "Bulk":
        from .bulk import Bulk

        return Bulk(self.store, self.clock, self.operator, self.pauses, self.upgrade,
                    self.driver.active)

    @cached_property
    def live(self) -> "EventHub":
        from .live import EventHub

        return EventHub(self.store)

    @cached_property
    def verifier(self) -> "Verifier":
        from .verifier import Verifier

        return Verifier(self.store, self.tools, self.reads, self.limits, self.clock)

    @cached_property
    def deployments(self) -> "Versions":
        from .versions import Versions

        return Versions(self.store, self.tools, self.programs, self.reads, self.verifier,
                        self.clock)

    @cached_property
    def queues(self) -> "Queues":
        from .queues import Queues

        return Queues(self.store, self.clock)

    @cached_property
    def rate_limits(self) -> "RateLimits":
        from .ratelimit_api import RateLimits

        return RateLimits(self.store, self.clock)

    @cached_property
    def schedules(self) -> "Schedules":
        from .schedule_api import Schedules
        from .schedules import Scheduler

        scheduler = Scheduler(self.store, self.clock, self.commands.cancel)
        telemetry = self.telemetry
        scheduler.metrics = telemetry.metrics if telemetry is not None else None
        self.worker.scheduler = scheduler
        return Schedules(self, scheduler)

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> "Engine":
        await self.store.open()
        try:
            for item in self._initial_tools:
                self.tools.add_tool(item)
            for module in self._initial_modules:
                self.tools.load(module)
            self.tools.validate_plugins(self.plugins)
            await self.tools.open()
            self._wire_telemetry()
        except BaseException:
            await self.store.close()  # else its connection thread keeps the process alive
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if "live" in self.__dict__:  # built only if someone followed events
                await self.live.close()
            await self.driver.close()
        finally:
            await self.store.close()

    def _wire_telemetry(self) -> None:
        choice = self._telemetry_choice
        if isinstance(choice, Telemetry) or choice is False:
            found = choice or None
        else:
            found = Telemetry.detect(metrics=choice is True)
        self.telemetry = found
        self.driver.telemetry = found
        self.tools.use_telemetry(found)
        self.store.on_commit = found.metrics.commit if found and found.metrics else None
        if "schedules" in self.__dict__:  # built already: else it reads them when built
            self.schedules.scheduler.metrics = found.metrics if found else None

    async def metrics_text(self) -> str:
        """The Prometheus text of this process's counters and the database's runs by
        status and open waits (``lashflow serve``'s ``/metrics``)."""
        counted = self.telemetry.metrics if self.telemetry is not None else None
        now = self.clock.now()
        return (counted or Metrics()).render(await self.store.stats(now),
                                             await self.queues.gauges(now),
                                             await self.rate_limits.gauges(now))

    @property
    def listeners(self) -> list[Listener]:
        """Progress listeners (see ``Events``); append a callable to follow runs live."""
        return self.events.listeners

    def load_tools(self, module_or_path: str) -> None:
        """Import a tool module (name or ``.py`` path) once and register its tools."""
        self.tools.load(module_or_path)

    def compile(self, source: str) -> Compiled:
        """Parse, link against the registered tools and compile (cached per source)."""
        return self.programs.compile(source)

    # -- starting ---------------------------------------------------------------------------
    async def create(self, source_or_path: str | os.PathLike[str] | None, process: str | None = None,
                      input: Any = None, run_id: str | None = None, *, queue: str | None = None,
                      key: str | None = None, priority: int | None = None,
                      dedup_id: str | None = None, debounce: str | float | None = None,
                      debounce_keep: str = "newest", singleton: str | None = None,
                      on_exhausted: str | None = None) -> RunRecord:
        """Validate and store a new run (status ``queued``) without driving it. With
        ``queue`` it waits in that queue (``engine.queues``) until its limits let a
        worker start it: ``key`` (its concurrency/rate/fairness key), ``priority`` (1
        first; default the middle level), ``dedup_id`` (the same id in the same queue
        gives back the existing run, whatever its input), ``debounce`` (``"30s"``: the
        submissions of one key within the window make one run, started when it closes,
        with the newest input, or the oldest with ``debounce_keep="oldest"``),
        ``singleton`` (``"skip"``: not while its key has a run going; ``"cancel-running"``:
        that run is cancelled for this one). Without ``queue``, a run of a file whose
        project configuration names a queue for its process enters that one
        (``[tool.lashflow.processes.NAME]``, docs/queues.md)."""
        entry = None
        if queue is None and source_or_path is not None and is_source_path(source_or_path):
            from .project import queue_default

            default = queue_default(source_or_path, self._process_of(source_or_path, process))
            if default is not None:  # the project's configuration names one (project.py)
                queue = default.queue
                key = default.key_for({} if input is None else input) if key is None else key
                priority = default.priority if priority is None else priority
        if queue is not None:
            entry, dedup_run = await self.queues.entry(queue, key, priority, dedup_id,
                                                       debounce, debounce_keep, singleton)
            if run_id is not None and (debounce is not None or singleton is not None):
                raise UsageError("a debounced or singleton run's id is chosen by its queue: "
                                 "give no run id")
            run_id = run_id or dedup_run
        elif any(option is not None for option in (key, priority, dedup_id, debounce,
                                                   singleton)):
            raise UsageError("a key, priority, dedup id, debounce or singleton needs a queue "
                             "(queue=...)")
        run, _, _ = await self._create(source_or_path, process, input, run_id, claim=False,
                                       queue=entry, on_exhausted=on_exhausted)
        return run

    def _process_of(self, path: str | os.PathLike[str], process: str | None) -> str | None:
        """The process a run of this file starts: the one named, else the file's entry."""
        if process is not None:
            return process
        decl = entry_of(self.programs.compile(self.tools.read_source(path).text).module, None)
        return decl.name if decl is not None else None

    async def start(self, source_or_path: str | os.PathLike[str] | None, process: str | None = None,
                    input: Any = None, run_id: str | None = None, *,
                    on_exhausted: str | None = None) -> RunHandle:
        """Store a new run and drive it in the background."""
        run, compiled, created = await self._create(source_or_path, process, input, run_id,
                                                    claim=True, on_exhausted=on_exhausted)
        fresh = (run, compiled) if created else None
        return RunHandle(run.run_id, self.driver.spawn(run.run_id, fresh=fresh))

    async def run(self, source_or_path: str | os.PathLike[str] | None, process: str | None = None,
                  input: Any = None, run_id: str | None = None, *,
                  on_exhausted: str | None = None) -> RunOutcome:
        """Store a new run and drive it until it settles or parks. The same ``run_id``
        with the same source and input gives back the existing run. ``on_exhausted=
        "pause"``: a call whose retries run out pauses the run for an operator instead of
        failing (whatever its tool says; ``Engine.exhausted_defaults`` sets it for every
        run of a process)."""
        run, compiled, created = await self._create(source_or_path, process, input, run_id,
                                                    claim=True, on_exhausted=on_exhausted)
        if created:
            return await self.driver.spawn(run.run_id, fresh=(run, compiled))
        return await self.driver.join(run.run_id)

    async def _create(self, source_or_path: str | os.PathLike[str] | None, process: str | None,
                      input: Any, run_id: str | None, *, claim: bool,
                      on_exhausted: str | None = None,
                      queue: dict[str, Any] | None = None) -> tuple[RunRecord, Compiled, bool]:
        """Store a new run; returns (run as stored, compiled, created by this call).

        With ``claim`` a new run is stored already ``running`` under this engine's lease
        (generation 1), in the same transaction: the caller drives it at once with no
        claim, no re-read and no journal load (it has none). An existing run is returned
        as stored, for the caller to join or drive the usual way."""
        _check_run_id(run_id)
        source, compiled, process_name, data, input_hash, deployed = await self._prepare(
            source_or_path, process, input)
        now = self.clock.now()
        run = RunRecord(
            run_id=run_id or new_run_id(), source_hash=compiled.source_hash,
            process=process_name, input=data, input_hash=input_hash, status=RunStatus.QUEUED,
            created_at=now, updated_at=now,
            meta={"file": source.path, "tool_modules": sorted(self.tools.loaded_modules)})
        if deployed is not None:
            run.meta["version"] = deployed.version
        chosen = on_exhausted or self.exhausted_defaults.get(process_name or "") \
            or self.exhausted_defaults.get("*")
        if chosen is not None:
            if chosen not in ON_EXHAUSTED:
                raise InputInvalid(f"on_exhausted is one of {', '.join(ON_EXHAUSTED)}, not "
                                   f"{chosen!r}", path="on_exhausted")
            run.meta["on_exhausted"] = chosen
        if queue is not None:
            run.meta["queue"] = queue
        if self.telemetry is not None and self.telemetry.tracing is not None:
            run.meta["trace"] = self.telemetry.tracing.origin(process_name, run.run_id)
        if claim:
            run.status, run.generation = RunStatus.RUNNING, 1
            run.lease_owner, run.lease_expires = self.owner, now + self.driver.lease_ttl
        cancelled: builtins.list[str] = []
        writer = self.store.register_writer()  # ``writing()``, without its generator
        try:
            await self.store.put_source(compiled.source_hash, source.text)
            if queue is not None and "debounce" in queue:
                run.wake_at = now + queue["debounce"]
                stored, created = await self.store.debounce_run(
                    run, keep_newest=queue["keep"] == "newest")
            elif queue is not None and "singleton" in queue:
                stored, created, cancelled = await self.store.singleton_run(
                    run, cancel_running=queue["singleton"] == "cancel-running")
            else:
                stored, created = await self.store.create_run(run)
        finally:
            writer.release()
        for earlier in cancelled:  # settled at once where nothing drives it
            await self.commands.cancel(earlier, f"replaced by run {run.run_id} of its key "
                                                "(singleton cancel-running)")
        deduplicated = queue is not None and bool({"dedup_id", "debounce", "singleton"}
                                                  & set(queue))
        if not created and not deduplicated and (stored.source_hash != run.source_hash
                                                 or stored.input_hash != input_hash):
            raise RunConflict(f"run {run.run_id} already exists with a different "
                              f"{'source' if stored.source_hash != run.source_hash else 'input'}")
        return (run if created else stored), compiled, created

    async def _prepare(self, source_or_path: str | os.PathLike[str] | None,
                       process: str | None, input: Any
                       ) -> tuple[Source, Compiled, str | None, Any, str, Deployment | None]:
        """Read, compile and check what a new run would start from (a file, or with none
        the process's latest deployed version): (source, compiled, process name, input,
        input hash, the deployment). Raises before anything is stored."""
        deployed: Deployment | None = None
        if source_or_path is None:  # by process name: its latest deployed version
            if process is None:
                raise UsageError("name the process to start (or give its file)")
            deployed = await self.deployments.version(process)
            compiled = await self.deployments.compiled(deployed)
            source = Source(compiled.module.source, None)
        else:
            source = self.tools.read_source(source_or_path)
            compiled = self.programs.compile(source.text)
        decl = entry_of(compiled.module, process)
        data = {} if input is None else input
        _input_checker()(compiled.module, decl, data, self.tools.resource_types())
        process_name = decl.name if decl is not None else None
        return source, compiled, process_name, data, digest({"process": process_name,
                                                             "input": data}), deployed

    # -- driving ---------------------------------------------------------------------------
    async def resume(self, run_id: str, source: str | os.PathLike[str] | None = None, *,
                     retry_interrupted: bool = False) -> RunOutcome:
        """Continue a run under its stored source (or edited ``source``: a recorded step
        the code no longer asks for is a replay mismatch). A settled run is returned as
        it is."""
        run = await self.reads.require(run_id)
        if run.status in SETTLED:
            return await self.reads.get(run_id)
        self.tools.load_for_run(run)
        outcome = await self.driver.join(run_id, source=source,
                                         retry_interrupted=retry_interrupted)
        await self.driver.drain_follow_ups()
        return outcome

    async def retry(self, run_id: str, source: str | os.PathLike[str] | None = None, *,
                    wait: bool = True, from_step: str | None = None) -> RunOutcome:
        """Continue a failed, cancelled or needs_attention run: the steps before the one
        that made it stop replay, that step and every step after it run again (under the
        stored source, or an edited ``source``); ``from_step`` (a step key or the row
        number ``show`` prints) restarts at another step. A retried step that waits on a
        completion waits afresh. The old attempts stay in the journal. ``wait=False``:
        queue it, drive it in the background and answer at once."""
        await self.operator.reopen_for_retry(run_id, from_step)
        if not wait:
            await self.drive_soon(run_id)
            return await self.reads.get(run_id)
        return await self.resume(run_id, source)

    async def retry_plan(self, run_id: str, from_step: str | None = None) -> list[StepView]:
        """What ``retry`` would run again (``retry --dry-run``), changing nothing: the
        recorded steps it would retire, in ``show``'s order."""
        again = await self.operator.reopen_for_retry(run_id, from_step, dry_run=True)
        return self.reads.views(again, [])

    async def settle(self, outcome: RunOutcome, *, max_wait: float = 30.0,
                     follow: bool = False) -> RunOutcome:
        """Drive ``outcome``'s run on (and the child runs it waits on) through sleeps that
        end within ``max_wait`` seconds and, with ``follow``, through any wait until it is
        resolved from elsewhere; a run another live worker holds is left to it. Progress
        is told to the listeners as ``phase`` events."""
        return await settle(self, outcome, max_wait, follow)

    @staticmethod
    def check_file(path: str | os.PathLike[str], modules: Iterable[str] = ()) -> FileCheck:
        """Parse and link a ``.lash`` file against the tools it would run with (``modules``,
        the project's configured ones, the ``.py`` beside it); runs nothing, opens no
        database."""
        from pathlib import Path

        return check_file(Path(path), modules)

    async def drive_soon(self, run_id: str) -> None:
        """Drive a run in the background here (what a worker would do next, at once); a
        run another process holds, or one needing tools not loaded here, is left to
        others. For servers that answer before the run moves on."""
        run = await self.reads.require(run_id)
        if run.status in SETTLED:
            return
        self.tools.load_for_run(run)
        self.driver.spawn(run_id)

    async def fork(self, run_id: str, from_step: str, *, set: dict[str, Any] | None = None,
                   run_id_of_fork: str | None = None, wait: bool = True) -> RunOutcome:
        """A new run with the journal of ``run_id`` before ``from_step`` (a step key or the
        row number ``show`` prints), each step in ``set`` recorded as if its tool had
        returned that value, driven on from there. Linked both ways (``forked_from``).
        ``wait=False``: drive it in the background and answer at once."""
        _check_run_id(run_id_of_fork)
        overrides = dict(set or {})
        for step, value in overrides.items():  # before anything is written
            try:
                check_json_text(value)
            except InputInvalid as exc:
                raise InputInvalid(f"set {step}: {exc.message}", **exc.details) from None
        new_id = await self.operator.fork(run_id, from_step, overrides, run_id_of_fork)
        if not wait:
            await self.drive_soon(new_id)
            return await self.reads.get(new_id)
        return await self.resume(new_id)

    async def gc(self, older_than: float, statuses: Iterable[str] = SETTLED, *,
                 dry_run: bool = False) -> GcReport:
        """Retention: delete settled runs not updated for ``older_than`` seconds (with
        their journals, keys, signals and the blobs only they used), in short batches so
        workers keep running beside it. ``dry_run``: count, delete nothing."""
        return await collect(self.store, self.clock.now() - older_than, statuses,
                             dry_run=dry_run)

    async def recover(self) -> list[RunOutcome]:
        """Drive every run whose owner is gone, and every waiting run whose timer is due.
        A run another process takes meanwhile is left to it; the others are driven."""
        now = self.clock.now()
        run_ids = await self.store.orphaned_runs(now)
        run_ids += [r for r in await self.store.due_runs(now, limit=10_000) if r not in run_ids]
        for run_id in run_ids:
            run = await self.store.get_run(run_id)
            if run is not None:
                self.tools.load_for_run(run)
        results = await asyncio.gather(*(self.driver.join(r) for r in run_ids),
                                       return_exceptions=True)
        outcomes = []
        for result in results:
            if isinstance(result, RunBusy):
                continue
            if isinstance(result, BaseException):
                raise result
            outcomes.append(result)
        return outcomes

    async def work(self, concurrency: int | None = None, *, stop: asyncio.Event | None = None,
                   poll: float = 0.5, idle_exit: float | None = None,
                   retry_skipped: float = 30.0, schedules: bool = True) -> int:
        """Drive queued, due and orphaned runs until ``stop`` is set; returns runs driven.
        On ``stop`` runs in flight stop at their next effect and go back to the queue.
        ``idle_exit``: return once nothing was claimable for that many seconds (tests).
        ``schedules``: also fire the ticks of schedules as they fall due."""
        if schedules:
            self.schedules  # builds the scheduler the worker fires ticks with
        return await self.worker.work(concurrency or self.concurrency,
                                      stop=stop or asyncio.Event(), poll=poll,
                                      idle_exit=idle_exit, retry_skipped=retry_skipped,
                                      schedules=schedules)

    # -- outside events ----------------------------------------------------------------------
    async def complete(self, key: str, result: Any, *, resume: bool = True) -> RunStatus:
        """Resolve a completion key (first writer wins); returns the run's status after
        delivery. With ``resume`` the run is driven on here at once."""
        return (await self.commands.deliver(key, result, resume=resume)).status

    async def deliver(self, key: str, result: Any, *, resume: bool = True,
                      background: bool = False) -> Delivery:
        """``complete``, also telling which run the key belonged to. ``background`` (with
        ``resume``): the run's drive starts here in the background and this answers at
        once, with its status after delivery (a server answering a webhook)."""
        return await self.commands.deliver(key, result, resume=resume, background=background)

    async def completion(self, key: str) -> CompletionInfo | None:
        """Where a completion key stands (None: forged, unknown or of a cancelled run)."""
        found = await self.tools.completion_of(key)
        if found is None:
            return None
        run_id, row = found
        step = self.tools.step_of(key)
        if row is None or not row.waiting and row.resolution is None:
            return CompletionInfo(run_id, step, "not_waiting")
        if row.resolution is not None:
            state = "expired" if row.resolution.kind.value == "timeout" else "resolved"
            return CompletionInfo(run_id, step, state, row.deadline_at, row.resolution.to_json())
        if row.past_deadline(self.clock.now()):
            return CompletionInfo(run_id, step, "expired", row.deadline_at)
        return CompletionInfo(run_id, step, "open", row.deadline_at)

    async def signal(self, run_id: str, name: str, payload: Any = None, *,
                     resume: bool = True) -> RunStatus:
        return await self.commands.signal(run_id, name, payload, resume=resume)

    async def cancel(self, run_id: str, reason: str | None = None) -> RunStatus:
        """A parked run settles ``cancelled`` at once; a running one at its next effect.
        ``reason`` is kept in the run's error message. A settled run is left as it is."""
        return await self.commands.cancel(run_id, reason)

    async def pause(self, run_id: str, reason: str | None = None, *,
                    by: str | None = None) -> RunStatus:
        """Pause a queued, running or waiting run: no worker takes it until ``unpause``;
        an attempt in flight finishes and is recorded, waits keep their deadlines (one
        that passes meanwhile is met on unpause). ``by`` (default ``user@host``) and
        ``reason`` are kept and shown. A paused run is left as it is."""
        return await self.pauses.pause(run_id, reason, by=by)

    async def unpause(self, run_id: str) -> RunStatus:
        """Put a paused run back in the queue: a worker replays it to where it stood."""
        return await self.pauses.unpause(run_id)

    async def resolve_step(self, run_id: str, step: str, *, result: Any = MISSING,
                           error: str | None = None, reason: str | None = None,
                           by: str | None = None) -> StepView:
        """Record by hand the outcome of an interrupted, failed or pending tool step (a
        step key or the row number ``show`` prints): ``result`` (checked against the
        tool's output schema) or ``error`` (the process sees ``{ok: false, error}``).
        Journaled as an operator action (``by``, default ``user@host``; ``reason``);
        then the run goes on: a stopped run is queued, a waiting one made due."""
        done = await self.resolver.resolve(run_id, step, result=result, error=error,
                                           reason=reason, by=by)
        [view] = self.reads.views([done], [])
        return view

    async def select(self, where: str | RunQuery) -> builtins.list[str]:
        """The ids of every run ``where`` selects (see ``bulk``), newest first."""
        _, query = self.bulk_actions.plan("cancel", where, True)
        return await self.bulk_actions.select(query)

    async def bulk(self, action: str, where: str | RunQuery, *, dry_run: bool = False,
                   reason: str | None = None, by: str | None = None, to: int | None = None,
                   progress: Progress | None = None) -> BulkReport:
        """``cancel``, ``retry``, ``pause``, ``unpause``, ``gc`` or ``upgrade`` every run
        ``where`` selects (an expression such as ``"status=failed and process=fulfill
        and created<7d"``, see ``lashflow.durable.selection``), a page of runs per
        statement; ``dry_run``: count what would be acted on, change nothing.
        ``progress`` is called with the report after each page. Retried and unpaused
        runs are queued for the workers; cancelled ones are settled by the next drive."""
        report, query = self.bulk_actions.plan(action, where, dry_run)
        return await self.bulk_actions.run(report, query, reason=reason, by=by, to=to,
                                           progress=progress)

    # -- inspection ----------------------------------------------------------------------
    async def get(self, run_id: str) -> RunOutcome:
        return await self.reads.get(run_id)

    async def source_of(self, run_id: str) -> str | None:
        """The Lashlang source the run was started from (None if the database lost it)."""
        return await self.store.get_source((await self.reads.require(run_id)).source_hash)

    async def get_record(self, run_id: str) -> RunRecord:
        return await self.reads.require(run_id)

    async def list(self, status: str | None = None) -> builtins.list[RunOutcome]:
        """Every run (oldest first), or those with ``status``: for small databases and
        tests; ``runs`` pages through any number."""
        return await self.reads.list(status)

    async def runs(self, *, status: str | Iterable[str] | None = None,
                   process: str | None = None, parent: str | None = None,
                   since: float | None = None, until: float | None = None, limit: int = 50,
                   cursor: str | None = None, queue: str | None = None,
                   key: str | None = None) -> RunPage:
        """Run summaries, newest first, ``limit`` (1-1000) a page: filter by status (one
        or several), process name, parent run and creation time (``since <= created_at <
        until``, epoch seconds), queue and key in it; pass a page's ``next_cursor`` for
        the next. One query a page, fast at any number of runs."""
        return await self.reads.runs(status=status, process=process, parent=parent,
                                     since=since, until=until, limit=limit, cursor=cursor,
                                     queue=queue, key=key)

    async def run_detail(self, run_id: str) -> RunDetail:
        """One run with its input, result or error, waits, children and journal (each
        step's arguments, attempts and budgeted outcome), read in one go."""
        return await self.reads.run_detail(run_id)

    async def steps(self, run_id: str) -> builtins.list[StepView]:
        return await self.reads.steps(run_id)

    # -- live events (ADR 0033) --------------------------------------------------------
    async def run_events(self, run_id: str, after: int = 0,
                         limit: int = 500) -> builtins.list[RunEvent]:
        """The run's recorded events with an offset above ``after`` (one page, at once)."""
        await self.reads.require(run_id)
        return await self.store.run_events(run_id, after, limit)

    async def last_event(self, run_id: str) -> int:
        """The offset of the run's last recorded event (0: none)."""
        return await self.store.last_event(run_id)

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncIterator[RunEvent | None]:
        """The run's events after offset ``after`` and then each new one as it is
        written, each once and in order (``unknown_run`` at once for a run not there);
        None now and then while nothing happens (a moment for a keep-alive)."""
        await self.reads.require(run_id)
        return self.live.run_events(run_id, after)

    async def subscribe_feed(self, after: str | None = None,
                             process: str | None = None) -> AsyncIterator[RunEvent | None]:
        """Events of every run (or of ``process``'s runs) after a feed cursor (an event's
        ``cursor``; None: from now on), each once, in commit order (``usage_error`` at
        once for a cursor this database never gave)."""
        if after is not None:
            await self.store.feed(after, 1, process)
        return self.live.feed(after, process)

    async def waiting(self) -> builtins.list[tuple[str, Wait]]:
        return await self.reads.waiting()

    # -- changing workflows ------------------------------------------------------------
    async def verify(self, source_or_path: str | os.PathLike[str], *, process: str | None = None,
                     runs: Iterable[str] = (), status: str | Iterable[str] | None = None,
                     keep_all: bool = False) -> VerifyReport:
        """Replay runs against an edited program without running or writing anything:
        the runs named, or every run of its processes (or ``process``) that has not
        settled (or whose status is in ``status``). Counts by verdict; the runs that are
        not ``compatible`` (every run with ``keep_all``)."""
        compiled = self.programs.compile(self.tools.read_source(source_or_path).text)
        return await self.verifier.report(compiled, keep_all=keep_all, process=process,
                                          run_ids=runs, statuses=status)

    async def deploy(self, *sources: str | os.PathLike[str]) -> builtins.list[Deployment]:
        """Record a numbered version of every process of each file (a new one only where
        its source or the schemas of the tools it calls changed): runs started by process
        name (``run(None, process)``) take the latest."""
        return await self.deployments.deploy(sources)

    async def versions(self, process: str | None = None) -> builtins.list[Deployment]:
        return await self.deployments.list(process)

    async def upgrade(self, run_ids: Iterable[str], to: int | None = None, *,
                      dry_run: bool = False) -> builtins.list[Upgrade]:
        """Move runs to version ``to`` of their process (default: the latest) where a
        replay against it says compatible, one atomic write per run that keeps the
        version left (``previous_versions`` in the run's meta: upgrade back to undo)."""
        return await self.deployments.upgrade(run_ids, to, dry_run=dry_run)

    async def export(self, run_ids: Iterable[str]) -> dict[str, Any]:
        """Runs as one JSON document (source, input and journal of each; no completion
        key and no secret): fixtures for ``lashflow.testing.Replayer``."""
        from . import export as exported

        runs = []
        for run_id in run_ids:
            run = await self.reads.require(run_id)
            steps, attempts = await self.store.load_journal(run.run_id)
            source = await self.store.get_source(run.source_hash)
            if source is None:
                raise DbError(f"run {run.run_id}: its source is missing from the database")
            runs.append(exported.run_entry(run, source, steps, attempts))
        return exported.document(runs, self.clock.now())

    def verdicts(self, source_or_path: str | os.PathLike[str], *, process: str | None = None,
                 runs: Iterable[str] = (), status: str | Iterable[str] | None = None
                 ) -> AsyncIterator[Verdict]:
        """``verify``'s verdicts one run at a time, as they are decided (any number of
        runs in flat memory)."""
        compiled = self.programs.compile(self.tools.read_source(source_or_path).text)
        return self.verifier.verdicts(compiled, process=process, run_ids=runs, statuses=status)


MAX_RUN_ID = 256  # a completion key carries its run id, and a key has at most 8,192 characters


@functools.cache
def _input_checker() -> Callable[..., None]:
    """``check_input``, imported with the first run created and kept: it brings the syntax
    tree's classes, which only a compile needs, and `import lashflow` must stay cheap for
    commands that compile nothing (an import statement per run cost 0.8 us)."""
    from ..interp.inputs import check_input

    return check_input


def _check_run_id(run_id: object) -> None:
    """A run id a caller chooses is stored as text by every database and carried in its
    completion keys: 1 to ``MAX_RUN_ID`` characters, no NUL, no lone surrogate."""
    if run_id is None:
        return
    if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_RUN_ID \
            or not storable_text(run_id):
        shown = repr(run_id) if len(repr(run_id)) <= 60 else repr(run_id)[:57] + "..."
        raise InputInvalid(f"run id {shown}: a run id is text of 1 to {MAX_RUN_ID} "
                           "characters with no NUL and no lone surrogate", path="run_id")


__all__ = ["Engine", "RunHandle"]
