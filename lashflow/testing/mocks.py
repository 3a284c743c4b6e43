"""Tool mocks by name, and the record of every tool call a test's runs make.

A mock replaces what a tool *does* for one test and keeps what the engine knows of it:
a loaded tool keeps its definition (input schema, retry policy, idempotency), so retries,
validation and crash rules behave as in production. A mock of a tool that is not loaded
gets a definition of its own (any object as input), so a workflow can be tested before its
tools are written. Every call, mocked or not, is recorded with its input.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Iterator

from lashflow.tools import PendingCompletion, RetryPolicy, ToolCall, ToolResult
from lashflow.tools.definition import RegisteredTool, ToolDefinition
from lashflow.tools.registry import ToolRegistry

NO_OUTCOME_LEFT = "mock_exhausted"


@dataclass(frozen=True, slots=True)
class Pending:
    """A mock outcome: the call parks on a completion key (``deadline``: how long the
    key stays open, as ``PendingCompletion.with_deadline`` takes it). A test resolves it
    with ``env.complete`` or lets the deadline pass with ``env.advance``."""

    deadline: timedelta | float | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One call a tool took: its input as the tool saw it, and where it came from."""

    tool: str
    input: Any
    run_id: str
    step: str
    attempt: int


@dataclass(slots=True)
class ToolMock:
    """What one tool does in a test. ``outcomes`` are used one per call, in order (the
    last one repeats when ``repeat_last``); ``fn``, when given, answers every call
    instead. An outcome is a value (the tool returns it), an exception (the tool raises
    it: a retryable failure, retried by the tool's policy), a ``ToolResult`` or a
    ``Pending``."""

    name: str
    outcomes: list[Any] = field(default_factory=list)
    fn: Callable[[Any], Any] | None = None
    repeat_last: bool = False
    retry: RetryPolicy | None = None
    idempotent: bool | None = None
    calls: list[Call] = field(default_factory=list)

    @property
    def call_count(self) -> int:
        return len(self.calls)

    @property
    def inputs(self) -> list[Any]:
        """The input of each call, in order."""
        return [call.input for call in self.calls]

    def definition_for(self, found: ToolDefinition | None) -> ToolDefinition:
        """The registered definition with this mock's options, or one of its own."""
        if found is None:
            module, _, name = self.name.rpartition(".")
            found = ToolDefinition(self.name, name, f"mock of {self.name}", module=module or "tools")
        options: dict[str, Any] = {}
        if self.retry is not None:
            options["retry"] = self.retry
        if self.idempotent is not None:
            options["idempotent"] = self.idempotent
        return found.with_options(**options) if options else found

    async def answer(self, call: ToolCall) -> Any:
        """This mock's answer to its ``len(calls)``-th call (already recorded)."""
        if self.fn is not None:
            returned = self.fn(call.input)
            if inspect.isawaitable(returned):
                returned = await returned
            return await _outcome(returned, call)
        index = len(self.calls) - 1
        if index >= len(self.outcomes):
            if not (self.repeat_last and self.outcomes):
                return ToolResult.failure(
                    f"mock of {self.name} has no outcome left for call {index + 1} "
                    f"(it was given {len(self.outcomes)})", code=NO_OUTCOME_LEFT)
            index = len(self.outcomes) - 1
        return await _outcome(self.outcomes[index], call)


async def _outcome(outcome: Any, call: ToolCall) -> Any:
    """Act one outcome out, as a tool's code would."""
    if isinstance(outcome, BaseException) or (isinstance(outcome, type)
                                               and issubclass(outcome, BaseException)):
        raise outcome
    if isinstance(outcome, Pending):
        await call.context.completion_key()  # a pending call parks on its key
        completion = PendingCompletion()
        if outcome.deadline is not None:
            completion = completion.with_deadline(outcome.deadline)
        return ToolResult.pending(completion)
    return outcome


BEHAVIOURS = ("returns", "raises", "outcomes", "pending", "fn")


def mock_of(name: str, behaviour: dict[str, Any], *, retry: RetryPolicy | None = None,
            idempotent: bool | None = None) -> ToolMock:
    """A ``ToolMock`` from exactly one behaviour: ``returns`` (a value every call),
    ``raises`` (an exception every call), ``outcomes`` (one per call), ``pending`` (a
    ``Pending``, or True: park with no deadline) or ``fn`` (a function of the input)."""
    if "." not in name:
        name = f"tools.{name}"
    chosen = sorted(behaviour)
    if len(chosen) != 1 or chosen[0] not in BEHAVIOURS:
        raise TypeError(f"mock {name}: give exactly one of returns=, raises=, outcomes=, "
                        f"pending= or fn= (got {', '.join(chosen) or 'none'})")
    kind, value = chosen[0], behaviour[chosen[0]]
    mock = ToolMock(name, retry=retry, idempotent=idempotent)
    if kind == "outcomes":
        mock.outcomes = list(value)
    elif kind == "fn":
        if not callable(value):
            raise TypeError(f"mock {name}: fn= must be callable")
        mock.fn = value
    else:
        if kind == "pending" and not isinstance(value, Pending):
            value = Pending()
        mock.outcomes, mock.repeat_last = [value], True
    return mock


Observer = Callable[[Call], None]  # told a call returned; may raise to crash the drive


class MockingRegistry(ToolRegistry):
    """A ``ToolRegistry`` that hands the dispatcher each tool wrapped: the call recorded,
    then the mock's answer (or the real tool's), then the observer told it returned."""

    def __init__(self, mocks: dict[str, ToolMock], calls: list[Call], observe: Observer) -> None:
        super().__init__()
        self.mocks = mocks  # by qualified name, shared with the environment
        self.calls = calls
        self.observe = observe

    def _mock(self, module: str, name: str) -> ToolMock | None:
        return self.mocks.get(f"{module}.{name}")

    def get(self, module: str, name: str) -> RegisteredTool:
        mock = self._mock(module, name)
        found = super().get(module, name) if mock is None or super().__contains__(
            (module, name)) else None
        definition = mock.definition_for(found.definition if found else None) if mock else (
            found.definition if found else None)
        assert definition is not None
        real = found.execute if found is not None else None
        qualified = f"{module}.{name}"

        async def execute(call: ToolCall) -> Any:
            context = call.context
            record = Call(qualified, call.input, context.run_id, context.step_key, context.attempt)
            self.calls.append(record)
            if mock is not None:
                mock.calls.append(record)
            if mock is not None:
                returned = await mock.answer(call)
            else:
                assert real is not None
                returned = await real(call)
            self.observe(record)
            return returned

        return RegisteredTool(definition, execute,
                              found.cancel_external if found is not None else None,
                              found.source if found is not None else mock)

    lookup = get

    def __contains__(self, key: object) -> bool:
        if isinstance(key, tuple) and len(key) == 2 and self._mock(*key) is not None:
            return True
        return super().__contains__(key)

    def _mock_only(self) -> list[ToolMock]:
        registered = ToolRegistry.__contains__
        return [mock for qualified, mock in self.mocks.items()
                if not registered(self, tuple(qualified.rsplit(".", 1)))]

    def __iter__(self) -> Iterator[RegisteredTool]:
        listed = [self.get(e.definition.module, e.definition.name) for e in super().__iter__()]
        return iter(listed + [self.get(*m.name.rsplit(".", 1)) for m in self._mock_only()])

    def __len__(self) -> int:
        return super().__len__() + len(self._mock_only())

    def definitions(self) -> list[ToolDefinition]:
        return [entry.definition for entry in self]


__all__ = ["BEHAVIOURS", "Call", "MockingRegistry", "NO_OUTCOME_LEFT", "Pending", "ToolMock", "mock_of"]
