"""Tool definitions and the provider protocol.

A ``ToolDefinition`` is the catalog-facing description of one tool (name, module,
schemas, options). ``RegisteredTool`` pairs it with the code that executes it: that is
all the dispatcher needs, whichever way the tool was written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from lashflow.tools.context import ToolCall
from lashflow.tools.results import ToolResult
from lashflow.tools.retry import RetryPolicy

from ..slotted import Frozen, replace

__all__ = ["RegisteredTool", "ToolDefinition", "ToolObject", "ToolProvider"]

ANY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
ON_EXHAUSTED = ("fail", "pause")  # what a call whose retries ran out does to its run


class ToolDefinition(Frozen):
    """One tool as the catalog and the dispatcher see it.

    ``idempotent=False`` means an attempt interrupted by a crash must not simply run
    again (the run stops in ``needs_attention``); ``output_tail`` makes the budget keep
    the end of big outputs; ``max_concurrency`` caps calls in flight engine-wide;
    ``on_exhausted="pause"``: when the retry policy runs out, the run is paused for an
    operator (the last error shown; ``retry`` continues it) instead of the call failing.
    ``rate`` (calls, period in seconds) or ``rate_limit`` (a named limit several tools
    share) and ``global_concurrency`` are held in the store, across every worker
    (``docs/rate-limits.md``).
    """

    __slots__ = ("id", "name", "description", "input_schema", "output_schema", "module",
                 "retry", "idempotent", "max_concurrency", "output_tail", "on_exhausted",
                 "rate", "rate_limit", "global_concurrency")
    id: str
    name: str
    description: str
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    module: str
    retry: RetryPolicy
    idempotent: bool
    max_concurrency: int | None
    output_tail: bool
    on_exhausted: str
    rate: tuple[float, float] | None
    rate_limit: str | None
    global_concurrency: int | None

    def __init__(
            self,
            id: str,
            name: str,
            description: str = "",
            input_schema: dict[str, Any] | None = ANY_OBJECT_SCHEMA,  # copied, not shared
            output_schema: dict[str, Any] | None = None,
            module: str = "tools",
            retry: RetryPolicy | None = None,  # None: RetryPolicy.never()
            idempotent: bool = True,
            max_concurrency: int | None = None,
            output_tail: bool = False,
            on_exhausted: str = "fail",
            rate: tuple[float, float] | None = None,
            rate_limit: str | None = None,
            global_concurrency: int | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "id", id)
        setter(self, "name", name)
        setter(self, "description", description)
        setter(self, "input_schema",
               dict(input_schema) if input_schema is ANY_OBJECT_SCHEMA else input_schema)
        setter(self, "output_schema", output_schema)
        setter(self, "module", module)
        setter(self, "retry", RetryPolicy.never() if retry is None else retry)
        setter(self, "idempotent", idempotent)
        setter(self, "max_concurrency", max_concurrency)
        setter(self, "output_tail", output_tail)
        setter(self, "on_exhausted", on_exhausted)
        setter(self, "rate", rate)
        setter(self, "rate_limit", rate_limit)
        setter(self, "global_concurrency", global_concurrency)
        if not self.id.strip() or not self.name.strip():
            raise ValueError("a tool needs a non-blank id and name")
        if not self.module.strip():
            raise ValueError("a tool's module cannot be blank")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if self.global_concurrency is not None and self.global_concurrency < 1:
            raise ValueError("global_concurrency must be at least 1")
        if self.rate is not None and self.rate_limit is not None:
            raise ValueError("a tool takes rate= (its own limit) or rate_limit= (a named "
                             "one), not both")
        if self.on_exhausted not in ON_EXHAUSTED:
            raise ValueError(f"on_exhausted is one of {', '.join(ON_EXHAUSTED)}, not "
                             f"{self.on_exhausted!r}")

    @classmethod
    def raw(
        cls,
        id: str,
        name: str,
        description: str = "",
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> "ToolDefinition":
        """As the original: id, name, description and JSON schemas (None: any object / any output)."""
        return cls(id, name, description, input_schema or dict(ANY_OBJECT_SCHEMA), output_schema, **options)

    def with_options(self, **options: Any) -> "ToolDefinition":
        """A copy with ``module``, ``retry``, ``idempotent``, ... changed."""
        return replace(self, **options)

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def bucket(self) -> str | None:
        """The name of the store's token bucket its calls take from, if any: the named
        limit, or ``tool:MODULE.NAME`` for a rate of its own."""
        if self.rate_limit is not None:
            return self.rate_limit
        return None if self.rate is None else f"tool:{self.qualified_name}"


@runtime_checkable
class ToolObject(Protocol):
    """A tool written as an object: a ``definition`` and ``async execute(call)``.

    It may also define ``async cancel_external(self, key)``.
    """

    definition: ToolDefinition

    async def execute(self, call: ToolCall) -> ToolResult: ...


@runtime_checkable
class ToolProvider(Protocol):
    """Hands out definitions and executes calls for all of them (``call.module``/``call.name``).

    May also define ``async cancel_external(self, definition, key)``.
    """

    def definitions(self) -> Iterable[ToolDefinition]: ...

    async def execute(self, call: ToolCall) -> ToolResult: ...


Execute = Callable[[ToolCall], Awaitable[Any]]
CancelExternal = Callable[[str], Awaitable[Any]]


class RegisteredTool(Frozen):
    """A definition bound to the code that runs it (and its optional cancel hook)."""

    __slots__ = ("definition", "execute", "cancel_external", "source")
    definition: ToolDefinition
    execute: Execute
    cancel_external: CancelExternal | None
    source: Any  # the object it came from (to tell re-registration from a clash)

    def __init__(self, definition: ToolDefinition, execute: Execute,
                 cancel_external: CancelExternal | None = None, source: Any = None) -> None:
        setter = object.__setattr__
        setter(self, "definition", definition)
        setter(self, "execute", execute)
        setter(self, "cancel_external", cancel_external)
        setter(self, "source", source)
