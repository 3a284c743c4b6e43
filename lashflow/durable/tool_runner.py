"""The durable host's side of the tool layer: dispatch, attempt journaling, completions.

The tool layer (``lashflow.tools``) knows nothing of storage; this module backs its two
injected interfaces with the store: ``AttemptJournal`` (one journal entry per attempt)
and ``CompletionStorage`` (first-writer-wins resolution of completion keys).

Journal writes per step are kept to one commit for the common case: an idempotent tool's
attempt start is written lazily with its final outcome, in the same commit as the step.
"""

from __future__ import annotations

import asyncio
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import LashflowError
from ..interp.effects import ToolCall as ToolCallEffect
from ..lang.catalog import Catalog
from ..lang.names import resource_type_name
from ..states import RunStatus, StepStatus
from ..store import AttemptRecord, StepRecord, Store
from ..store.events import announced
from ..telemetry import Telemetry
from ..tools import (
    CompletionBook, CompletionRecord, Dispatcher, OnCancel, OnTimeout,
    OutcomeStatus, Resolution, Settle, ToolOutcome, ToolRegistry,
    load_tool_modules, outcome_for_resolution, runtime_plugin_stack, tools_in_module,
)
from ..tools.attempts import CancelSignal
from ..tools.budget import hint_for
from ..tools.clock import Clock
from ..tools.definition import RegisteredTool, ToolDefinition
from ..tools.dispatch import together
from .canonical import canonical_json
from .endings import FailTurn
from .events import Events
from .journal import RunJournal
from .outcome import Wait
from .replay import FAIL, PENDING_TIMED_OUT, Decision, attempt_record
from .programs import Source, read_source
from .ratelimits import CallLimiter, Plan, StoreGate

if TYPE_CHECKING:  # the syntax tree loads with the first compile
    from ..interp.values import Resource
    from ..lang import ast

_NO_TAILS: frozenset[str] = frozenset()
# the empty containers a lone call's journal shares instead of making its own (never
# added to: a lone call commits nothing of its own, and its starts are not durable
# until one is, when the journal makes a set of its own)
_NO_STEPS: Any = frozenset()
_NO_STARTS: Any = frozenset()
_NOTHING: Any = ()


class _Parked:
    """The answer of a call that still waits on its completion key."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PARKED"


PARKED: Any = _Parked()


class LimitParked:
    """The answer of a call whose limit parks its run instead of its next attempt (a
    retry's rate slot is later, or no global slot came free): the wait to park on."""

    __slots__ = ("wait",)

    def __init__(self, wait: Wait) -> None:
        self.wait = wait


# --------------------------------------------------------------------------- completion storage


def _record_from_row(row: dict[str, Any]) -> CompletionRecord:
    resolution = row.get("resolution")
    return CompletionRecord(
        run_id=row["run_id"], step_key=row["step_key"], waiting=bool(row.get("waiting")),
        deadline_at=row.get("deadline_at"),
        on_timeout=OnTimeout(row.get("on_timeout") or OnTimeout.ERROR_AS_RESULT.value),
        on_cancel=OnCancel(row.get("on_cancel") or OnCancel.CANCEL_EXTERNAL_WORK.value),
        module=row.get("module"), tool=row.get("tool"),
        resolution=None if resolution is None else Resolution.from_json(resolution))


class StoreCompletionStorage:
    """``CompletionStorage`` over the journal store (atomicity is the store's)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def run_accepts_completions(self, run_id: str) -> bool:
        run = await self.store.get_run(run_id)
        return run is not None and run.status != RunStatus.CANCELLED and not run.cancel_requested

    async def get(self, run_id: str, step_key: str) -> CompletionRecord | None:
        row = await self.store.completion_get(run_id, step_key)
        return None if row is None else _record_from_row(row)

    async def open_wait(self, record: CompletionRecord) -> CompletionRecord:
        row = await self.store.completion_open_wait({
            "run_id": record.run_id, "step_key": record.step_key, "deadline_at": record.deadline_at,
            "on_timeout": record.on_timeout.value, "on_cancel": record.on_cancel.value,
            "module": record.module, "tool": record.tool})
        return _record_from_row(row)

    async def settle(self, run_id: str, step_key: str, resolution: Resolution, *, now: float,
                     respect_deadline: bool, wake: bool = False) -> tuple[CompletionRecord, Settle]:
        row, verdict = await self.store.completion_settle(
            run_id, step_key, resolution.to_json(), now=now, respect_deadline=respect_deadline,
            wake_at=now if wake else None)
        return _record_from_row(row), Settle(verdict)

    async def open_waits(self, run_id: str) -> list[CompletionRecord]:
        return [_record_from_row(row) for row in await self.store.completion_open_waits(run_id)]


# --------------------------------------------------------------------------- attempt journal


ANNOUNCE_AFTER = 0.05  # s: an idempotent call running this long gets its started event


class Announcer:
    """The engine's one timer for announcing calls still running after ``after`` s.

    A timer per call put a heap entry on the event loop for every step and cancelled it a
    moment later (its pushes, pops and comparisons were about 5% of a short step's CPU).
    Here a call's start is one dict entry, its end one removal; one timer, armed for the
    oldest entry, calls back every entry whose time has come (entries are in deadline
    order: all wait the same ``after``)."""

    __slots__ = ("after", "_due", "_timer", "_loop")

    def __init__(self, after: float = ANNOUNCE_AFTER) -> None:
        self.after = after
        # callback -> when it is due: each entry's callback is a new closure, so it is
        # its own token (no token object and no tuple an entry)
        self._due: dict[Any, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the timer's

    def add(self, callback: Callable[[], None]) -> object:
        """Call ``callback`` in ``after`` s unless ``discard`` comes first; the token. Each
        entry needs a callback object of its own (one added again replaces its entry)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + self.after
        self._due[callback] = at
        if self._timer is None or self._loop is not loop:  # (an engine opened again)
            self._timer, self._loop = loop.call_at(at, self._fire), loop
        return callback

    def discard(self, token: object) -> None:
        self._due.pop(token, None)  # the timer stays: it finds nothing due, or the next

    def _fire(self) -> None:
        """Call back every entry whose time has come, then arm the timer for the next.
        The due entries are found in one pass: taking the first entry again after each
        removal rescans the removed slots at the dict's front, quadratic in a fan-out's
        thousand calls that all come due at once (25 ms of CPU a batch of 1,000)."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = self._due
        ready: list[Callable[[], None]] = []
        for callback, at in due.items():
            if at > now:
                break
            ready.append(callback)
        for callback in ready:
            if due.pop(callback, None) is not None:  # (an earlier one may have discarded it)
                callback()
        if due and self._timer is None:
            self._timer = loop.call_at(next(iter(due.values())), self._fire)


class RunAttemptJournal:
    """``AttemptJournal`` for one run's batch.

    Non-final attempts (a retry follows, or the call is pending) and durable starts
    (non-idempotent tools) are committed at once; a final attempt is buffered and written
    by the host together with its step, in one commit.
    """

    def __init__(self, journal: RunJournal, calls: dict[str, tuple[ToolCallEffect, str]],
                 tails: frozenset[str] = frozenset(),
                 announcer: Announcer | None = None) -> None:
        self.journal = journal
        self.announcer = announcer or Announcer()
        self.machine = journal.machine
        self.calls = calls  # step key -> (the call, its canonical arguments text)
        self.tails = tails  # steps of tools whose budget keeps the tail (``output_tail``)
        self.starts: dict[tuple[str, int], float] = {}
        self.durable_starts: set[tuple[str, int]] = _NO_STARTS  # a set once one is durable
        # (step, attempt) -> the announcer's token while it waits, then the write
        self._announcing: dict[tuple[str, int], object] = {}
        # calls announced at one firing of the announcer share one write (a fan-out's
        # thousand calls come due together): one task and one commit, not one each
        # (a list of its own from the firing's first call: none made for a call never announced)
        self._announced: list[tuple[str, str, float]] = _NOTHING  # while _announce_write waits
        self._announce_write: asyncio.Future[None] | None = None
        self.final: dict[str, AttemptRecord] = {}
        # In a batch of several calls each outcome is committed as soon as it is final, so
        # a crash loses only the calls still running (a lone call's outcome is held and
        # written with the run's next write, ADR 0009). A lone call's journal makes none
        # of the containers below (they are a batch's).
        self.eager = eager = len(calls) > 1
        self.committed: set[str] = set() if eager else _NO_STEPS
        # Members that end in the same turn of the event loop share one commit (a wide
        # fan-out's calls all end at once): one write, not one per member. A member does
        # not wait for it: the batch waits for all of them (``durable``) before any
        # answer is used, so a thousand members are not woken once more each.
        self._ended: list[tuple[StepRecord, AttemptRecord]] = [] if eager else _NOTHING
        self._flush: asyncio.Future[None] | None = None
        self._flushes: list[asyncio.Future[None]] = [] if eager else _NOTHING

    def _attempt(self, step_key: str, attempt: int, outcome: ToolOutcome | None,
                 at: float | None = None) -> AttemptRecord:
        return attempt_record(self.journal.run_id, step_key, attempt, outcome,
                              self.starts.get((step_key, attempt), at))

    def step(self, step_key: str, status: StepStatus, outcome: Any) -> StepRecord:
        """The call's step record with its new status (new, or the one replay found)."""
        call, text = self.calls[step_key]
        record = self.machine.tool_step(call, status, outcome, self.journal.clock.now(), text)
        if step_key in self.tails:  # said on the row: a reader without the tool shows the tail
            record.detail["tail"] = True
        return record

    async def attempt_started(self, step_key: str, attempt: int, at: float, *, durable: bool) -> None:
        self.starts[(step_key, attempt)] = at
        if durable:
            if self.durable_starts is _NO_STARTS:
                self.durable_starts = set()
            self.durable_starts.add((step_key, attempt))
            await self.journal.commit([self.step(step_key, StepStatus.STARTED, None)],
                                   [self._attempt(step_key, attempt, None, at)])
        else:  # nothing written: a call still running after a while is announced
            self._announcing[(step_key, attempt)] = self.announcer.add(
                lambda: self._announce(step_key, attempt, at))

    def _announce(self, step_key: str, attempt: int, at: float) -> None:
        call, _ = self.calls[step_key]
        known = self.machine.steps.get(step_key)  # its row number, if it has a row
        step = StepRecord(self.journal.run_id, step_key, "tool",
                          f"{call.module}.{call.operation}", status=StepStatus.STARTED,
                          seq=known.seq if known is not None else 0, created_at=at,
                          updated_at=at)
        event = announced(step, self._attempt(step_key, attempt, None, at))
        if self._announce_write is None:  # its first step comes after this firing's calls
            self._announced = [event]
            self._announce_write = asyncio.ensure_future(self._write_announced())
        else:
            self._announced.append(event)
        self._announcing[(step_key, attempt)] = self._announce_write

    async def _write_announced(self) -> None:
        events, self._announce_write = self._announced, None
        await self.journal.announce(events)

    def close(self) -> None:
        """The batch is over (or was cancelled): no announcement may come after it."""
        for pending in self._announcing.values():
            if isinstance(pending, asyncio.Future):
                pending.cancel()
            else:
                self.announcer.discard(pending)
        self._announcing.clear()
        self._announce_write = None

    async def attempt_finished(self, step_key: str, attempt: int, outcome: ToolOutcome) -> None:
        # the call's announcement is written before its outcome, or never (inline: no
        # coroutine of its own for the common case, a call never announced)
        pending = self._announcing.pop((step_key, attempt), None)
        if isinstance(pending, asyncio.Future):
            await asyncio.shield(pending)  # shared: a cancelled member cancels not the others'
        elif pending is not None:
            self.announcer._due.pop(pending, None)  # ``discard``, inline: once a call
        record = self._attempt(step_key, attempt, outcome)
        if outcome.final:
            # first attempt, nothing written for it yet, nothing beyond the outcome to keep
            record.with_step = (attempt == 1 and (step_key, 1) not in self.durable_starts
                                and not record.detail)
            if self.eager and outcome.status is not OutcomeStatus.PENDING:
                self.committed.add(step_key)
                await self._commit_ended(self.step(step_key, StepStatus.DONE, outcome.to_json()), record)
                return
            self.final[step_key] = record
            return
        status = StepStatus.PENDING if outcome.status is OutcomeStatus.PENDING else StepStatus.STARTED
        payload = outcome.to_json() if status is StepStatus.PENDING else None
        await self.journal.commit([self.step(step_key, status, payload)], [record])

    async def _commit_ended(self, step: StepRecord, record: AttemptRecord) -> None:
        """Queue the member for the commit shared by every member ending in this turn."""
        self._ended.append((step, record))
        if self._flush is None:
            self._flush = asyncio.ensure_future(self._flush_ended())
            self._flush.add_done_callback(_retrieved)  # ``durable`` may never be reached
            self._flushes.append(self._flush)

    async def durable(self) -> None:
        """Every member commit queued so far is durable; raises what a commit raised."""
        while self._flushes:
            flushes, self._flushes = self._flushes, []
            await asyncio.gather(*flushes)

    async def _flush_ended(self) -> None:
        await asyncio.sleep(0)  # the members ending in this turn of the loop join in
        ended, self._ended, self._flush = self._ended, [], None
        await self.journal.commit([step for step, _ in ended], [record for _, record in ended])


@functools.cache
def _resource_classes() -> tuple[type[Resource], type[ast.TypeName]]:
    """(``Resource``, ``ast.TypeName``), imported with the first run bound and kept (the
    syntax tree loads with the first compile; two import statements a run cost 1.5 us)."""
    from ..interp.values import Resource
    from ..lang import ast

    return Resource, ast.TypeName


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # the batch that waits for it reports it; nobody else may


# --------------------------------------------------------------------------- the runner


class ToolRunner:
    """Engine-wide: the registry, the dispatcher and the completion book, and how a run's
    tool calls are run, journaled and replayed."""

    def __init__(self, store: Store, clock: Clock, events: Events,
                 model_provider: Any = None) -> None:
        self.store = store
        self.clock = clock
        self.events = events
        self.model_provider = model_provider
        self.registry = ToolRegistry()
        self.announcer = Announcer()
        self.dispatcher: Dispatcher | None = None
        self.book: CompletionBook | None = None
        self.loaded_modules: set[str] = set()
        self._resource_map: tuple[int, dict[str, str]] | None = None
        self._plugins: Any = None
        self.telemetry: Telemetry | None = None
        # the store's limits on calls (rate, global concurrency); the engine sets it
        self.limiter: CallLimiter | None = None

    # -- registration ------------------------------------------------------------------
    def add_tool(self, item: Any) -> None:
        self.registry.add(item)

    def load(self, module_or_path: str) -> None:
        """Import a tool module (name or ``.py`` path) once and register its tools."""
        key = str(Path(module_or_path).resolve()) if module_or_path.endswith(".py") else module_or_path
        if key in self.loaded_modules:
            return
        for module in load_tool_modules([key]):
            self.registry.add(*tools_in_module(module))
        self.loaded_modules.add(key)

    def load_for_run(self, run: Any) -> None:
        """Import the tool modules the run was started with, where this machine has them
        (a worker elsewhere brings its own with ``--tools``)."""
        self.load_modules(run.meta.get("tool_modules", []))

    def load_modules(self, modules: list[str]) -> None:
        """Import these tool modules where this machine has them (a missing one is
        reported as missing tools when a run needs them)."""
        for module in modules:
            if module in self.loaded_modules or (module.endswith(".py")
                                                 and not os.path.exists(module)):
                continue
            try:
                self.load(module)
            except LashflowError:
                continue  # reported as missing tools when the run is driven

    def read_source(self, source_or_path: Any) -> Source:
        """Source text, from a file or as given; a file's ``.py`` beside it is loaded."""
        source = read_source(source_or_path)
        if source.path is not None:
            beside = Path(source.path).with_suffix(".py")
            if beside.exists():
                self.load(str(beside))
        return source

    def catalog(self) -> Catalog:
        return Catalog.of(self.registry.definitions())

    def _resources(self) -> dict[str, str]:
        """Resource type name -> tool module, rebuilt only when tools were added (it is
        read for every run created and every run driven)."""
        if self._resource_map is None or self._resource_map[0] != len(self.registry):
            self._resource_map = (len(self.registry), {
                resource_type_name(d.module): d.module for d in self.registry.definitions()})
        return self._resource_map[1]

    def resource_types(self) -> dict[str, str]:
        """Resource type name -> the tool module whose authority it is."""
        return dict(self._resources())

    def validate_plugins(self, plugins: Any) -> None:
        self._plugins = (plugins or runtime_plugin_stack()).validate()

    async def open(self) -> None:
        secret = await self.store.secret()
        self.book = CompletionBook(StoreCompletionStorage(self.store), secret, clock=self.clock,
                                   cancel_external=self.registry.cancel_external)
        self.dispatcher = Dispatcher(self.registry, clock=self.clock, plugins=self._plugins,
                                     completions=None, secret=secret,
                                     model_provider=self.model_provider, project_results=False)
        self.dispatcher.keys = self.book.keys
        self.dispatcher.telemetry = self.telemetry

    def use_telemetry(self, telemetry: Telemetry | None) -> None:
        """Report calls to ``telemetry`` (spans and counters), or stop reporting."""
        self.telemetry = telemetry
        if self.dispatcher is not None:
            self.dispatcher.telemetry = telemetry
        if self.limiter is not None:
            self.limiter.metrics = telemetry.metrics if telemetry is not None else None

    def bind_resources(self, module: Any, process: str, args: dict[str, Any]) -> dict[str, Any]:
        """A parameter typed with a resource type (``t: Tools``) given as a module name."""
        decl = module.process(process)
        if decl is None:
            return args
        by_type = self._resources()
        if not by_type:
            return args
        resource, type_name = _resource_classes()
        for param in decl.params:
            if isinstance(param.type, type_name) and param.type.name in by_type:
                value = args.get(param.name)
                if isinstance(value, str):
                    args[param.name] = resource(param.type.name, value)
        return args

    def project(self, value: Any, *, tool: str | None = None, run_id: str | None = None,
                step_key: str | None = None, tail: bool = False) -> str:
        """``value`` through the output budget, as the run history shows it: a step
        recorded with the tail flag (``tail``), or of a tool registered here with
        ``output_tail``, keeps its tail, and the hint names the real ``lashflow output``
        command when the step is known."""
        assert self.dispatcher is not None
        if not tail and tool is not None and "." in tool:
            module, _, name = tool.rpartition(".")
            if (module, name) in self.registry:
                tail = self.registry.get(module, name).definition.output_tail
        if run_id is not None and step_key is not None:
            return self.dispatcher.projector.project(value, tail=tail,
                                                     hint=hint_for(run_id, step_key))
        return self.dispatcher.projector.project(value, tail=tail)

    # -- running calls -------------------------------------------------------------------
    def idempotent(self, call: ToolCallEffect) -> bool:
        return self.registry.get(call.module, call.operation).definition.idempotent

    def pauses_when_exhausted(self, call: ToolCallEffect, run_default: str | None) -> bool:
        """Whether running out of retries pauses the run: the tool says so, or the run
        (or its process) was started with ``on_exhausted="pause"``."""
        found = self.registry.get(call.module, call.operation).definition.on_exhausted
        return found == "pause" or run_default == "pause"

    def limited(self, calls: list[tuple[ToolCallEffect, Any]]) -> list[tuple[str, ToolDefinition]]:
        """The calls of a batch (each with its decision) whose tools are rate-limited:
        (step key, definition)."""
        if self.limiter is None or not self.registry.limited:
            return []
        return [(call.step, definition) for call, _ in calls
                if (definition := self.registry.get(call.module, call.operation).definition
                    ).bucket is not None]

    async def plan_limits(self, run_id: str, limited: list[tuple[str, ToolDefinition]],
                          reserved: dict[str, float]) -> Plan:
        """Rate slots for the ``limited`` calls of a batch; see ``ratelimits``."""
        if not limited or self.limiter is None:
            return Plan()
        return await self.limiter.plan(run_id, limited, reserved)

    async def run_calls(self, journal: RunJournal, cancel: CancelSignal,
                        calls: list[tuple[ToolCallEffect, Decision]],
                        slots: dict[str, float] | None = None) -> list[Any]:
        """Run fresh (or interrupted) calls as one concurrent batch, each from the attempt
        its decision names; answers are result wrappers (JSON) or ``PARKED``. ``slots``:
        when rate-limited calls may start (``plan_limits``)."""
        registry = self.registry
        assert self.dispatcher is not None and self.book is not None
        run_id = journal.run_id
        by_step: dict[str, tuple[ToolCallEffect, str]] = {}
        planned: list[tuple[RegisteredTool, ToolCallEffect, int, StoreGate | None]] = []
        interrupted: list[AttemptRecord] = []
        tails: set[str] = set()
        gates: dict[str, StoreGate] = {}  # calls with limits held in the store
        limiter = self.limiter if registry.limited else None  # (no tool has a limit)
        for call, decision in calls:
            by_step[call.step] = (call, canonical_json(call.input))
            if decision.attempts:
                interrupted += decision.attempts
            entry = registry.get(call.module, call.operation)
            definition = entry.definition
            if definition.output_tail:
                tails.add(call.step)
            gate = None if limiter is None else limiter.gate(
                definition, run_id, call.step, journal.generation, (slots or {}).get(call.step))
            if gate is not None:
                gates[call.step] = gate
            planned.append((entry, call, decision.attempt, gate))
        if interrupted:  # the journal shows the attempt a crash cut short
            await journal.commit([], interrupted)
        attempts_journal = RunAttemptJournal(journal, by_step, frozenset(tails) if tails else _NO_TAILS,
                                             self.announcer)
        if self.events.listeners:
            self.events.notify({"type": "tools", "run_id": run_id,
                                "tools": [f"{call.module}.{call.operation}"
                                          for _, call, _, _ in planned]})
        try:
            if attempts_journal.eager:
                # While several calls are in flight no commit may block the loop they
                # share: a second registered writer sends every commit through the store's
                # writer thread.
                with self.store.writing():
                    outcomes = await together(self._outcomes(planned, attempts_journal, cancel))
                    await attempts_journal.durable()  # before any member's answer is used
            elif planned:  # a lone call commits nothing of its own (its outcome is held, ADR 0009)
                entry, call, attempt, gate = planned[0]  # in this task: no ``together``
                outcomes = [await self.dispatcher.outcome(entry, call.input, call.step, run_id,
                                                          attempts_journal, cancel, attempt, gate)]
            else:  # every call of the batch parked on its rate slot
                outcomes = []
        finally:
            attempts_journal.close()
        answers: list[Any] = []
        steps: list[StepRecord] = []
        attempts: list[AttemptRecord] = []
        pending: list[tuple[int, str, ToolOutcome]] = []
        for index, ((_, call, _, _), outcome) in enumerate(zip(planned, outcomes)):
            step_key = call.step
            if gates and (gate := gates.get(step_key)) and gate.parked is not None:
                answers.append(LimitParked(gate.parked))  # nothing to record: no attempt ran
                continue
            if outcome.status is OutcomeStatus.PENDING:
                answers.append(PARKED)
                pending.append((index, step_key, outcome))
                continue
            if outcome.status is OutcomeStatus.EXHAUSTED:
                journal.exhausted[step_key] = outcome.message or str(outcome.code)
            if step_key not in attempts_journal.committed:
                steps.append(attempts_journal.step(step_key, StepStatus.DONE, outcome.to_json()))
                final = attempts_journal.final.get(step_key)
                if final is not None:
                    attempts.append(final)
            if outcome.fail_run:  # (``tool_answer``'s two cases, without its Decision)
                raise FailTurn(PENDING_TIMED_OUT)
            answers.append(outcome.to_wrapper())
        if pending:
            await journal.commit(steps, attempts)  # before the waits open
        elif steps or attempts:
            journal.machine.hold(steps, attempts)  # written before the next effect (ADR 0009)
        for index, step_key, outcome in pending:
            answers[index] = await self._begin_wait(journal, step_key, outcome)
        return answers

    def _outcomes(self, planned: list[tuple[RegisteredTool, ToolCallEffect, int, StoreGate | None]],
                  journal: RunAttemptJournal, cancel: CancelSignal) -> list[Any]:
        """The outcome coroutines of a batch's calls (each from its first attempt)."""
        assert self.dispatcher is not None
        outcome, run_id = self.dispatcher.outcome, journal.journal.run_id
        return [outcome(entry, call.input, call.step, run_id, journal, cancel, attempt, gate)
                for entry, call, attempt, gate in planned]

    @staticmethod
    def _answer(decision: Decision) -> Any:
        if decision.action is FAIL:
            raise FailTurn(decision.message)
        return decision.answer

    async def _begin_wait(self, journal: RunJournal, step_key: str, outcome: ToolOutcome) -> Any:
        assert self.book is not None
        module, _, name = (journal.machine.steps[step_key].tool or ".").partition(".")
        resolution = await self.book.begin_wait_for(outcome, journal.run_id, step_key, module, name)
        if resolution is None:
            return PARKED
        return await self._settle(journal, step_key, outcome, resolution)

    async def _settle(self, journal: RunJournal, step_key: str, pending: ToolOutcome,
                      resolution: Resolution) -> Any:
        final = outcome_for_resolution(pending, resolution)
        if self.telemetry is not None and self.telemetry.tracing is not None:
            self.telemetry.tracing.wait_resolved(step_key, final.status.value)
        decision = journal.machine.resolved(step_key, final, pending.started_at,
                                            journal.clock.now())
        await journal.commit(decision.writes, decision.attempts)
        return self._answer(decision)

    async def poll(self, journal: RunJournal, step_key: str) -> Any:
        """A pending tool step: its answer if its key was resolved, else ``PARKED``."""
        assert self.book is not None
        resolution = await self.book.poll(journal.run_id, step_key)
        if resolution is None:
            return PARKED
        outcome = ToolOutcome.from_json(journal.machine.steps[step_key].outcome)
        return await self._settle(journal, step_key, outcome, resolution)

    # -- outside events ------------------------------------------------------------------
    async def deliver_completion(self, key: str, result: Any) -> str:
        """Resolve ``key`` (first writer wins); returns the run id it belongs to."""
        assert self.book is not None
        await self.book.resolve(key, result)
        ids = self.book.keys.verify(key)
        assert ids is not None
        return ids[0]

    async def completion_of(self, key: str) -> tuple[str, CompletionRecord | None] | None:
        """(run id, the key's row) for a genuine key of a run that still takes
        completions; None for a forged or unknown key or a cancelled run (one answer)."""
        assert self.book is not None
        ids = await self.book.owner(key)
        if ids is None:
            return None
        return ids[0], await self.book.storage.get(*ids)

    def run_of(self, key: str) -> str:
        """The run id a genuine completion key names."""
        assert self.book is not None
        ids = self.book.keys.verify(key)
        assert ids is not None
        return ids[0]

    def step_of(self, key: str) -> str:
        """The step key a genuine completion key names."""
        assert self.book is not None
        ids = self.book.keys.verify(key)
        assert ids is not None
        return ids[1]

    def key_for(self, run_id: str, step_key: str) -> str:
        assert self.book is not None
        return self.book.key_for(run_id, step_key)

    async def cancel_pending(self, journal: RunJournal) -> tuple[list[StepRecord], list[AttemptRecord]]:
        """A cancelled run: every open wait follows its ``on_cancel``, and each pending
        tool step is closed with the outcome that won its key (the cancel, or a
        resolution that came first), so the journal never leaves it ``pending``.
        Returns the step and attempt records for the run's final commit."""
        assert self.book is not None
        resolutions = await self.book.cancel_run(journal.run_id)
        steps: list[StepRecord] = []
        attempts: list[AttemptRecord] = []
        for record in journal.machine.pending_tools():
            resolution = (resolutions.get(record.step_key)
                          or await self.book.cancel_wait(journal.run_id, record.step_key))
            if resolution is None:
                continue
            outcome = ToolOutcome.from_json(record.outcome)
            final = outcome_for_resolution(outcome, resolution)
            decision = journal.machine.resolved(record.step_key, final, final.started_at,
                                                journal.clock.now())
            steps += decision.writes
            attempts += decision.attempts
        return steps, attempts


__all__ = ["PARKED", "LimitParked", "RunAttemptJournal", "StoreCompletionStorage", "ToolRunner"]
