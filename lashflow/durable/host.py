"""The durable host: the interpreter's effect seam backed by the journal.

Every effect has a step key. The replay machine (``replay.py``) decides what to do with
it: answer from the journal without running anything, run it for real, wait, or stop.
This host carries the decision out (a tool call, a child run, a signal lookup) and
writes what the machine asks before the interpreter moves on. Waits (completion keys,
sleeps, signals, child runs) raise ``Parked``: the run stops where it stands and is
re-driven later by replay.
"""

from __future__ import annotations

from shlex import quote
from typing import Any, Awaitable, Callable, NoReturn

from ..errors import LashflowError, LimitExceeded
from ..interp import effects as fx
from ..interp.errors import LashRuntimeError
from ..interp.limits import Limits, too_deep
from ..interp.values import from_json, to_json
from ..states import StepStatus
from ..store import RunRecord, StepRecord
from .endings import (Drained, FailTurn, NeedsAttention, PausedOnExhausted, ReplayMismatch,
                      RunCancelled)
from .journal import DriveFlags, RunJournal
from .outcome import Wait
from .prints import Prints
from .ratelimits import reservations
from .ports import ChildRuns
from .replay import ATTENTION, FAIL, MISMATCH, PENDING, REPLAY, RUN, Decision
from .tool_runner import PARKED, LimitParked, ToolRunner


def stop(decision: Decision) -> NoReturn:
    """End the drive the way a decision that is no answer says."""
    if decision.action is MISMATCH:
        raise ReplayMismatch(decision.message, step=decision.step, paths=list(decision.paths))
    if decision.action is ATTENTION:
        raise NeedsAttention(decision.message, step=decision.step)
    if decision.action is FAIL:
        raise FailTurn(decision.message)
    raise fx.Parked(list(decision.waits))


PRINTS_PER_WRITE = 1000


class DurableHost:
    """Performs one run's effects against its journal. One instance per drive."""

    def __init__(self, run: RunRecord, source_hash: str, journal: RunJournal, tools: ToolRunner,
                 children: ChildRuns, flags: DriveFlags, limits: Limits) -> None:
        self.run = run
        self.run_id = run.run_id
        self.source_hash = source_hash  # what runs now (a resume may bring edited source)
        self.journal = journal
        self.machine = journal.machine
        self.clock = journal.clock
        self.tools = tools
        self.children = children
        self.flags = flags
        self.limits = limits
        self.prints = Prints(tools.project)
        self.observed_bytes = 0
        self.held_prints = 0  # prints held for the run's next write (see _observe)
        self.reserved = reservations(run.waiting)  # rate slots taken before it parked
        if flags.cancel_requested:
            flags.cancel_signal.set()

    def _check_cancel(self) -> None:
        flags = self.flags
        if flags.pause_requested and not flags.cancel_requested:
            raise Drained("the run was paused")
        if flags.drain_requested and not flags.cancel_requested:
            raise Drained("the worker is shutting down")
        if flags.cancel_requested:
            flags.cancel_signal.set()
            raise RunCancelled("lashlang process was cancelled")

    async def _write(self, decision: Decision) -> Any:
        """A decision that answers (``REPLAY``), after its writes; any other stops here."""
        if decision.writes:
            await self.journal.commit(decision.writes)
        if decision.action is not REPLAY:
            stop(decision)
        return from_json(decision.answer)

    def _fresh(self, step: str, kind: str) -> bool:
        """Whether an at-most-once effect is to run now (False: it ran before)."""
        decision = self.machine.once(step, kind)
        if decision.action is RUN:
            return True
        if decision.action is not REPLAY:
            stop(decision)
        return False

    # -- the seam --------------------------------------------------------------------------
    async def perform(self, effect: fx.Effect) -> Any:
        kind = type(effect)
        if kind is fx.Finish or kind is fx.Fail:  # the end of the run, not an effect to count
            # type(effect) is tested above (faster than isinstance on every effect), and
            # mypy does not narrow a union on a stored type(): the ignores below say so
            return effect.value  # type: ignore[union-attr]
        if kind is not fx.Observe or effect.kind != "print":  # type: ignore[union-attr]
            machine = self.machine  # what is held is durable before this effect
            if machine.held_steps or machine.held_attempts:  # (``flush_held``, inline)
                await self.journal.commit()
            self.held_prints = 0
        # the effect limit is counted once, by the interpreter as it yields each effect
        self._check_cancel()
        if kind is fx.ToolCall:
            return (await self._tool_calls([effect]))[0]  # type: ignore[list-item]
        return await _HANDLERS[kind](self, effect)

    # -- tool calls ------------------------------------------------------------------------
    async def _tool_batch(self, batch: fx.ToolBatch) -> list[Any]:
        return await self._tool_calls(batch.calls)

    async def _tool_calls(self, calls: list[fx.ToolCall]) -> list[Any]:
        """Replay recorded members, run the rest as one concurrent batch, park if any is
        still pending once all have been recorded."""
        machine, tools = self.machine, self.tools
        answers: list[Any] = [None] * len(calls)
        # the calls to run, as run_calls takes them, and where each answer goes (two
        # lists, so a lone call makes no comprehension to split them)
        fresh: list[tuple[fx.ToolCall, Decision]] = []
        at: list[int] = []
        for index, call in enumerate(calls):
            decision = machine.tool(call, tools.idempotent, self.flags.retry_interrupted)
            if decision.action is REPLAY:
                answers[index] = decision.answer
            elif decision.action is RUN:
                fresh.append((call, decision))
                at.append(index)
            elif decision.action is PENDING:
                answers[index] = await tools.poll(self.journal, decision.step)
            else:
                stop(decision)
        waits: list[Wait] = []
        if fresh:
            slots = None
            limited = tools.limited(fresh)
            if limited:  # (no round trip, not even a coroutine, when no tool is limited)
                plan = await tools.plan_limits(self.run_id, limited, self.reserved)
                if plan.waits:  # calls whose rate slot is later park the run (ADR 0036)
                    later = {wait.step for wait in plan.waits}
                    kept = [i for i, (call, _) in enumerate(fresh) if call.step not in later]
                    fresh, at = [fresh[i] for i in kept], [at[i] for i in kept]
                    waits += plan.waits
                slots = plan.slots
            ran = await tools.run_calls(self.journal, self.flags.cancel_signal, fresh, slots)
            for index, answer in zip(at, ran):
                if type(answer) is LimitParked:  # its limit parks the run (ADR 0043)
                    waits.append(answer.wait)
                answers[index] = answer
            if self.journal.exhausted:
                self._pause_if_exhausted([call for call, _ in fresh])
        if PARKED in answers:
            waits += [machine.completion_wait(call.step, tools.key_for(self.run_id, call.step))
                      for call, answer in zip(calls, answers) if answer is PARKED]
        if waits:
            raise fx.Parked(waits)
        # result wrappers as they are: the interpreter's ``normalize_wrapper`` turns the
        # one field it reads (value or error) into a value, so converting them here too
        # walked every answer twice
        return answers

    def _pause_if_exhausted(self, ran: list[fx.ToolCall]) -> None:
        """A call whose retries just ran out pauses the run where its tool (or the run)
        asks for it; its outcome is recorded with the run's pause (ADR 0032)."""
        for call in ran:
            last = self.journal.exhausted.pop(call.step, None)
            if last is not None and self.tools.pauses_when_exhausted(
                    call, self.run.meta.get("on_exhausted")):
                raise PausedOnExhausted(
                    f"{call.module}.{call.operation} ran out of retries: {last}",
                    step=call.step, tool=f"{call.module}.{call.operation}")

    # -- processes ---------------------------------------------------------------------------
    async def _start(self, effect: fx.StartProcess) -> Any:
        args = to_json(effect.args)
        decision = self.machine.start(effect, args)
        if decision.action is RUN:
            depth = self.run.meta.get("depth", 0) + 1
            if depth > self.limits.max_child_depth:
                raise too_deep(self.limits)
            child_id = self.children.child_id(self.run_id, effect.step)
            await self.children.create(self.run, self.source_hash, child_id, effect.process,
                                       args, depth)
            await self.journal.commit([self.machine.started(effect, args, child_id,
                                                            self.clock.now())])
            decision = Decision(REPLAY, effect.step, {"__handle__": "process", "id": child_id})
        elif decision.action is not REPLAY:
            stop(decision)
        self.children.spawn(decision.answer["id"])
        return decision.answer

    async def _await_handles(self, effect: fx.AwaitHandles) -> list[Any]:
        """Join every handle leaf at once; record those settled, park on the others."""
        machine = self.machine
        now = self.clock.now()
        answers: list[Any] = [None] * len(effect.awaits)
        joins: list[tuple[int, fx.AwaitHandle, str]] = []
        done: list[StepRecord] = []
        for index, one in enumerate(effect.awaits):
            decision = machine.await_one(one, now)
            if decision.action is RUN:
                joins.append((index, one, decision.answer))
            elif decision.action is REPLAY:
                answers[index] = decision.answer
                done += decision.writes
            else:
                stop(decision)
        joined = await self.children.join_all([child_id for _, _, child_id in joins])
        waits: list[Wait] = []
        for (index, one, child_id), (answer, child_waits) in zip(joins, joined):
            if answer is None:
                waits += [Wait(kind="child", step=one.step, child_run_id=child_id,
                               resolve=f"lashflow resume {quote(child_id)}"), *child_waits]
            else:
                answers[index] = answer
                done.append(machine.joined(one, child_id, answer, self.clock.now()))
        if done:
            await self.journal.commit(done)
        if waits:
            raise fx.Parked(waits)
        return [from_json(answer) for answer in answers]

    async def _cancel(self, effect: fx.CancelHandle) -> Any:
        if not self._fresh(effect.step, "cancel"):
            return None
        child_id = self.machine.own_child(effect.handle, "cancel", effect.span)
        if child_id is None:
            raise LashRuntimeError("ValueError", "cancel failed: expected a process handle",
                                   effect.span)
        await self.children.cancel(child_id)
        await self.journal.commit([self.machine.new_step(
            effect.step, "cancel", None, {"handle": child_id}, StepStatus.DONE, None,
            self.clock.now())])
        return None

    # -- observations ----------------------------------------------------------------------
    async def _observe(self, effect: fx.Observe) -> Any:
        # A print or yield journals its text and its value (about as big again); replayed
        # ones count too, so the bound holds across resumes.
        self.observed_bytes += 2 * len(effect.text)
        if self.observed_bytes > self.limits.max_journal_bytes:
            raise LimitExceeded(f"the run's prints and yields would journal more than "
                                f"{self.limits.max_journal_bytes} bytes")
        if effect.kind == "print":
            self.prints.add(effect.text)
        if not self._fresh(effect.step, effect.kind):
            return None
        record = self.machine.new_step(effect.step, effect.kind, None, None, StepStatus.DONE,
                                       {"value": to_json(effect.value), "text": effect.text},
                                       self.clock.now())
        if effect.kind != "print":
            await self.journal.commit([record])
            return None
        # A print changes nothing outside the run and replays the same text, so it rides
        # with the run's next write (ADR 0009), in groups of at most PRINTS_PER_WRITE: a
        # loop of prints costs a write per group, not one each (a crash before the write
        # only makes the replay print them again).
        self.machine.hold([record], [])
        self.held_prints += 1
        if self.held_prints >= PRINTS_PER_WRITE:
            await self.journal.flush_held()
            self.held_prints = 0
        return None

    # -- time and signals ----------------------------------------------------------------
    async def _sleep(self, effect: fx.SleepEffect) -> Any:
        return await self._write(self.machine.sleep(effect, self.clock.now()))

    async def _wait_signal(self, effect: fx.WaitSignalEffect) -> Any:
        decision = self.machine.wait_signal(effect)
        if decision.action is not RUN:
            return await self._write(decision)
        found, payload = await self.journal.store.get_signal(self.run_id, effect.name,
                                                             effect.ordinal)
        if not found:
            raise fx.Parked([self.machine.signal_wait(effect)])
        await self.journal.commit([self.machine.new_step(
            effect.step, "wait_signal", effect.name, None, StepStatus.DONE, payload,
            self.clock.now())])
        return from_json(payload)

    async def _signal_run(self, effect: fx.SignalRunEffect) -> Any:
        if not self._fresh(effect.step, "signal_run"):
            return None
        target = self.machine.own_child(effect.handle, "signal_run", effect.span)
        if target is None:
            raise LashRuntimeError("ValueError", "signal_run expects a process handle", effect.span)
        try:
            # keyed by this step: a resume after a crash between the delivery and the
            # step's commit below does not deliver it a second time
            await self.children.signal(target, effect.name, to_json(effect.payload),
                                       sender=f"{self.run_id}/{effect.step}")
        except LashflowError as exc:  # the child has ended, or refuses the signal
            raise LashRuntimeError("ValueError", f"signal_run failed: {exc.message}",
                                   effect.span) from None
        await self.journal.commit([self.machine.new_step(
            effect.step, "signal_run", effect.name, {"run": target}, StepStatus.DONE, None,
            self.clock.now())])
        return None


_HANDLERS: dict[type, Callable[[DurableHost, Any], Awaitable[Any]]] = {
    fx.ToolBatch: DurableHost._tool_batch,
    fx.StartProcess: DurableHost._start,
    fx.AwaitHandles: DurableHost._await_handles,
    fx.CancelHandle: DurableHost._cancel,
    fx.Observe: DurableHost._observe,
    fx.SleepEffect: DurableHost._sleep,
    fx.WaitSignalEffect: DurableHost._wait_signal,
    fx.SignalRunEffect: DurableHost._signal_run,
}

__all__ = ["DurableHost", "stop"]
