"""Checking a ``.lash`` file as a run would see it, running nothing and opening no database.

The file is linked against the tools it would run with: ``--tools`` modules, the
project's configured ones and the ``.py`` beside it (``tool_modules_for``), loaded into a
registry of their own. The answer is data; the caller presents it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..lang.diagnostics import Diagnostic
from ..lang.record import field, record
from .programs import read_source_file


@record
class FileCheck:
    """What ``check_file`` found: the text, its diagnostics (empty: fine) and, when fine,
    its entry points and the fan-outs that run as one concurrent batch."""

    path: Path
    text: str
    diagnostics: list[Diagnostic]
    main: bool = False
    processes: list[dict[str, Any]] = field(default_factory=list)
    fan_outs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diagnostics


def check_file(path: Path, modules: Iterable[str] = ()) -> FileCheck:
    """Parse and link ``path`` against its tools; unreadable files raise the usual
    ``file_not_found``/``usage_error``/``limit_exceeded``."""
    from ..lang import check, parse
    from ..lang.catalog import Catalog
    from ..lang.graph import fan_outs
    from ..tools import ToolRegistry, tools_in_module
    from ..tools.loading import tool_modules_for

    text = read_source_file(path)
    registry = ToolRegistry()
    for module in tool_modules_for(path, modules):
        registry.add(*tools_in_module(module))
    diagnostics = check(text, Catalog.of(registry.definitions()))
    if diagnostics:
        return FileCheck(path, text, diagnostics)
    tree = parse(text)
    processes = [{"name": p.name, "params": [q.name for q in p.params]} for p in tree.processes]
    return FileCheck(path, text, [], bool(tree.main), processes, fan_outs(tree, text))


__all__ = ["FileCheck", "check_file"]
