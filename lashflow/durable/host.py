"""The durable host: the interpreter's effect seam backed by the journal.

Every effect has a step key. If the journal (read once per resume) holds the step's
outcome, the host returns it without running anything; otherwise it runs the effect for
real and commits its outcome before the interpreter moves on. Waits (completion keys,
sleeps, signals, child runs) raise ``Parked``: the run stops where it stands and is
re-driven later by replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LashflowError
from ..store import AttemptRecord, Commit, StepRecord
from ..tools.attempts import CancelSignal
from ..interp import effects as fx
from .canonical import canonical_json, diff_paths, digest, digest_text
from ..interp.errors import LashRuntimeError
from .outcome import Wait
from ..interp.values import from_json, to_json

if TYPE_CHECKING:
    from .engine import Engine, _RunContext

MAX_DETAIL_ARGS = 4096  # arguments above this size are kept as a hash only


class ReplayMismatch(LashflowError):
    code = "replay_mismatch"


class NeedsAttention(LashflowError):
    code = "needs_attention"


class RunCancelled(LashflowError):
    code = "cancelled"


class Drained(LashflowError):
    """The worker is shutting down: stop at this effect boundary, keep the journal, hand
    the run back to the queue."""

    code = "drained"


class FailTurn(LashflowError):
    """A pending completion timed out with ``OnTimeout.FAIL_TURN``: the run fails."""

    code = "tool_completion_timeout"


class DurableHost:
    """Performs one run's effects against the journal. One instance per drive."""

    def __init__(self, engine: "Engine", ctx: "_RunContext", steps: list[StepRecord],
                 attempts: list[AttemptRecord]) -> None:
        self.engine = engine
        self.ctx = ctx
        self.run_id = ctx.run.run_id
        self.journal: dict[str, StepRecord] = {step.step_key: step for step in steps}
        self.attempts: dict[str, list[AttemptRecord]] = {}
        for attempt in attempts:
            self.attempts.setdefault(attempt.step_key, []).append(attempt)
        self.seq = max((step.seq for step in steps), default=0) + 1
        self.prints: list[str] = []
        self.cancel_event = CancelSignal()
        if ctx.cancel_requested:
            self.cancel_event.set()
        self.effects = 0
        self.steps_done = 0
        # Outcomes of the last tool batch, not yet written: they go with the run's next
        # write, which comes before its next effect or at its end (ADR 0009).
        self._held_steps: list[StepRecord] = []
        self._held_attempts: list[AttemptRecord] = []

    # -- journal helpers -----------------------------------------------------------------
    def new_step(self, key: str, kind: str, tool: str | None, args: Any, status: str,
                  outcome: Any, detail: dict[str, Any] | None = None, *,
                  args_text: str | None = None) -> StepRecord:
        now = self.engine.clock.now()
        detail = dict(detail or {})
        args_hash = None
        if args is not None:
            text = canonical_json(args) if args_text is None else args_text
            args_hash = digest_text(text)
            if len(text) <= MAX_DETAIL_ARGS:
                detail["args"] = args
        record = StepRecord(self.run_id, key, kind, tool, args_hash, status, outcome, detail,
                            self.seq, now, now)
        self.seq += 1
        self.journal[key] = record
        return record

    async def commit(self, steps: list[StepRecord] = (), attempts: list[AttemptRecord] = ()) -> None:  # type: ignore[assignment]
        """Write ``steps`` and ``attempts`` durably, together with any held outcomes."""
        held_steps, held_attempts = self.take_held()
        steps, attempts = held_steps + list(steps), held_attempts + list(attempts)
        await self.engine.store.commit(Commit(self.run_id, self.ctx.generation, steps, attempts))
        self.notify_steps(steps)

    def hold(self, steps: list[StepRecord], attempts: list[AttemptRecord]) -> None:
        """Keep a batch's final outcomes for the run's next write instead of writing them
        now. Safe because every effect first calls ``flush_held`` and every end of a
        drive writes them with the run's new status: nothing observable happens between.
        A crash in between loses them exactly as a crash just before their own commit
        would have (the attempt counts as interrupted); it saves one fsync per run."""
        self._held_steps += steps
        self._held_attempts += attempts

    def take_held(self) -> tuple[list[StepRecord], list[AttemptRecord]]:
        """The held outcomes, for a write that will carry them (they are no longer held)."""
        steps, attempts = self._held_steps, self._held_attempts
        if steps or attempts:
            self._held_steps, self._held_attempts = [], []
        return steps, attempts

    async def flush_held(self) -> None:
        if self._held_steps or self._held_attempts:
            await self.commit()

    def notify_steps(self, steps: list[StepRecord]) -> None:
        if self.engine.listeners:
            for step in steps:
                self.engine.notify({"type": "step", "run_id": self.run_id, "step": step.step_key,
                                    "kind": step.kind, "tool": step.tool, "status": step.status})

    def _check_replay(self, record: StepRecord, kind: str, tool: str | None, args: Any) -> None:
        """A recorded step must be what the code asks now; otherwise stop, never re-run."""
        args_hash = digest(args) if args is not None else None
        if record.kind == kind and record.tool == tool and record.args_hash == args_hash:
            return
        parts = []
        if record.kind != kind:
            parts.append(f"kind {record.kind} -> {kind}")
        if record.tool != tool:
            parts.append(f"tool {record.tool} -> {tool}")
        paths: list[str] = []
        if record.args_hash != args_hash:
            old = record.detail.get("args")
            paths = diff_paths(old, args) if old is not None and args is not None else ["$"]
            parts.append("arguments differ at " + ", ".join(paths))
        raise ReplayMismatch(
            f"replay mismatch at step {record.step_key}: the journal recorded "
            f"{record.kind} {record.tool or ''}".rstrip() + f" but the code now asks "
            f"{kind} {tool or ''}".rstrip() + f" ({'; '.join(parts)})",
            step=record.step_key, paths=paths)

    def _check_cancel(self) -> None:
        if self.ctx.drain_requested and not self.ctx.cancel_requested:
            raise Drained("the worker is shutting down")
        if self.ctx.cancel_requested:
            self.cancel_event.set()
            raise RunCancelled("lashlang process was cancelled")

    # -- the seam --------------------------------------------------------------------------
    async def perform(self, effect: fx.Effect) -> Any:
        kind = type(effect)
        if kind is fx.Finish or kind is fx.Fail:  # the end of the run, not an effect to count
            return effect.value  # type: ignore[union-attr]
        await self.flush_held()  # the last batch's outcomes are durable before this effect
        self.effects += 1
        limit = self.engine.limits.max_effects
        if self.effects > limit:
            from ..errors import LimitExceeded
            raise LimitExceeded(f"the run performed more than {limit} effects")
        if kind is fx.ToolCall:
            self._check_cancel()
            return await self._tool_call(effect)  # type: ignore[arg-type]
        self._check_cancel()
        handler = _HANDLERS[kind]
        return await handler(self, effect)

    # -- tool calls ------------------------------------------------------------------------
    async def _tool_call(self, call: fx.ToolCall) -> Any:
        return (await self._tool_calls([call]))[0]

    async def _tool_batch(self, batch: fx.ToolBatch) -> list[Any]:
        return await self._tool_calls(batch.calls)

    async def _tool_calls(self, calls: list[fx.ToolCall]) -> list[Any]:
        """Replay recorded members, run the rest as one concurrent batch, park if any is
        still pending once all have been recorded."""
        runner = self.engine.tool_runner
        answers: list[Any] = [None] * len(calls)
        fresh: list[tuple[int, fx.ToolCall, Any, StepRecord | None]] = []
        for index, call in enumerate(calls):
            payload = to_json(call.input)
            record = self.journal.get(call.step)
            if record is None:
                fresh.append((index, call, payload, None))
                continue
            self._check_replay(record, "tool", f"{call.module}.{call.operation}", payload)
            if record.status == "started":  # an attempt was interrupted by a crash
                fresh.append((index, call, payload, record))
            else:
                answers[index] = await runner.replay(self, record)
        if fresh:
            ran = await runner.run_calls(self, [(c, p, r) for _, c, p, r in fresh])
            for (index, _, _, _), answer in zip(fresh, ran):
                answers[index] = answer
        waits = [self._completion_wait(call.step) for call, answer in zip(calls, answers)
                 if answer is PARK]
        if waits:
            raise fx.Parked(waits)
        self.steps_done += len(calls)
        return [from_json(answer) for answer in answers]

    def _completion_wait(self, step_key: str) -> Wait:
        record = self.journal[step_key]
        key = self.engine.tool_runner.key_for(self.run_id, step_key)
        until = (record.outcome or {}).get("deadline_at")
        return Wait(kind="completion", step=step_key, tool=record.tool, key=key, until=until,
                    resolve=f"lashflow complete {key} --result '<json>' --resume")

    # -- processes ---------------------------------------------------------------------------
    async def _start(self, effect: fx.StartProcess) -> Any:
        args = to_json(effect.args)
        record = self.journal.get(effect.step)
        request = {"process": effect.process, "args": args}
        if record is not None:
            self._check_replay(record, "start", effect.process, request)
            child_id = record.outcome["id"]
        else:
            child_id = self.engine.child_run_id(self.run_id, effect.step)
            await self.engine.create_child(self.ctx, child_id, effect.process, args)
            record = self.new_step(effect.step, "start", effect.process, request, "done",
                                    {"__handle__": "process", "id": child_id})
            await self.commit([record])
        self.engine.spawn_child(child_id)
        return {"__handle__": "process", "id": child_id}

    async def _await(self, effect: fx.AwaitHandle) -> Any:
        record = self.journal.get(effect.step)
        handle = effect.handle
        child_id = handle.get("id") if isinstance(handle, dict) else None
        if record is not None and record.status == "done":
            self._check_replay(record, "await", None, {"handle": child_id})
            return from_json(record.outcome)
        if not isinstance(child_id, str):
            answer = {"ok": False, "error": "expected handle record"}
        else:
            outcome, child_waits = await self.engine.join_child(child_id)
            if outcome is None:
                raise fx.Parked([Wait(kind="child", step=effect.step, child_run_id=child_id,
                                      resolve=f"lashflow resume {child_id}"), *child_waits])
            answer = outcome
        record = self.new_step(effect.step, "await", None, {"handle": child_id}, "done", answer)
        await self.commit([record])
        return from_json(answer)

    async def _cancel(self, effect: fx.CancelHandle) -> Any:
        handle = effect.handle
        child_id = handle.get("id") if isinstance(handle, dict) else None
        if effect.step in self.journal:
            return None
        if not isinstance(child_id, str):
            raise LashRuntimeError("ValueError", "cancel failed: expected a process handle",
                                   effect.span)
        await self.engine.cancel(child_id)
        await self.commit([self.new_step(effect.step, "cancel", None, {"handle": child_id},
                                          "done", None)])
        return None

    # -- observations ----------------------------------------------------------------------
    async def _observe(self, effect: fx.Observe) -> Any:
        if effect.kind == "print":
            self.prints.append(effect.text)
        record = self.journal.get(effect.step)
        if record is not None:
            return None
        record = self.new_step(effect.step, effect.kind, None, None, "done",
                                {"value": to_json(effect.value), "text": effect.text})
        await self.commit([record])
        return None

    # -- time and signals ----------------------------------------------------------------
    async def _sleep(self, effect: fx.SleepEffect) -> Any:
        from ..interp.timeparse import sleep_deadline

        record = self.journal.get(effect.step)
        now = self.engine.clock.now()
        if record is None:
            wake_at = sleep_deadline(effect.mode, effect.value, now, effect.span)
            record = self.new_step(effect.step, "sleep", None, None, "pending", None,
                                    {"wake_at": wake_at, "mode": effect.mode})
            await self.commit([record])
        if record.status == "done":
            return None
        wake_at = record.detail["wake_at"]
        if now >= wake_at:
            record.status = "done"
            record.updated_at = now
            await self.commit([record])
            return None
        raise fx.Parked([Wait(kind="sleep", step=effect.step, until=wake_at,
                              resolve=f"lashflow resume {self.run_id}")])

    async def _wait_signal(self, effect: fx.WaitSignalEffect) -> Any:
        record = self.journal.get(effect.step)
        if record is not None and record.status == "done":
            return from_json(record.outcome)
        found, payload = await self.engine.store.get_signal(self.run_id, effect.name,
                                                            effect.ordinal)
        if not found:
            raise fx.Parked([Wait(kind="signal", step=effect.step, signal=effect.name,
                                  resolve=f"lashflow signal {self.run_id} {effect.name} "
                                          "--payload '<json>'")])
        record = self.new_step(effect.step, "wait_signal", effect.name, None, "done", payload)
        await self.commit([record])
        return from_json(payload)

    async def _signal_run(self, effect: fx.SignalRunEffect) -> Any:
        if effect.step in self.journal:
            return None
        handle = effect.handle
        target = handle.get("id") if isinstance(handle, dict) and "__handle__" in handle else None
        if not isinstance(target, str):
            raise LashRuntimeError("ValueError", "signal_run expects a process handle", effect.span)
        await self.engine.signal(target, effect.name, to_json(effect.payload))
        await self.commit([self.new_step(effect.step, "signal_run", effect.name,
                                          {"run": target}, "done", None)])
        return None


_STEP_STATUSES = frozenset({"done", "pending", "started"})
_TOOL_STATUSES = frozenset({"ok", "err", "failed", "exhausted", "cancelled", "pending"})


def check_journal(run_id: str, steps: list[StepRecord]) -> None:
    """What replay relies on, checked before anything replays: a row the store could
    decode but that holds no usable step is ``JournalCorrupt``, never taken as truth."""
    from ..store.base import JournalCorrupt

    for step in steps:
        outcome = step.outcome
        if step.status not in _STEP_STATUSES:
            raise JournalCorrupt.of(run_id, step.step_key, f"unknown status {step.status!r}")
        if step.kind == "tool" and (
                (step.status != "started" and not isinstance(outcome, dict))
                or (outcome is not None and (not isinstance(outcome, dict)
                                             or outcome.get("status") not in _TOOL_STATUSES))):
            raise JournalCorrupt.of(run_id, step.step_key, "a tool step without a usable outcome")


class _ParkMarker:
    __slots__ = ()


_PARK: Any = _ParkMarker()

_HANDLERS: dict[type, Any] = {
    fx.ToolBatch: DurableHost._tool_batch,
    fx.StartProcess: DurableHost._start,
    fx.AwaitHandle: DurableHost._await,
    fx.CancelHandle: DurableHost._cancel,
    fx.Observe: DurableHost._observe,
    fx.SleepEffect: DurableHost._sleep,
    fx.WaitSignalEffect: DurableHost._wait_signal,
    fx.SignalRunEffect: DurableHost._signal_run,
}

PARK = _PARK
__all__ = ["DurableHost", "Drained", "ReplayMismatch", "NeedsAttention", "RunCancelled", "FailTurn",
           "PARK"]
