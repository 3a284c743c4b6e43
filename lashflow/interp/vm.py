"""The interpreter: runs one entry's instruction list until the next effect.

``start()``/``send(answer)`` drive it step by step (a host answers each effect);
``execute`` is the async driver over a ``Host``. A durable host resumes a run by
replaying its journal from the start (ADR 0012), so the state is never saved.
"""

from __future__ import annotations

from typing import Any

from lashflow.errors import LashflowError, LimitExceeded
from lashflow.interp import effects as fx
from lashflow.interp.compiler import Program
from lashflow.interp.errors import LashRuntimeError, ProcessFailed
from lashflow.interp.instructions import (
    BATCH, DISCARD, HANDLE, NONE, PAYLOAD, TERMINAL, WRAPPER,
)
from lashflow.interp.limits import ACTIVE, Limits, too_many_effects
from lashflow.interp.values import UNSET, failure_text, from_json
from lashflow.states import RunStatus

def normalize_wrapper(answer: Any) -> dict[str, Any]:
    """A host's answer to a call/await as a result wrapper value."""
    if type(answer) is dict and answer.get("ok") is True:
        return {"ok": True, "value": from_json(answer.get("value"))}
    if type(answer) is dict and answer.get("ok") is False:
        err = answer.get("error")
        return {"ok": False, "error": "unknown error" if err is None else failure_text(from_json(err))}
    return {"ok": False, "error": "malformed host answer"}


def normalize_handle(answer: Any) -> dict[str, Any]:
    if type(answer) is str:
        return {"__handle__": "process", "id": answer}
    return from_json(answer)


class Interpreter:
    """One run of one entry (the main block, or a process with its args)."""

    def __init__(self, program: Program, process: str | None = None,
                 args: dict[str, Any] | None = None, limits: Limits | None = None,
                 ordered_args: bool = False) -> None:
        entry = program.entry(process)
        self.program = program
        self.process = process
        self.limits = limits or Limits()
        self.code = entry.code
        self.spans = entry.spans
        self.slot_names = entry.slot_names
        self.env: list[Any] = [UNSET] * len(entry.slot_names)
        for name, value in (args or {}).items():
            slot = entry.slots.get(name)
            if slot is not None:
                self.env[slot] = from_json(value, ordered_args)
        self.stack: list[Any] = []
        self.occ: dict[str, int] = {}
        self.signals: dict[str, int] = {}
        self.effects = 0
        self.pc = 0
        self.expect: int | None = None
        self.started = False
        self.done = False
        self.pending: fx.Effect | None = None
        self._effect: fx.Effect | None = None

    # -- called by instructions -------------------------------------------------------------
    def step(self, site: str) -> str:
        n = self.occ.get(site, 0) + 1
        self.occ[site] = n
        return f"{site}:{n}"

    def suspend(self, effect: fx.Effect, expect: int) -> None:
        self._effect = effect
        self.expect = expect

    # -- driving ----------------------------------------------------------------------------
    def start(self) -> fx.Effect:
        """Run from the beginning to the first effect (``Finish``/``Fail`` included)."""
        if self.started:
            raise LashflowError("the interpreter was already started", code="usage_error")
        self.started = True
        return self._run(self.pc)

    def send(self, value: Any = None) -> fx.Effect:
        """Deliver the answer to the pending effect and run to the next one."""
        if self.done or self.expect is None:
            raise LashflowError("no effect is waiting for an answer", code="usage_error")
        try:
            if self.expect == WRAPPER:  # a call's answer, the common case: inline
                self.stack.append(normalize_wrapper(value))
            else:
                self._push_answer(self.expect, value)
        except RecursionError:
            self.done = True
            raise LimitExceeded("an effect's answer is nested too deeply") from None
        return self._run(self.pc)

    def _push_answer(self, expect: int | None, value: Any) -> None:
        if expect == WRAPPER:
            self.stack.append(normalize_wrapper(value))
        elif expect == BATCH:
            self.stack.append([normalize_wrapper(v) for v in value])
        elif expect == HANDLE:
            self.stack.append(normalize_handle(value))
        elif expect == PAYLOAD:
            self.stack.append(from_json(value))
        elif expect == NONE:
            self.stack.append(None)
        elif expect != DISCARD:
            raise LashflowError("the run has ended", code="usage_error")

    def _run(self, pc: int) -> fx.Effect:
        ACTIVE.reset(self.limits, (self.env, self.stack))
        self.expect = None
        self.pending = None
        code, env, stack = self.code, self.env, self.stack
        try:
            while pc >= 0:
                pc = code[pc](env, stack, self)
        except LashRuntimeError as e:
            self.done = True
            raise e.locate(self.program.source, self.spans[pc]) from None
        except RecursionError:
            self.done = True
            raise LimitExceeded("a value is nested too deeply") from None
        except LimitExceeded:
            self.done = True
            raise
        effect = self._effect
        assert effect is not None  # an instruction stops the loop only with an effect
        self._effect = None
        self.pc = ~pc  # instructions return ~resume_pc with their effect
        if self.expect == TERMINAL:
            self.done = True
        else:
            self.effects += (len(effect.calls) if isinstance(effect, fx.ToolBatch)
                             else len(effect.awaits) if isinstance(effect, fx.AwaitHandles)
                             else 1)
            if self.effects > self.limits.max_effects:
                self.done = True
                raise too_many_effects(self.limits)
        self.pending = effect
        return effect


async def execute(program: Program, host: fx.Host, process: str | None = None,
                  args: dict[str, Any] | None = None, limits: Limits | None = None,
                  ordered_args: bool = False) -> fx.RunResult:
    """Run an entry to its end over ``host``.

    Returns ``finished`` (value = the JSON of the finish value) or ``failed`` for ``fail v``
    (error = ``ProcessFailed``). Runtime errors raise ``LashRuntimeError``, limits
    ``LimitExceeded``; a host's ``Parked`` propagates.
    """
    vm = Interpreter(program, process, args, limits, ordered_args)
    prints: list[str] = []
    effect = vm.start()
    while True:
        if type(effect) is fx.Finish:
            await host.perform(effect)
            return fx.RunResult(RunStatus.FINISHED, effect.value, prints=prints)
        if type(effect) is fx.Fail:
            await host.perform(effect)
            error = ProcessFailed(effect.text, effect.value, effect.span)
            return fx.RunResult(RunStatus.FAILED, None, error, prints=prints)
        if type(effect) is fx.Observe and effect.kind == "print":
            prints.append(effect.text)
        try:
            answer = await host.perform(effect)
        except LashRuntimeError as e:  # the host could not perform it (bad sleep value, ...)
            vm.done = True
            raise e.locate(program.source, getattr(effect, "span", None)) from None
        effect = vm.send(answer)


__all__ = ["Interpreter", "execute", "normalize_wrapper"]
