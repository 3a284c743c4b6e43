"""Lashlang front end: ``parse`` (text -> AST), ``link`` (AST + tool catalog -> checked
module with site ids) and ``check`` (both, as a list of diagnostics).

Importing this package is cheap: Lark and the parser tables load on the first parse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lashflow.lang.catalog import Catalog, Operation
from lashflow.lang.diagnostics import Diagnostic, LangError

if TYPE_CHECKING:
    from lashflow.lang.ast import Module

__all__ = ["parse", "link", "check", "Diagnostic", "LangError", "Catalog", "Operation"]


def parse(source: str) -> "Module":
    """Parse Lashlang source into a ``Module``; raises ``LangError`` (``parse_error``)."""
    from lashflow.lang.parser import parse as _parse

    return _parse(source)


def link(module: "Module", catalog: Catalog | None = None) -> "Module":
    """Check names, tools and types; fill module paths and site ids; raise ``LangError``."""
    from lashflow.lang.linker import link as _link

    return _link(module, catalog)


def check(source: str, catalog: Catalog | None = None) -> list[Diagnostic]:
    """Parse and link ``source``; an empty list means it is fine. Never raises for bad input."""
    try:
        link(parse(source), catalog)
    except LangError as exc:
        return [exc.diagnostic]
    return []


def compile_source(source: str, catalog: Catalog | None = None) -> "Module":
    """``link(parse(source), catalog)``: the checked module, or ``LangError``."""
    return link(parse(source), catalog)


def __getattr__(name: str) -> Any:  # pragma: no cover - convenience for `lang.ast`
    if name in ("ast", "types", "sites", "linker", "parser"):
        import importlib

        return importlib.import_module(f"lashflow.lang.{name}")
    raise AttributeError(name)
