"""``@tool``: an async function becomes a tool, its schemas taken from type hints.

Typed parameters become a pydantic model (extra keys refused, as Python would refuse
an unknown keyword); a parameter annotated ``ToolCall`` receives the raw call instead.
The return annotation, when given, validates and serializes the output.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Callable
from typing import Any, overload

from lashflow.tools.context import ToolCall
from lashflow.tools.definition import ANY_OBJECT_SCHEMA, ToolDefinition
from lashflow.tools.limits import limit_options
from lashflow.tools.plain_types import fast_arguments, fast_output, plain_input_schema, plain_schema
from lashflow.tools.results import ToolResult
from lashflow.tools.retry import RetryPolicy
from lashflow.tools.validation import condensed

__all__ = ["FunctionTool", "tool"]


def _is_tool_result(annotation: Any) -> bool:
    if annotation is ToolResult:
        return True
    return any(_is_tool_result(arg) for arg in typing.get_args(annotation))


def _describe(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].strip()


class FunctionTool:
    """What ``@tool`` returns: still callable like the function, plus ``definition``/``execute``."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        module: str = "tools",
        description: str | None = None,
        retry: RetryPolicy | None = None,
        idempotent: bool = True,
        max_concurrency: int | None = None,
        output_tail: bool = False,
        cancel_external: Callable[[str], Any] | None = None,
        on_exhausted: str = "fail",
        rate: str | tuple[float, float] | None = None,
        rate_limit: str | None = None,
        global_concurrency: int | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@tool needs an `async def` function, got {fn!r}")
        if cancel_external is not None and not inspect.iscoroutinefunction(cancel_external):
            raise TypeError("cancel_external must be an `async def` function taking the key")
        self.fn = fn
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "tool")
        self.__doc__ = fn.__doc__
        self._cancel_hook = cancel_external

        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:  # unresolvable forward reference: say which tool
            raise TypeError(f"cannot resolve the type hints of tool {self.__name__!r}: {exc}") from exc
        self._call_param: str | None = None
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.__name__!r}: *args/**kwargs cannot be described as a schema")
            annotation = hints.get(param.name, Any)
            if annotation is ToolCall:
                self._call_param = param.name
                continue
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, default)
        self._fields = fields
        self._input_model: Any = None  # built on first need (see plain_types)
        self._plain_input = False
        if fields:
            input_schema = plain_input_schema(f"{self.__name__}_input", fields)
            self._plain_input = input_schema is not None
            if input_schema is None:
                input_schema = self._model().model_json_schema()
        else:
            input_schema = dict(ANY_OBJECT_SCHEMA)

        returns = hints.get("return", inspect.Signature.empty)
        self._returns: Any = None  # None: the output is not validated
        self._output_adapter: Any = None
        output_schema = None
        if returns is not inspect.Signature.empty and returns is not Any and not _is_tool_result(returns):
            self._returns = returns
            output_schema = plain_schema(returns)
            if output_schema is None:
                output_schema = self._adapter().json_schema(mode="serialization")

        tool_name = name or self.__name__
        self.definition = ToolDefinition(
            id=f"{module}.{tool_name}",
            name=tool_name,
            description=_describe(fn) if description is None else description,
            input_schema=input_schema,
            output_schema=output_schema,
            module=module,
            retry=retry or RetryPolicy.never(),
            idempotent=idempotent,
            max_concurrency=max_concurrency,
            output_tail=output_tail,
            on_exhausted=on_exhausted,
            **limit_options(tool_name, rate, rate_limit, global_concurrency),
        )

    def _model(self) -> Any:
        """The pydantic input model (extra keys refused), made once, when first needed."""
        if self._input_model is None:
            from pydantic import ConfigDict, create_model

            self._input_model = create_model(
                f"{self.__name__}_input", __config__=ConfigDict(extra="forbid"), **self._fields
            )
        return self._input_model

    def _adapter(self) -> Any:
        if self._output_adapter is None:
            from pydantic import TypeAdapter

            self._output_adapter = TypeAdapter(self._returns)
        return self._output_adapter

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calling the tool directly calls the function (handy in unit tests)."""
        return self.fn(*args, **kwargs)

    @property
    def cancel_hook(self) -> Callable[[str], Any] | None:
        return self._cancel_hook

    async def execute(self, call: ToolCall) -> ToolResult:
        kwargs: dict[str, Any] = {}
        if self._fields:
            data = call.input if call.input is not None else {}
            fast = fast_arguments(self._fields, data) if self._plain_input else None
            if fast is not None:
                kwargs = fast
            else:
                # built (pydantic imported) on first need, off the loop: the other calls
                # of a batch go on meanwhile
                model = self._input_model or await asyncio.to_thread(self._model)
                from pydantic import ValidationError

                try:
                    parsed = model.model_validate(data)
                except ValidationError as exc:
                    return ToolResult.err(f"invalid input of {self.definition.qualified_name}:\n"
                                          f"{condensed(exc)}", code="tool_input_invalid")
                kwargs = {field: getattr(parsed, field) for field in self._fields}
        if self._call_param is not None:
            kwargs[self._call_param] = call
        returned = await self.fn(**kwargs)
        if isinstance(returned, ToolResult):
            if not returned.is_ok or self._returns is None:
                return returned
            returned = returned.value
        if self._returns is not None and fast_output(self._returns, returned):
            return ToolResult.ok(returned)  # the common case: no coroutine of its own
        return await self._checked_output(returned)

    async def _checked_output(self, value: Any) -> ToolResult:
        """Output that is not plainly its annotation's JSON already, checked by pydantic."""
        if self._returns is None:
            try:
                return ToolResult.ok(value)
            except Exception as exc:  # not JSON-representable
                return ToolResult.failure(f"tool output is not JSON data: {exc}", code="tool_output_invalid")
        # built on first need, off the loop (importing pydantic and building a validator
        # takes ~80 ms the first time: no other call of a batch may wait for that)
        adapter = self._output_adapter or await asyncio.to_thread(self._adapter)
        from pydantic import ValidationError

        try:
            validated = adapter.validate_python(value)
            return ToolResult.ok(adapter.dump_python(validated, mode="json"))
        except ValidationError as exc:
            return ToolResult.failure(f"invalid output of {self.definition.qualified_name}:\n"
                                      f"{condensed(exc)}", code="tool_output_invalid")
        except Exception as exc:  # serialization failure
            return ToolResult.failure(f"tool output is not JSON data: {exc}", code="tool_output_invalid")

    def __repr__(self) -> str:
        return f"<tool {self.definition.qualified_name}>"


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    module: str = "tools",
    description: str | None = None,
    retry: RetryPolicy | None = None,
    idempotent: bool = True,
    max_concurrency: int | None = None,
    output_tail: bool = False,
    cancel_external: Callable[[str], Any] | None = None,
    on_exhausted: str = "fail",
    rate: str | tuple[float, float] | None = None,
    rate_limit: str | None = None,
    global_concurrency: int | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make an async function a tool: ``@tool`` or ``@tool(name=..., module=..., ...)``."""
    if fn is not None:
        return FunctionTool(fn, **options)

    def decorate(inner: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(inner, **options)

    return decorate
