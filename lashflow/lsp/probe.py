"""The child process that loads a file's tools for the language server.

``python -m lashflow.lsp.probe FILE [SPEC...]`` imports the tools the way ``lashflow
check`` does (``tool_modules_for``) and prints one JSON object: each tool's module, name,
docstring, schemas and the file and line of its ``def``, and the files to watch (a change
to any of them means loading again). User code runs here, in a fresh interpreter each
time, never in the server: a reload sees every edited module, and a tool module that
hangs or crashes costs the editor nothing but this process.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

from lashflow.errors import LashflowError
from lashflow.tools import ToolRegistry, tools_in_module
from lashflow.tools.loading import CONFIG_FILES, project_dir, tool_modules_for
from ..json_text import ascii_compact


def _location(source: Any) -> tuple[str | None, int | None]:
    """The file and 1-based line of the ``def`` (or ``class``) a tool comes from."""
    target = getattr(source, "fn", source)
    target = inspect.unwrap(target) if callable(target) else target
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        target = type(target)
    try:
        file = inspect.getsourcefile(target)
        lines, first = inspect.getsourcelines(target)
    except (OSError, TypeError):
        return None, None
    for offset, text in enumerate(lines):
        if text.lstrip().startswith(("async def ", "def ", "class ")):
            return file, first + offset
    return file, first


def watched(lash_file: Path, modules: list[Any]) -> list[str]:
    """Files whose change means the tools must be loaded again (some may not exist yet)."""
    files = {str(lash_file.with_suffix(".py").resolve())}
    project = project_dir(lash_file.parent)
    if project is not None:
        files.update(str(project / name) for name in CONFIG_FILES)
    files.update(str(Path(m.__file__).resolve()) for m in modules if getattr(m, "__file__", None))
    return sorted(files)


def probe(lash_file: Path, specs: list[str]) -> dict[str, Any]:
    try:
        modules = tool_modules_for(lash_file, specs)
        registry = ToolRegistry()
        for module in modules:
            registry.add(*tools_in_module(module))
    except LashflowError as exc:
        return {"ok": False, "error": {"code": exc.code, "message": exc.message},
                "files": watched(lash_file, [])}
    tools = []
    for entry in registry:
        d = entry.definition
        file, line = _location(entry.source)
        tools.append({"module": d.module, "name": d.name, "description": d.description,
                      "input_schema": d.input_schema, "output_schema": d.output_schema,
                      "file": file, "line": line})
    return {"ok": True, "tools": tools, "files": watched(lash_file, modules)}


def main(argv: list[str]) -> int:
    lash_file = Path(argv[0])
    result = probe(lash_file, argv[1:])
    real_stdout = sys.__stdout__
    assert real_stdout is not None
    real_stdout.write(ascii_compact(result) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.stdout = sys.stderr  # a tool module that prints must not corrupt the answer
    sys.exit(main(sys.argv[1:]))
