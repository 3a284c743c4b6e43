"""The runtime plugin stack and its one exclusive slot: the tool-result projector.

The projector is what every site that shows an output uses (dispatch results, what a
model is sent next, run history), so there must be exactly one; a second is refused
with ``PluginError`` when the stack is validated (``Engine`` start, ``Dispatcher``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from lashflow.errors import PluginError
from lashflow.tools.budget import DEFAULT_HINT, ToolOutputBudgetConfig, project_output
from lashflow.json_text import compact_any as compact

__all__ = [
    "PluginFactory", "PluginStack", "TOOL_RESULT_PROJECTOR", "ToolOutputBudgetPluginFactory",
    "ToolOutputBudgetProjector", "ToolResultProjector", "runtime_plugin_stack",
]

TOOL_RESULT_PROJECTOR = "tool_result_projector"


@runtime_checkable
class ToolResultProjector(Protocol):
    def project(self, value: Any, *, tail: bool = False, hint: str = DEFAULT_HINT) -> str: ...


class PluginFactory(Protocol):
    """A plugin: a stable ``plugin_id``, the exclusive ``slots`` it fills, and ``build()``."""

    plugin_id: str
    slots: frozenset[str]

    def build(self) -> Any: ...


class ToolOutputBudgetProjector:
    """The default projector: ``project_output`` under one config."""

    def __init__(self, config: ToolOutputBudgetConfig) -> None:
        self.config = config

    def project(self, value: Any, *, tail: bool = False, hint: str = DEFAULT_HINT) -> str:
        return project_output(value, self.config, tail=tail, hint=hint)


class _PassThroughProjector:
    """Used only when a stack holds no projector: outputs shown in full."""

    def project(self, value: Any, *, tail: bool = False, hint: str = DEFAULT_HINT) -> str:
        return value if isinstance(value, str) else compact(value)


class ToolOutputBudgetPluginFactory:
    """Plugin ``tool_output_budget``: fills the tool-result projector slot."""

    plugin_id = "tool_output_budget"
    slots = frozenset({TOOL_RESULT_PROJECTOR})

    def __init__(self, config: ToolOutputBudgetConfig | None = None) -> None:
        self.config = config or ToolOutputBudgetConfig()

    def build(self) -> ToolOutputBudgetProjector:
        return ToolOutputBudgetProjector(self.config)

    def __repr__(self) -> str:
        return f"ToolOutputBudgetPluginFactory({self.config!r})"


class PluginStack:
    """An ordered list of plugin factories, checked as a whole by ``validate()``."""

    def __init__(self, factories: list[Any] | None = None) -> None:
        self._factories: list[Any] = list(factories or [])

    @property
    def factories(self) -> tuple[Any, ...]:
        return tuple(self._factories)

    def push(self, factory: Any) -> "PluginStack":
        self._factories.append(factory)
        return self

    def replace(self, factory: Any) -> "PluginStack":
        """Swap the factory that has the same ``plugin_id`` (it must be there)."""
        for index, existing in enumerate(self._factories):
            if existing.plugin_id == factory.plugin_id:
                self._factories[index] = factory
                return self
        raise PluginError(f"no plugin `{factory.plugin_id}` to replace")

    def configure(self, fn: Callable[["PluginStack"], Any]) -> "PluginStack":
        fn(self)
        return self

    def validate(self) -> "PluginStack":
        """Refuse duplicate plugin ids and a second filler of any exclusive slot."""
        ids: set[str] = set()
        owners: dict[str, str] = {}
        for factory in self._factories:
            for slot in getattr(factory, "slots", ()):
                if slot in owners:
                    what = "tool result projector" if slot == TOOL_RESULT_PROJECTOR else slot
                    raise PluginError(
                        f"duplicate {what}: `{factory.plugin_id}` conflicts with `{owners[slot]}`"
                        " (replace the plugin instead of pushing another)"
                    )
                owners[slot] = factory.plugin_id
            if factory.plugin_id in ids:
                raise PluginError(f"plugin `{factory.plugin_id}` is registered twice")
            ids.add(factory.plugin_id)
        return self

    def projector(self) -> ToolResultProjector:
        """The validated stack's projector (outputs pass in full when there is none)."""
        self.validate()
        for factory in self._factories:
            if TOOL_RESULT_PROJECTOR in getattr(factory, "slots", ()):
                projector: ToolResultProjector = factory.build()
                return projector
        return _PassThroughProjector()

    def __repr__(self) -> str:
        return f"PluginStack({self._factories!r})"


def runtime_plugin_stack() -> PluginStack:
    """A fresh default stack: the output budget with its default config."""
    return PluginStack([ToolOutputBudgetPluginFactory()])
