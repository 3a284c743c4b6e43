"""The tool catalog the linker checks host calls against.

It is plain data (module path -> operation name -> JSON schemas) so the language knows
nothing about how tools are implemented; ``Catalog.of(registry.definitions())`` builds
one from the tool layer's definitions.
"""

from __future__ import annotations

from typing import Any, Iterable

from lashflow.lang.record import field, record


@record(frozen=True)
class Operation:
    name: str
    input_schema: dict[str, Any] | None = None  # None: any input
    output_schema: dict[str, Any] | None = None  # None: any output
    description: str = ""


@record
class Catalog:
    """``modules["tools"]["quote"]`` is the operation ``tools.quote``."""

    modules: dict[str, dict[str, Operation]] = field(default_factory=dict)

    def add(self, module: str, operation: Operation) -> None:
        self.modules.setdefault(module, {})[operation.name] = operation

    def operation(self, module: str, name: str) -> Operation | None:
        return self.modules.get(module, {}).get(name)

    @classmethod
    def of(cls, definitions: Iterable[Any]) -> "Catalog":
        """From tool definitions: anything with ``module``, ``name``, ``input_schema``,
        ``output_schema`` and ``description`` (the tool layer's ``ToolDefinition``)."""
        catalog = cls()
        for d in definitions:
            catalog.add(d.module, Operation(d.name, d.input_schema, d.output_schema,
                                            d.description))
        return catalog

    @classmethod
    def permissive(cls, names: dict[str, list[str]]) -> "Catalog":
        """A catalog of ``any -> any`` operations, e.g. ``{"tools": ["read", "inc"]}``."""
        catalog = cls()
        for module, ops in names.items():
            for op in ops:
                catalog.add(module, Operation(op))
        return catalog
