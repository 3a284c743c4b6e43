"""The batch dispatcher: every call of a batch starts at once, results come
back in emission order.

The dispatcher is engine-wide (it owns the per-tool ``max_concurrency`` semaphores);
the run's journal, run id and cancel signal are passed per batch, so the durable host
can call it for the interpreter's ``ToolCall`` / ``ToolBatch`` effects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from lashflow.tools.attempts import AttemptJournal, CallEnv, NullJournal, Slots, run_attempts
from lashflow.tools.budget import ToolOutputBudgetConfig, hint_for
from lashflow.tools.clock import Clock, RealClock
from lashflow.tools.completion import CompletionBook, outcome_for_resolution
from lashflow.tools.definition import RegisteredTool
from lashflow.tools.keys import KeyRing
from lashflow.tools.limits import CallGate
from lashflow.tools.models import ModelProvider
from lashflow.tools.outcome import OutcomeStatus, ToolOutcome
from lashflow.tools.plugins import PluginStack, ToolOutputBudgetPluginFactory, runtime_plugin_stack
from lashflow.tools.registry import ToolRegistry

from ..slotted import Frozen

__all__ = ["DispatchCall", "DispatchResult", "Dispatcher", "together"]

T = TypeVar("T")


class DispatchCall(Frozen):
    """One call of a batch. ``step_key`` is fixed here, at batch formation (empty: the
    call's index); ``first_attempt`` comes from the journal (1 for a fresh step)."""

    __slots__ = ("module", "name", "input", "step_key", "first_attempt", "gate")
    module: str
    name: str
    input: Any
    step_key: str
    first_attempt: int
    gate: CallGate | None

    def __init__(
            self,
            module: str,
            name: str,
            input: Any = None,
            step_key: str = "",
            first_attempt: int = 1,
            gate: CallGate | None = None,  # the store's limits its attempts pass (durable host)
    ) -> None:
        setter = object.__setattr__
        setter(self, "module", module)
        setter(self, "name", name)
        setter(self, "input", input)
        setter(self, "step_key", step_key)
        setter(self, "first_attempt", first_attempt)
        setter(self, "gate", gate)


class DispatchResult(Frozen):
    """A call's full ``outcome`` (for the journal) and its budgeted ``projected`` text
    (None while pending)."""

    __slots__ = ("step_key", "module", "name", "outcome", "projected")
    step_key: str
    module: str
    name: str
    outcome: ToolOutcome
    projected: str | None

    def __init__(
            self,
            step_key: str,
            module: str,
            name: str,
            outcome: ToolOutcome,
            projected: str | None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "step_key", step_key)
        setter(self, "module", module)
        setter(self, "name", name)
        setter(self, "outcome", outcome)
        setter(self, "projected", projected)

    @property
    def wrapper(self) -> dict[str, Any]:
        return self.outcome.to_wrapper()


async def together(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``calls`` at once (a lone one in the caller's own task); their results in
    order. If one raises, the others are cancelled and awaited before it propagates."""
    if len(calls) == 1:
        return [await calls[0]]
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class Dispatcher:
    """Runs tool calls: attempts, retries, pending waits, projection.

    ``completions``: a ``CompletionBook`` (its keys sign completion keys; pending calls
    are registered with it). Without one, keys are signed under ``secret`` (or an
    ephemeral secret) and pending outcomes are returned as they are.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        clock: Clock | None = None,
        budget: ToolOutputBudgetConfig | None = None,
        plugins: PluginStack | None = None,
        completions: CompletionBook | None = None,
        secret: bytes | None = None,
        model_provider: ModelProvider | None = None,
        max_concurrency: int | None = None,
        cancel_grace: float = 0.05,
        project_results: bool = True,
    ) -> None:
        if plugins is None:
            plugins = runtime_plugin_stack()
            if budget is not None:
                plugins.replace(ToolOutputBudgetPluginFactory(budget))
        self.registry = registry
        self.clock = clock or RealClock()
        self.projector = plugins.validate().projector()
        self.completions = completions
        self.keys = completions.keys if completions is not None else KeyRing(secret)
        self.model_provider = model_provider
        self.cancel_grace = cancel_grace
        self.project_results = project_results  # False: callers project when they show
        self._global = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        # spans and counters of the engine's ``Telemetry``, or None (nothing reported)
        self.telemetry: Any = None
        self._per_tool: dict[tuple[str, str], asyncio.Semaphore] = {}

    def _slots(self, entry: RegisteredTool) -> Slots | None:
        """The concurrency slots a call of ``entry`` holds (None: it is limited by none)."""
        limit = entry.definition.max_concurrency
        if limit is None and self._global is None:
            return None
        found: list[asyncio.Semaphore] = []
        if limit is not None:
            key = (entry.definition.module, entry.definition.name)
            semaphore = self._per_tool.get(key)
            if semaphore is None:
                semaphore = self._per_tool[key] = asyncio.Semaphore(limit)
            found.append(semaphore)
        if self._global is not None:
            found.append(self._global)
        return Slots(*found)

    async def batch(
        self,
        calls: Iterable[DispatchCall],
        *,
        run_id: str = "local",
        journal: AttemptJournal | None = None,
        cancel: asyncio.Event | None = None,
        wait_pending: bool = False,
    ) -> list[DispatchResult]:
        """Start every call now; return their results in the order given.

        Unknown tools raise ``LashflowError(code="unknown_tool")`` before anything runs.
        ``cancel``: once set, each unfinished call gets ``cancel_grace`` seconds, then is
        reported cancelled ("tool call cancelled"). ``wait_pending``: wait in-process on
        the completion book instead of returning pending outcomes.
        """
        journal = journal or NullJournal()
        if isinstance(calls, list) and len(calls) == 1 and calls[0].step_key:
            # nothing to overlap, no key to share: no task, no gather, no bookkeeping
            call = calls[0]
            entry = self.registry.get(call.module, call.name)
            return [await self._run(entry, call, run_id, journal, cancel, wait_pending)]
        planned = [
            (call if call.step_key else DispatchCall(call.module, call.name, call.input, str(i),
                                                     call.first_attempt, call.gate),
             self.registry.get(call.module, call.name))
            for i, call in enumerate(calls)
        ]
        if len({call.step_key for call, _ in planned}) != len(planned):
            raise ValueError("two calls of one batch share a step key")
        return await together([self._run(entry, call, run_id, journal, cancel, wait_pending)
                               for call, entry in planned])

    async def call(self, call: DispatchCall, **options: Any) -> DispatchResult:
        """One call (a batch of one)."""
        return (await self.batch([call], **options))[0]

    async def _run(
        self,
        entry: RegisteredTool,
        call: DispatchCall,
        run_id: str,
        journal: AttemptJournal,
        cancel: asyncio.Event | None,
        wait_pending: bool,
    ) -> DispatchResult:
        outcome = await self.outcome(entry, call.input, call.step_key, run_id, journal, cancel,
                                     call.first_attempt, call.gate, wait_pending)
        d = entry.definition
        projected = (self.project(outcome, tail=d.output_tail, run_id=run_id, step_key=call.step_key)
                     if self.project_results else None)
        return DispatchResult(call.step_key, d.module, d.name, outcome, projected)

    async def outcome(
        self,
        entry: RegisteredTool,
        input: Any,
        step_key: str,
        run_id: str,
        journal: AttemptJournal,
        cancel: asyncio.Event | None,
        first_attempt: int = 1,
        gate: CallGate | None = None,
        wait_pending: bool = False,
    ) -> ToolOutcome:
        """One call of ``entry`` (looked up by the caller) to its outcome, unprojected.
        The durable host runs its calls through this: no ``DispatchCall`` to describe a
        call, no ``DispatchResult`` to carry its outcome back (two frozen objects a call)."""
        env = CallEnv(run_id, step_key, self.keys, self.model_provider, self.projector, cancel,
                      self._slots(entry), self.cancel_grace, self.telemetry, gate)
        if self.telemetry is None:
            outcome = await run_attempts(entry, input, env, journal, self.clock, first_attempt)
        else:
            outcome = await self._run_reported(entry, input, first_attempt, env, journal)
        if outcome.status is OutcomeStatus.PENDING and self.completions is not None:
            book = self.completions
            d = entry.definition
            resolution = await book.begin_wait_for(outcome, run_id, step_key, d.module, d.name)
            if resolution is None and wait_pending:
                resolution = await book.wait(run_id, step_key, cancel=cancel)
            if resolution is not None:
                outcome = outcome_for_resolution(outcome, resolution)
                await journal.attempt_finished(step_key, outcome.attempts, outcome)
        return outcome

    async def _run_reported(self, entry: RegisteredTool, input: Any, first_attempt: int,
                            env: CallEnv, journal: AttemptJournal) -> ToolOutcome:
        """``run_attempts`` inside the step's span, counted by its outcome."""
        telemetry = self.telemetry
        tool = f"{entry.definition.module}.{entry.definition.name}"
        tracing = telemetry.tracing
        if tracing is None:
            outcome = await run_attempts(entry, input, env, journal, self.clock, first_attempt)
        else:
            with tracing.step(env.run_id, env.step_key, tool) as span:
                outcome = await run_attempts(entry, input, env, journal, self.clock, first_attempt)
                tracing.step_ended(span, outcome.status.value, outcome.attempts)
        if telemetry.metrics is not None:
            telemetry.metrics.step(tool, outcome.status.value)
        return outcome

    def project(self, outcome: ToolOutcome, *, tail: bool = False, run_id: str = "RUN", step_key: str = "STEP") -> str | None:
        """The budgeted text of an outcome; failures and cancellations pass whole."""
        if outcome.status is OutcomeStatus.PENDING:
            return None
        if outcome.status is OutcomeStatus.OK:
            return self.projector.project(outcome.value, tail=tail, hint=hint_for(run_id, step_key))
        return outcome.message

    async def cancel_external(self, module: str, name: str, key: str) -> bool:
        return await self.registry.cancel_external(module, name, key)
