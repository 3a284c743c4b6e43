"""What a tool sees while one attempt runs: ``ToolCall`` and its ``ToolContext``.

The context is a per-attempt capability bag: attempt numbers, the idempotency key, the
completion key, direct model completions (usage recorded on this attempt) and the
(refused) nested dispatch.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lashflow.errors import LashflowError
from lashflow.telemetry.tracing import current_traceparent
from lashflow.tools.budget import DEFAULT_HINT
from lashflow.tools.keys import CompletionKey, KeyRing
from lashflow.tools.models import CompletionRequest, CompletionResponse, ModelProvider
from lashflow.tools.results import ToolResult

from ..slotted import Slotted, replace

__all__ = [
    "DirectCompletions", "NESTED_DISPATCH_MESSAGE", "NestedDispatch", "ToolCall", "ToolContext",
]

NESTED_DISPATCH_MESSAGE = (
    "nested tool batch dispatch is unavailable inside an atomic tool attempt; "
    "decompose the work into process steps"
)


class NestedDispatch:
    """``call.context.dispatch()``: refuses every call, runs nothing.

    An attempt is one journal entry; work needing several durable effects belongs in a
    process where each awaited call is its own attempt.
    """

    __slots__ = ()

    async def batch(self, calls: Iterable[Any]) -> list[ToolResult]:
        return [ToolResult.err(NESTED_DISPATCH_MESSAGE, code="nested_tool_dispatch_unavailable") for _ in calls]


class DirectCompletions:
    """``call.context.direct_completions()``: the engine's model, inside this attempt."""

    __slots__ = ("_provider", "_context")

    def __init__(self, provider: ModelProvider | None, context: "ToolContext") -> None:
        self._provider = provider
        self._context = context

    async def complete(self, request: CompletionRequest | dict[str, Any] | str) -> CompletionResponse:
        if self._provider is None:
            raise LashflowError("no model provider is configured for direct completions",
                                code="model_provider_missing")
        request = CompletionRequest.coerce(request)
        projector = self._context._projector
        if projector is not None and any(m.get("role") == "tool" for m in request.messages):
            # Tool results sent on to a model pass the output budget.
            request = replace(request, messages=[
                {**m, "content": projector.project(m.get("content"), hint=DEFAULT_HINT)} if m.get("role") == "tool"
                else m
                for m in request.messages
            ])
        response = await self._provider.complete(request)
        self._context._record_usage(response)
        return response


class ToolContext:
    """Per-attempt facts and capabilities handed to a tool as ``call.context``."""

    __slots__ = (
        "_run_id", "_step_key", "_attempt", "_max_attempts", "_keys", "_minted", "_provider",
        "_projector", "_cancellation", "usage", "_rate_slot",
    )

    def __init__(
        self,
        *,
        run_id: str = "local",
        step_key: str = "0",
        attempt: int = 1,
        max_attempts: int = 1,
        keys: KeyRing | None = None,
        model_provider: ModelProvider | None = None,
        projector: Any = None,
        cancellation: asyncio.Event | None = None,
        rate_slot: float | None = None,
    ) -> None:
        self._run_id = run_id
        self._rate_slot = rate_slot
        self._step_key = step_key
        self._attempt = max(1, attempt)
        self._max_attempts = max(1, max_attempts, self._attempt)
        self._keys = keys
        self._minted: CompletionKey | None = None
        self._provider = model_provider
        self._projector = projector
        self._cancellation = cancellation
        self.usage: dict[str, int] = {}

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def step_key(self) -> str:
        return self._step_key

    @property
    def attempt(self) -> int:
        """1-based number of this attempt (from the journal, so it survives crashes)."""
        return self._attempt

    @property
    def max_attempts(self) -> int:
        return self._max_attempts

    @property
    def rate_slot(self) -> float | None:
        """When this attempt's rate-limit slot began (epoch seconds), if its tool has a
        rate: slots of one limit are at least ``period / n`` apart across every worker,
        and the attempt starts at or after its own (None: no rate)."""
        return self._rate_slot

    @property
    def idempotency_key(self) -> str:
        """``<run_id>/<step_key>``: the same in every attempt; pass it to external APIs."""
        return f"{self._run_id}/{self._step_key}"

    async def completion_key(self) -> CompletionKey:
        """This call's completion key (the same in every attempt, retry and replay)."""
        if self._minted is None:
            if self._keys is None:
                self._keys = KeyRing()
            self._minted = self._keys.key_for(self._run_id, self._step_key)
        return self._minted

    async def completion_url(self, base: str | None = None) -> str:
        """The URL an outside service POSTs this call's result to (``lashflow serve``'s
        webhook): ``base`` or ``$LASHFLOW_PUBLIC_URL`` (where the server is reachable),
        then ``/v1/completions/<key>``. The key in it is the credential: hand it only to
        the service that should answer."""
        root = base or os.environ.get("LASHFLOW_PUBLIC_URL")
        if not root:
            raise LashflowError("completion_url() needs the server's public address: set "
                                "LASHFLOW_PUBLIC_URL (e.g. https://flows.example.com) or "
                                "pass base=", code="usage_error")
        return f"{root.rstrip('/')}/v1/completions/{await self.completion_key()}"

    @property
    def minted_key(self) -> CompletionKey | None:
        """The key if ``completion_key()`` was called in this attempt."""
        return self._minted

    def dispatch(self) -> NestedDispatch:
        return NestedDispatch()

    def direct_completions(self) -> DirectCompletions:
        return DirectCompletions(self._provider, self)

    @property
    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of this attempt's span when the engine traces (see
        docs/observability.md), to hand to a service the tool calls; else None. Tools
        whose HTTP client is instrumented by OpenTelemetry join the trace without it."""
        return current_traceparent()

    @property
    def cancelled(self) -> bool:
        """True once the call is being cancelled; long tools may check it and stop early."""
        return self._cancellation is not None and self._cancellation.is_set()

    def _record_usage(self, response: CompletionResponse) -> None:
        usage = self.usage
        usage["requests"] = usage.get("requests", 0) + 1
        usage["input_tokens"] = usage.get("input_tokens", 0) + response.usage.input_tokens
        usage["output_tokens"] = usage.get("output_tokens", 0) + response.usage.output_tokens


class ToolCall(Slotted):
    """One call as the tool sees it: the JSON ``input`` object, its name and context.

    The call an attempt hands its tool (``of_attempt``) makes its context when the tool
    first reads it: a ``@tool`` function with typed parameters never does, so most
    attempts make none (a context's eleven fields were about 3% of a short call's CPU).
    """

    __slots__ = ("input", "name", "module", "context", "_facts")

    def __init__(
            self,
            input: Any,
            name: str,
            module: str = "tools",
            context: ToolContext | None = None,
    ) -> None:
        self.input = input
        self.name = name
        self.module = module
        self.context = ToolContext() if context is None else context
        self._facts: tuple[Any, ...] | None = None  # None: ``context`` is made

    @classmethod
    def of_attempt(cls, input: Any, name: str, module: str, run_id: str, step_key: str,
                   attempt: int, max_attempts: int, keys: KeyRing | None,
                   model_provider: ModelProvider | None, projector: Any,
                   cancellation: asyncio.Event | None, rate_slot: float | None) -> "ToolCall":
        """An attempt's call, its context made from these facts when first read."""
        call = cls.__new__(cls)
        call.input = input
        call.name = name
        call.module = module
        call._facts = (run_id, step_key, attempt, max_attempts, keys, model_provider, projector,
                       cancellation, rate_slot)
        return call

    if not TYPE_CHECKING:  # (a ``__getattr__`` would make every unknown name Any to mypy)
        def __getattr__(self, name: str) -> Any:
            """Reached only for a field not set: an attempt's context, not read till now."""
            facts = self._facts
            if name != "context" or facts is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            run_id, step_key, attempt, max_attempts, keys, provider, projector, cancel, slot = facts
            context = self.context = ToolContext(
                run_id=run_id, step_key=step_key, attempt=attempt, max_attempts=max_attempts,
                keys=keys, model_provider=provider, projector=projector, cancellation=cancel,
                rate_slot=slot)
            self._facts = None
            return context

    def made_context(self) -> ToolContext | None:
        """The context if it was made (given, or read by the tool); None if never read."""
        return self.context if self._facts is None else None

    def _values(self) -> tuple[Any, ...]:
        return (self.input, self.name, self.module, self.context)

    def __repr__(self) -> str:
        return (f"ToolCall(input={self.input!r}, name={self.name!r}, module={self.module!r}, "
                f"context={self.context!r})")
