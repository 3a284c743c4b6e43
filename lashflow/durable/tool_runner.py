"""The durable host's side of the tool layer: dispatch, attempt journaling, completions.

The tool layer (``lashflow.tools``) knows nothing of storage; this module backs its two
injected interfaces with the store: ``AttemptJournal`` (one journal entry per attempt)
and ``CompletionStorage`` (first-writer-wins resolution of completion keys).

Journal writes per step are kept to one commit for the common case: an idempotent tool's
attempt start is written lazily with its final outcome, in the same commit as the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store import AttemptRecord, StepRecord, Store
from ..tools import (
    CompletionBook, CompletionRecord, DispatchCall, Dispatcher, OnCancel, OnTimeout,
    OutcomeStatus, Resolution, Settle, ToolOutcome, ToolRegistry,
    load_tool_modules, outcome_for_resolution, runtime_plugin_stack, tools_in_module,
)
from .canonical import canonical_json
from .host import PARK, FailTurn, NeedsAttention

if TYPE_CHECKING:
    from ..interp.effects import ToolCall as ToolCallEffect
    from .host import DurableHost
    from .engine import Engine


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
        return run is not None and run.status != "cancelled" and not run.cancel_requested

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
                     respect_deadline: bool) -> tuple[CompletionRecord, Settle]:
        row, verdict = await self.store.completion_settle(
            run_id, step_key, resolution.to_json(), now=now, respect_deadline=respect_deadline)
        return _record_from_row(row), Settle(verdict)

    async def open_waits(self, run_id: str) -> list[CompletionRecord]:
        return [_record_from_row(row) for row in await self.store.completion_open_waits(run_id)]


# --------------------------------------------------------------------------- attempt journal


class RunAttemptJournal:
    """``AttemptJournal`` for one run's batch.

    Non-final attempts (a retry follows, or the call is pending) and durable starts
    (non-idempotent tools) are committed at once; a final attempt is buffered and written
    by the host together with its step, in one commit.
    """

    def __init__(self, host: "DurableHost", tools: dict[str, tuple[str, str, Any]]) -> None:
        self.host = host
        self.tools = tools  # step key -> (qualified tool name, canonical args text, args)
        self.starts: dict[tuple[str, int], float] = {}
        self.durable_starts: set[tuple[str, int]] = set()
        self.final: dict[str, AttemptRecord] = {}

    def _attempt(self, step_key: str, attempt: int, outcome: ToolOutcome | None,
                 at: float | None = None) -> AttemptRecord:
        started = self.starts.get((step_key, attempt), at)
        if outcome is None:
            return AttemptRecord(self.host.run_id, step_key, attempt, "started", started_at=started)
        status = outcome.status.value
        if outcome.retry_after is not None:
            status = "failed"
        detail: dict[str, Any] = {}
        if outcome.usage:
            detail["usage"] = dict(outcome.usage)
        if outcome.traceback:
            detail["traceback"] = outcome.traceback
        return AttemptRecord(self.host.run_id, step_key, attempt, status, outcome.code,
                             outcome.message or None, detail,
                             outcome.started_at if outcome.started_at is not None else started,
                             outcome.finished_at)

    def _step(self, step_key: str, status: str, outcome: Any) -> StepRecord:
        existing = self.host.journal.get(step_key)
        if existing is not None:
            existing.status, existing.outcome = status, outcome
            existing.updated_at = self.host.engine.clock.now()
            return existing
        tool, text, args = self.tools[step_key]
        return self.host.new_step(step_key, "tool", tool, args, status, outcome, args_text=text)

    async def attempt_started(self, step_key: str, attempt: int, at: float, *, durable: bool) -> None:
        self.starts[(step_key, attempt)] = at
        if durable:
            self.durable_starts.add((step_key, attempt))
            await self.host.commit([self._step(step_key, "started", None)],
                                   [self._attempt(step_key, attempt, None, at)])

    async def attempt_finished(self, step_key: str, attempt: int, outcome: ToolOutcome) -> None:
        record = self._attempt(step_key, attempt, outcome)
        if outcome.final:
            # first attempt, nothing written for it yet, nothing beyond the outcome to keep
            record.with_step = (attempt == 1 and (step_key, 1) not in self.durable_starts
                                and not record.detail)
            self.final[step_key] = record
            return
        status = "pending" if outcome.status is OutcomeStatus.PENDING else "started"
        payload = outcome.to_json() if status == "pending" else None
        await self.host.commit([self._step(step_key, status, payload)], [record])


# --------------------------------------------------------------------------- the runner


class ToolRunner:
    """Engine-wide: the registry, the dispatcher and the completion book."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.registry = ToolRegistry()
        self.dispatcher: Dispatcher | None = None
        self.book: CompletionBook | None = None
        self.last_delivered_run: str | None = None
        self._resource_map: tuple[int, dict[str, str]] | None = None
        self._plugins = None

    # -- registration ------------------------------------------------------------------
    def add_tool(self, item: Any) -> None:
        self.registry.add(item)

    def load_module(self, spec: str) -> None:
        for module in load_tool_modules([spec]):
            self.registry.add(*tools_in_module(module))

    def catalog(self) -> Any:
        return self.registry.catalog()

    def _resources(self) -> dict[str, str]:
        """Resource type name -> tool module, rebuilt only when tools were added (it is
        read for every run created and every run driven)."""
        if self._resource_map is None or self._resource_map[0] != len(self.registry):
            from ..interp.values import resource_type_for

            self._resource_map = (len(self.registry), {
                resource_type_for(d.module): d.module for d in self.registry.definitions()})
        return self._resource_map[1]

    def resource_types(self) -> set[str]:
        return set(self._resources())

    def validate_plugins(self, plugins: Any) -> None:
        self._plugins = (plugins or runtime_plugin_stack()).validate()

    async def open(self) -> None:
        engine = self.engine
        secret = await engine.store.secret()
        self.book = CompletionBook(StoreCompletionStorage(engine.store), secret, clock=engine.clock,
                                   cancel_external=self.registry.cancel_external)
        self.dispatcher = Dispatcher(self.registry, clock=engine.clock, plugins=self._plugins,
                                     completions=None, secret=secret,
                                     model_provider=engine.model_provider, project_results=False)
        self.dispatcher.keys = self.book.keys

    def bind_resources(self, module: Any, process: str, args: dict[str, Any]) -> dict[str, Any]:
        """A parameter typed with a resource type (``t: Tools``) given as a module name."""
        decl = module.process(process)
        if decl is None:
            return args
        by_type = self._resources()
        if not by_type:
            return args
        from ..lang import ast
        from ..interp.values import Resource

        for param in decl.params:
            if isinstance(param.type, ast.TypeName) and param.type.name in by_type:
                value = args.get(param.name)
                if isinstance(value, str):
                    args[param.name] = Resource(param.type.name, value)
        return args

    def project(self, value: Any) -> str:
        assert self.dispatcher is not None
        if isinstance(value, str):
            return self.dispatcher.projector.project(value)
        return self.dispatcher.projector.project(value)

    # -- running calls -------------------------------------------------------------------
    async def run_calls(self, host: "DurableHost",
                        calls: list[tuple["ToolCallEffect", Any, Any]]) -> list[Any]:
        """Run fresh (or interrupted) calls as one concurrent batch; answers are result
        wrappers (JSON) or ``PARK``. Each call is ``(effect, json payload, journal record)``."""
        assert self.dispatcher is not None and self.book is not None
        tools: dict[str, tuple[str, str, Any]] = {}
        planned: list[DispatchCall] = []
        interrupted: list[AttemptRecord] = []
        for effect, payload, record in calls:
            qualified = f"{effect.module}.{effect.operation}"
            tools[effect.step] = (qualified, canonical_json(payload), payload)
            first = 1
            if record is not None:
                first = self._next_attempt(host, effect, record)
                interrupted += [a for a in host.attempts.get(effect.step, [])
                                if a.status == "interrupted"]
            planned.append(DispatchCall(effect.module, effect.operation, payload, effect.step, first))
        if interrupted:  # SPEC 4.3: the journal shows the attempt a crash cut short
            await host.commit([], interrupted)
        journal = RunAttemptJournal(host, tools)
        if self.engine.listeners:
            self.engine.notify({"type": "tools", "run_id": host.run_id,
                                "tools": [tools[c.step_key][0] for c in planned]})
        results = await self.dispatcher.batch(planned, run_id=host.run_id, journal=journal,
                                              cancel=host.cancel_event)
        answers: list[Any] = []
        steps: list[StepRecord] = []
        attempts: list[AttemptRecord] = []
        pending: list[tuple[int, Any]] = []
        for index, result in enumerate(results):
            outcome = result.outcome
            if outcome.status is OutcomeStatus.PENDING:
                answers.append(PARK)
                pending.append((index, result))
                continue
            steps.append(journal._step(result.step_key, "done", outcome.to_json()))
            final = journal.final.get(result.step_key)
            if final is not None:
                attempts.append(final)
            answers.append(self._answer(outcome))
        if pending:
            await host.commit(steps, attempts)  # before the waits open
        elif steps or attempts:
            host.hold(steps, attempts)  # written before the next effect (ADR 0009)
        for index, result in pending:
            answer = await self._begin_wait(host, result.step_key, result.outcome)
            answers[index] = answer
        return answers

    def _next_attempt(self, host: "DurableHost", effect: Any, record: Any) -> int:
        """A step found ``started``: its last attempt was interrupted by a crash."""
        entry = self.registry.get(effect.module, effect.operation)
        rows = host.attempts.get(effect.step, [])
        last = max((a.attempt for a in rows), default=0)
        interrupted = [a for a in rows if a.status == "started"]
        if interrupted and not entry.definition.idempotent and not host.ctx.retry_interrupted:
            raise NeedsAttention(
                f"step {effect.step} ({effect.module}.{effect.operation}) was interrupted during "
                f"attempt {last}; the tool is not idempotent, so it is not run again on its own. "
                f"Run `lashflow resume {host.run_id} --retry-interrupted` to retry it",
                step=effect.step)
        for row in interrupted:
            row.status = "interrupted"
        return last + 1

    @staticmethod
    def _answer(outcome: ToolOutcome) -> Any:
        if outcome.fail_run:
            raise FailTurn("pending tool completion timed out")
        return outcome.to_wrapper()

    async def _begin_wait(self, host: "DurableHost", step_key: str, outcome: ToolOutcome) -> Any:
        assert self.book is not None
        module, _, name = (host.journal[step_key].tool or ".").partition(".")
        resolution = await self.book.begin_wait_for(outcome, host.run_id, step_key, module, name)
        if resolution is None:
            return PARK
        return await self._settle(host, step_key, outcome, resolution)

    async def _settle(self, host: "DurableHost", step_key: str, pending: ToolOutcome,
                      resolution: Resolution) -> Any:
        final = outcome_for_resolution(pending, resolution)
        record = host.journal[step_key]
        record.status, record.outcome = "done", final.to_json()
        record.updated_at = self.engine.clock.now()
        attempt = AttemptRecord(host.run_id, step_key, final.attempts, final.status.value,
                                final.code, final.message or None, {}, pending.started_at,
                                final.finished_at)
        await host.commit([record], [attempt])
        return self._answer(final)

    async def replay(self, host: "DurableHost", record: StepRecord) -> Any:
        """A recorded tool step: its answer, or ``PARK`` if it still waits on its key."""
        outcome = ToolOutcome.from_json(record.outcome)
        if record.status == "done":
            return self._answer(outcome)
        assert self.book is not None
        resolution = await self.book.poll(host.run_id, record.step_key)
        if resolution is None:
            return PARK
        return await self._settle(host, record.step_key, outcome, resolution)

    # -- outside events ------------------------------------------------------------------
    async def deliver_completion(self, key: str, result: Any) -> str:
        """Resolve ``key`` (first writer wins); returns the run id it belongs to."""
        assert self.book is not None
        await self.book.resolve(key, result)
        ids = self.book.keys.verify(key)
        assert ids is not None
        self.last_delivered_run = ids[0]
        return ids[0]

    def key_for(self, run_id: str, step_key: str) -> str:
        assert self.book is not None
        return self.book.key_for(run_id, step_key)

    async def cancel_pending(self, host: "DurableHost") -> None:
        """A cancelled run: every open wait follows its ``on_cancel``."""
        assert self.book is not None
        await self.book.cancel_run(host.run_id)


__all__ = ["ToolRunner", "StoreCompletionStorage", "RunAttemptJournal"]
