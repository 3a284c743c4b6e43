"""The durable host: the interpreter's effect seam backed by the journal.

Every effect has a step key. If the journal (read once per drive) holds the step's
outcome, the host returns it without running anything; otherwise it runs the effect for
real and commits its outcome before the interpreter moves on. Waits (completion keys,
sleeps, signals, child runs) raise ``Parked``: the run stops where it stands and is
re-driven later by replay.
"""

from __future__ import annotations

from shlex import quote
from typing import Any, Awaitable, Callable

from ..errors import LashflowError, LimitExceeded
from ..interp import effects as fx
from ..interp.errors import LashRuntimeError
from ..interp.limits import Limits
from ..interp.timeparse import sleep_deadline
from ..interp.values import from_json, to_json
from ..store import RunRecord, StepRecord
from .canonical import diff_paths, digest
from .endings import Drained, ReplayMismatch, RunCancelled
from .journal import DriveFlags, RunJournal
from .outcome import Wait
from .prints import Prints
from .ports import ChildRuns
from .tool_runner import PARKED, ToolRunner


class DurableHost:
    """Performs one run's effects against its journal. One instance per drive."""

    def __init__(self, run: RunRecord, source_hash: str, journal: RunJournal, tools: ToolRunner,
                 children: ChildRuns, flags: DriveFlags, limits: Limits) -> None:
        self.run = run
        self.run_id = run.run_id
        self.source_hash = source_hash  # what runs now (a resume may bring edited source)
        self.journal = journal
        self.tools = tools
        self.children = children
        self.flags = flags
        self.limits = limits
        self.prints = Prints(tools.project)
        self.observed_bytes = 0
        # The runs this run started: the only ones it may await, cancel or signal. A
        # handle is a plain record, so one naming any other run is refused, never used.
        self.children_started = {step.outcome["id"] for step in journal.steps.values()
                                 if step.kind == "start" and isinstance(step.outcome, dict)}
        if flags.cancel_requested:
            flags.cancel_signal.set()

    def _check_replay(self, record: StepRecord, kind: str, tool: str | None, args: Any) -> None:
        """A recorded step must be what the code asks now; otherwise stop, never re-run."""
        args_hash = digest(args) if args is not None else None
        if record.kind == kind and record.tool == tool and record.args_hash == args_hash:
            return
        recorded = f"{record.kind} {record.tool or ''}".rstrip()
        asked = f"{kind} {tool or ''}".rstrip()
        paths: list[str] = []
        if record.args_hash != args_hash:
            old = record.detail.get("args")
            paths = diff_paths(old, args) if old is not None and args is not None else ["$"]
        where = f"replay mismatch at step {record.step_key}: "
        if recorded == asked:  # only the arguments changed: say where
            message = (f"{where}the journal recorded {recorded} with other arguments than the "
                       f"code now gives (they differ at {', '.join(paths)})")
        else:
            message = f"{where}the journal recorded {recorded} but the code now asks {asked}"
            if paths:
                message += f", with other arguments too (at {', '.join(paths)})"
        raise ReplayMismatch(message, step=record.step_key, paths=paths)

    @staticmethod
    def _check_width(record: StepRecord, call: fx.ToolCall) -> None:
        """A fan-out member was recorded with its batch's width: a replay that forms
        another number of calls would pair old outcomes with new elements."""
        recorded = record.detail.get("width")
        if recorded == call.width:
            return
        raise ReplayMismatch(
            f"replay mismatch at step {record.step_key}: the journal recorded a fan-out of "
            f"{recorded} calls but the code now forms {call.width}", step=record.step_key,
            paths=[])

    def _check_cancel(self) -> None:
        flags = self.flags
        if flags.drain_requested and not flags.cancel_requested:
            raise Drained("the worker is shutting down")
        if flags.cancel_requested:
            flags.cancel_signal.set()
            raise RunCancelled("lashlang process was cancelled")

    # -- the seam --------------------------------------------------------------------------
    async def perform(self, effect: fx.Effect) -> Any:
        kind = type(effect)
        if kind is fx.Finish or kind is fx.Fail:  # the end of the run, not an effect to count
            return effect.value  # type: ignore[union-attr]
        await self.journal.flush_held()  # the last batch's outcomes are durable before this
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
        journal = self.journal
        answers: list[Any] = [None] * len(calls)
        fresh: list[tuple[int, fx.ToolCall, Any, StepRecord | None]] = []
        for index, call in enumerate(calls):
            payload = call.input  # already JSON data (``tool_input``)
            record = journal.get(call.step)
            if record is None:
                fresh.append((index, call, payload, None))
                continue
            self._check_replay(record, "tool", f"{call.module}.{call.operation}", payload)
            self._check_width(record, call)
            if record.status == "started":  # an attempt was interrupted by a crash
                fresh.append((index, call, payload, record))
            else:
                answers[index] = await self.tools.replay(journal, record)
        if fresh:
            ran = await self.tools.run_calls(journal, self.flags.cancel_signal,
                                             self.flags.retry_interrupted,
                                             [(c, p, r) for _, c, p, r in fresh])
            for (index, _, _, _), answer in zip(fresh, ran):
                answers[index] = answer
        waits = [self._completion_wait(call.step) for call, answer in zip(calls, answers)
                 if answer is PARKED]
        if waits:
            raise fx.Parked(waits)
        return [from_json(answer) for answer in answers]

    def _completion_wait(self, step_key: str) -> Wait:
        record = self.journal.steps[step_key]
        key = self.tools.key_for(self.run_id, step_key)
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
            depth = self.run.meta.get("depth", 0) + 1
            if depth > self.limits.max_child_depth:
                raise LimitExceeded(f"more than {self.limits.max_child_depth} runs nested by "
                                    "`start` (a process that starts itself?)")
            child_id = self.children.child_id(self.run_id, effect.step)
            await self.children.create(self.run, self.source_hash, child_id, effect.process,
                                       args, depth)
            record = self.journal.new_step(effect.step, "start", effect.process, request, "done",
                                           {"__handle__": "process", "id": child_id})
            await self.journal.commit([record])
        self.children_started.add(child_id)
        self.children.spawn(child_id)
        return {"__handle__": "process", "id": child_id}

    def _own_child(self, handle: Any, action: str, span: Any) -> str | None:
        """The child run a handle names; ``None`` for a value that is no handle at all.
        A handle of a run this run did not start is refused without naming that run."""
        if not (isinstance(handle, dict) and ("__handle__" in handle or "handle" in handle)):
            return None
        child_id = handle.get("id")
        if not isinstance(child_id, str) or child_id not in self.children_started:
            raise LashRuntimeError("ValueError", f"{action} failed: not a handle of a run this "
                                   "process started", span)
        return child_id

    async def _await_handles(self, effect: fx.AwaitHandles) -> list[Any]:
        """Join every handle leaf at once; record those settled, park on the others."""
        answers: list[Any] = [None] * len(effect.awaits)
        joins: list[tuple[int, fx.AwaitHandle, str]] = []
        done = []
        for index, one in enumerate(effect.awaits):
            record = self.journal.get(one.step)
            child_id = self._own_child(one.handle, "await", one.span)
            if record is not None and record.status == "done":
                self._check_replay(record, "await", None, {"handle": child_id})
                answers[index] = record.outcome
            elif child_id is None:  # awaiting a plain value: the language's answer
                answers[index] = {"ok": False, "error": "expected handle record"}
                done.append(self.journal.new_step(one.step, "await", None, {"handle": None},
                                                  "done", answers[index]))
            else:
                joins.append((index, one, child_id))
        joined = await self.children.join_all([child_id for _, _, child_id in joins])
        waits: list[Wait] = []
        for (index, one, child_id), (answer, child_waits) in zip(joins, joined):
            if answer is None:
                waits += [Wait(kind="child", step=one.step, child_run_id=child_id,
                               resolve=f"lashflow resume {quote(child_id)}"), *child_waits]
            else:
                answers[index] = answer
                done.append(self.journal.new_step(one.step, "await", None, {"handle": child_id},
                                                  "done", answer))
        if done:
            await self.journal.commit(done)
        if waits:
            raise fx.Parked(waits)
        return [from_json(answer) for answer in answers]

    async def _cancel(self, effect: fx.CancelHandle) -> Any:
        if effect.step in self.journal:
            return None
        child_id = self._own_child(effect.handle, "cancel", effect.span)
        if child_id is None:
            raise LashRuntimeError("ValueError", "cancel failed: expected a process handle",
                                   effect.span)
        await self.children.cancel(child_id)
        await self.journal.commit([self.journal.new_step(effect.step, "cancel", None,
                                                         {"handle": child_id}, "done", None)])
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
        if effect.step in self.journal:
            return None
        record = self.journal.new_step(effect.step, effect.kind, None, None, "done",
                                       {"value": to_json(effect.value), "text": effect.text})
        await self.journal.commit([record])
        return None

    # -- time and signals ----------------------------------------------------------------
    async def _sleep(self, effect: fx.SleepEffect) -> Any:
        journal = self.journal
        record = journal.get(effect.step)
        now = journal.clock.now()
        if record is None:
            wake_at = sleep_deadline(effect.mode, effect.value, now, effect.span)
            record = journal.new_step(effect.step, "sleep", None, None, "pending", None,
                                      {"wake_at": wake_at, "mode": effect.mode})
            await journal.commit([record])
        if record.status == "done":
            return None
        wake_at = record.detail["wake_at"]
        if now >= wake_at:
            await journal.commit([journal.touch(record, "done", None)])
            return None
        raise fx.Parked([Wait(kind="sleep", step=effect.step, until=wake_at,
                              resolve=f"lashflow resume {quote(self.run_id)}")])

    async def _wait_signal(self, effect: fx.WaitSignalEffect) -> Any:
        record = self.journal.get(effect.step)
        if record is not None and record.status == "done":
            return from_json(record.outcome)
        found, payload = await self.journal.store.get_signal(self.run_id, effect.name,
                                                             effect.ordinal)
        if not found:
            raise fx.Parked([Wait(kind="signal", step=effect.step, signal=effect.name,
                                  resolve=f"lashflow signal {quote(self.run_id)} {quote(effect.name)} "
                                          "--payload '<json>'")])
        record = self.journal.new_step(effect.step, "wait_signal", effect.name, None, "done",
                                       payload)
        await self.journal.commit([record])
        return from_json(payload)

    async def _signal_run(self, effect: fx.SignalRunEffect) -> Any:
        if effect.step in self.journal:
            return None
        target = self._own_child(effect.handle, "signal_run", effect.span)
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
        await self.journal.commit([self.journal.new_step(effect.step, "signal_run", effect.name,
                                                         {"run": target}, "done", None)])
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

__all__ = ["DurableHost"]
