"""Verify a run against an edited program: replay its journal, run nothing, write nothing.

The edited program is re-run from the start over the run's recorded journal through the
replay machine, exactly as a resume would, but with a host that never calls a tool,
sleeps, signals or writes: where the live host would do something for real, the verifier
stops and says where the new code takes over. Each run is classified

- ``compatible``: every recorded step the edited program reaches matches, and no step
  the run recorded is left behind (``reason`` says where the new code takes over);
- ``incompatible``: the first step that no longer matches (its key, the line:col in the
  edited file, the JSON paths that differ, and what the journal recorded), or a recorded
  step the edited program no longer reaches, or a recorded tool output that no longer
  fits the tool's output schema;
- ``unknown``: verification could not decide (the journal cannot be trusted, the edited
  program fails or exceeds a limit while replaying recorded answers, the run's input
  does not fit the edited process); ``reason`` says which.

The work is synchronous and pure over a loaded journal: the interpreter is stepped by
hand, so a batch of runs is verified without an event loop turn per effect.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence, cast

from ..errors import LashflowError, LimitExceeded, position_of
from ..interp import effects as fx
from ..interp.errors import LashRuntimeError
from ..interp.limits import Limits
from ..interp.schema import first_failure
from ..interp.values import from_json, to_json
from ..states import RunStatus, StepStatus
from ..store.base import AttemptRecord, RunRecord, StepRecord
from .programs import Compiled
from .replay import FAIL, MISMATCH, REPLAY, Decision, ReplayMachine, check_journal

COMPATIBLE = "compatible"
INCOMPATIBLE = "incompatible"
UNKNOWN = "unknown"
VERDICTS = (COMPATIBLE, INCOMPATIBLE, UNKNOWN)

# Observations journal text, not effects on the world: one the edited program adds or
# drops changes nothing another system sees, so they never make a run incompatible.
_OBSERVATIONS = frozenset({"print", "yield", "wake"})

Schemas = Callable[[str, str], "dict[str, Any] | None"]  # (module, operation) -> output schema
Locate = Callable[[str], "tuple[int, int] | None"]  # step key -> line, column in the run's source


@dataclass(slots=True)
class Verdict:
    """How one run fares under the edited program."""

    run_id: str
    process: str | None
    status: str  # the run's own status
    verdict: str  # compatible | incompatible | unknown
    reason: str
    step: str | None = None
    line: int | None = None  # in the edited file: where it stops matching, or takes over
    column: int | None = None
    paths: list[str] = field(default_factory=list)  # JSON paths that differ
    recorded: dict[str, Any] | None = None  # what the journal holds at ``step``
    recorded_at: str | None = None  # "line:col" of ``step`` in the run's own source
    # How the program ended when it ran to its end on recorded answers alone (a settled
    # run replayed against its own code): (finished or failed, the value as JSON).
    # Not part of the printed verdict: a check that replay gives the stored result reads it.
    ended: tuple[RunStatus, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items()
                if v is not None and v != [] and k != "ended"}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Verdict":
        return cls(**{**{"paths": []}, **data})


class _Decided(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.reason)
        self.verdict = verdict


def recorded_view(record: StepRecord) -> dict[str, Any]:
    """What the journal holds for a step, as a verdict shows it (never a completion
    key: a verdict is printed and exported)."""
    view: dict[str, Any] = {"kind": record.kind, "status": record.status}
    if record.tool is not None:
        view["tool"] = record.tool
    if "args" in record.detail:
        view["args"] = record.detail["args"]
    outcome = record.outcome
    if record.kind == "tool" and isinstance(outcome, dict):  # a key completes the call
        outcome = {k: v for k, v in outcome.items() if k not in ("key", "traceback")}
    if outcome is not None:
        view["outcome"] = outcome
    return view


class VerifyHost:
    """The interpreter's host during verification: answers from the journal only."""

    def __init__(self, run: RunRecord, machine: ReplayMachine, source: str, schemas: Schemas,
                 locate: Locate, now: float) -> None:
        self.run = run
        self.machine = machine
        self.source = source
        self.schemas = schemas
        self.locate = locate
        self.now = now
        self.reached: set[str] = set()

    # -- verdicts --------------------------------------------------------------------------
    def _verdict(self, verdict: str, reason: str, *, step: str | None = None,
                 span: Any = None, paths: Sequence[str] | None = None,
                 record: StepRecord | None = None) -> _Decided:
        line = column = None
        if span is not None:
            pos = position_of(self.source, span[0])
            line, column = pos.line, pos.column
        recorded_at = None
        if record is not None:
            where = self.locate(record.step_key)
            recorded_at = None if where is None else f"{where[0]}:{where[1]}"
        return _Decided(Verdict(self.run.run_id, self.run.process, self.run.status, verdict,
                                reason, step, line, column, list(paths or ()),
                                None if record is None else recorded_view(record), recorded_at))

    def _mismatch(self, decision: Decision, span: Any) -> _Decided:
        return self._verdict(INCOMPATIBLE, decision.message, step=decision.step, span=span,
                             paths=decision.paths, record=decision.record)

    def _left_behind(self) -> StepRecord | None:
        """The first recorded step (in journal order) the edited program has not reached."""
        first: StepRecord | None = None
        for record in self.machine.steps.values():
            if (record.step_key not in self.reached and record.kind not in _OBSERVATIONS
                    and (first is None or record.seq < first.seq)):
                first = record
        return first

    def stand(self, step: str, span: Any, what: str) -> _Decided:
        """The edited program has come to where the run stands (or beyond it): compatible
        unless a recorded step was left behind on the way."""
        left = self._left_behind()
        if left is not None:
            name = f"{left.kind} {left.tool or ''}".rstrip()
            return self._verdict(INCOMPATIBLE, (
                f"the journal recorded step {left.step_key} ({name}) which the edited program "
                f"no longer reaches: it {what} first"), step=left.step_key, span=span,
                record=left)
        return self._verdict(COMPATIBLE, f"the edited program {what}", step=step, span=span)

    def ended(self, effect: fx.Finish | fx.Fail) -> _Decided:
        decided = self.stand("", effect.span, "ends after the recorded steps")
        if decided.verdict.verdict == COMPATIBLE:
            decided.verdict.ended = (RunStatus.FINISHED if type(effect) is fx.Finish else RunStatus.FAILED,
                                     to_json(effect.value))
        return decided

    # -- the seam --------------------------------------------------------------------------
    def perform(self, effect: fx.Effect) -> Any:
        kind = type(effect)
        # mypy does not narrow a union on a stored type(): each ignore below is that
        if kind is fx.ToolCall:
            return self._tools([effect])[0]  # type: ignore[list-item]
        if kind is fx.ToolBatch:
            return self._tools(effect.calls)  # type: ignore[union-attr]
        return _HANDLERS[kind](self, effect)

    def _tools(self, calls: list[fx.ToolCall]) -> list[Any]:
        machine = self.machine
        answers: list[Any] = []
        stop: fx.ToolCall | None = None
        for call in calls:
            if call.step in machine.steps:
                self.reached.add(call.step)
            decision = machine.tool(call, _always, True)
            if decision.action is MISMATCH:
                raise self._mismatch(decision, call.span)
            if decision.action is REPLAY:
                self._check_output(call, decision)
                answers.append(from_json(decision.answer))
            elif stop is None:
                stop = call
        if stop is not None:
            step = stop.step
            what = (f"waits for step {step} ({stop.module}.{stop.operation}) as the run does"
                    if step in machine.steps and machine.steps[step].status == StepStatus.PENDING
                    else f"takes over at step {step} ({stop.module}.{stop.operation})")
            raise self.stand(step, stop.span, what)
        return answers

    def _check_output(self, call: fx.ToolCall, decision: Decision) -> None:
        """A recorded output must still fit the tool's output schema."""
        answer = decision.answer
        if decision.action is FAIL or not isinstance(answer, dict) or not answer.get("ok"):
            return
        schema = self.schemas(call.module, call.operation)
        if not schema:
            return
        failure = first_failure(answer.get("value"), schema)
        if failure is not None:
            path, why = failure
            raise self._verdict(INCOMPATIBLE, (
                f"the recorded output of step {call.step} ({call.module}.{call.operation}) no "
                f"longer fits the tool's output schema: {path}: {why}"), step=call.step,
                span=call.span, paths=[path], record=self.machine.steps.get(call.step))

    def _start(self, effect: fx.StartProcess) -> Any:
        decision = self.machine.start(effect, to_json(effect.args))
        return self._answer(decision, effect.span, f"starts a child run at step {effect.step}")

    def _answer(self, decision: Decision, span: Any, what: str) -> Any:
        if decision.action is MISMATCH:
            raise self._mismatch(decision, span)
        if decision.record is not None:
            self.reached.add(decision.step)
        if decision.action is REPLAY:
            return from_json(decision.answer)
        raise self.stand(decision.step, span, what)

    def _await(self, effect: fx.AwaitHandles) -> Any:
        answers = []
        for one in effect.awaits:
            decision = self.machine.await_one(one, self.now)
            answers.append(self._answer(decision, one.span,
                                        f"waits for a child run at step {one.step}"))
        return answers

    def _once(self, effect: Any, kind: str, what: str) -> Any:
        decision = self.machine.once(effect.step, kind)
        if decision.action is not REPLAY and kind in _OBSERVATIONS:
            return None  # a new print changes nothing recorded
        return self._answer(decision, effect.span, f"{what} at step {effect.step}")

    def _cancel(self, effect: fx.CancelHandle) -> Any:
        return self._once(effect, "cancel", "cancels a child run")

    def _signal_run(self, effect: fx.SignalRunEffect) -> Any:
        return self._once(effect, "signal_run", "signals a child run")

    def _observe(self, effect: fx.Observe) -> Any:
        return self._once(effect, effect.kind, effect.kind)

    def _sleep(self, effect: fx.SleepEffect) -> Any:
        if effect.step not in self.machine.steps:
            raise self.stand(effect.step, effect.span, f"takes over at step {effect.step} (sleep)")
        decision = self.machine.sleep(effect, self.now)
        return self._answer(decision, effect.span, f"sleeps at step {effect.step} as the run does")

    def _wait_signal(self, effect: fx.WaitSignalEffect) -> Any:
        decision = self.machine.wait_signal(effect)
        return self._answer(decision, effect.span,
                            f"waits for signal {effect.name!r} at step {effect.step}")


def _always(call: fx.ToolCall) -> bool:
    return True


_HANDLERS: dict[type, Callable[[VerifyHost, Any], Any]] = {
    fx.StartProcess: VerifyHost._start,
    fx.AwaitHandles: VerifyHost._await,
    fx.CancelHandle: VerifyHost._cancel,
    fx.Observe: VerifyHost._observe,
    fx.SleepEffect: VerifyHost._sleep,
    fx.WaitSignalEffect: VerifyHost._wait_signal,
    fx.SignalRunEffect: VerifyHost._signal_run,
}


def verify_run(run: RunRecord, steps: list[StepRecord], attempts: list[AttemptRecord],
               compiled: Compiled, *, schemas: Schemas, locate: Locate, limits: Limits,
               now: float, bind: Callable[[dict[str, Any]], dict[str, Any]] | None = None
               ) -> Verdict:
    """Classify one run (its record and journal as loaded) under ``compiled``."""
    from ..interp.vm import Interpreter  # with the compiler: loaded by the first verify

    def unknown(reason: str) -> Verdict:
        return Verdict(run.run_id, run.process, run.status, UNKNOWN, reason)

    try:
        check_journal(run.run_id, steps)
    except LashflowError as exc:
        return unknown(f"its journal cannot be trusted: {exc.message}")
    if run.process is not None and compiled.module.process(run.process) is None:
        return Verdict(run.run_id, run.process, run.status, INCOMPATIBLE,
                       f"the edited file has no process `{run.process}`")
    machine = ReplayMachine(run.run_id, steps, attempts, run.meta.get("retries"))
    host = VerifyHost(run, machine, compiled.module.source, schemas, locate, now)
    child = run.parent_run_id is not None  # its input was a record of its parent's
    args = {k: from_json(v, child) for k, v in run.input.items()}
    try:
        if bind is not None and run.process is not None:
            args = bind(args)
        vm = Interpreter(compiled.program, run.process, args, limits, child)
        effect = vm.start()
        while True:
            kind = type(effect)
            if kind is fx.Finish or kind is fx.Fail:
                raise host.ended(cast("fx.Finish | fx.Fail", effect))
            try:
                answer = host.perform(effect)
            except LashRuntimeError as exc:
                vm.done = True
                raise exc.locate(compiled.program.source, getattr(effect, "span", None)) from None
            effect = vm.send(answer)
    except _Decided as decided:
        return decided.verdict
    except LashRuntimeError as exc:
        where = f" at {exc.line}:{exc.column}" if getattr(exc, "line", None) else ""
        return unknown(f"the edited program fails{where} on the recorded answers: {exc.message}")
    except LimitExceeded as exc:
        return unknown(f"replaying it exceeds a limit: {exc.message}")
    except LashflowError as exc:
        return unknown(exc.message)


__all__ = ["COMPATIBLE", "INCOMPATIBLE", "UNKNOWN", "VERDICTS", "Verdict", "VerifyHost",
           "recorded_view", "verify_run"]
