"""Finding tool code: ``.py`` paths, module names and ``[tool.lashflow] tools = [...]``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterable
from typing import Any
from pathlib import Path

from lashflow.errors import LashflowError, UsageError

__all__ = ["load_tool_modules", "tools_from_config", "project_dir", "tool_modules_for"]

CONFIG_FILES = ("pyproject.toml", "lashflow.toml")


def _looks_like_path(spec: str | Path) -> bool:
    text = str(spec)
    return isinstance(spec, Path) or text.endswith(".py") or "/" in text or "\\" in text


def _import_path(path: Path) -> types.ModuleType:
    path = path.resolve()
    if not path.is_file():
        raise UsageError(f"tool file not found: {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"lashflow_tools_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load tools from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses and pydantic look the module up
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _load_error(path, exc) from exc
    return module


def _import_name(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise UsageError(f"tool module not found: {name}") from exc
        raise UsageError(f"cannot load tools from {name}: {exc}") from exc
    except Exception as exc:
        raise _load_error(name, exc) from exc


def _load_error(where: object, exc: Exception) -> LashflowError:
    """One line saying why a tool module did not load; a lashflow error raised while it
    loaded (a bad ``@tool`` option) keeps its code."""
    if isinstance(exc, LashflowError):
        return LashflowError(f"cannot load tools from {where}: {exc.message}", code=exc.code)
    return UsageError(f"cannot load tools from {where}: {type(exc).__name__}: {exc}")


def load_tool_modules(specs: Iterable[str | Path], *, base_dir: str | Path | None = None) -> list[types.ModuleType]:
    """Import each spec: a ``.py`` path (relative to ``base_dir``) or a module name.

    With ``base_dir``, module names are also looked up there (as a project's own code
    would be). Errors are ``UsageError`` with one clear line.
    """
    base = Path(base_dir) if base_dir is not None else None
    modules = []
    for spec in specs:
        if _looks_like_path(spec):
            path = Path(spec)
            if base is not None and not path.is_absolute():
                path = base / path
            modules.append(_import_path(path))
            continue
        root = str(base.resolve()) if base is not None else None
        added = root is not None and root not in sys.path
        if added:
            sys.path.insert(0, str(root))
        try:
            modules.append(_import_name(str(spec)))
        finally:
            if added:
                sys.path.remove(str(root))
    return modules


def lashflow_tables(directory: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """The ``[tool.lashflow]`` table of each of the folder's config files (``pyproject.toml``,
    then ``lashflow.toml``) that has one: the project configuration."""
    found: list[tuple[Path, dict[str, Any]]] = []
    for filename in CONFIG_FILES:
        path = Path(directory) / filename
        if not path.is_file():
            continue
        import tomllib  # only when a config file exists: keeps start-up light

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: invalid TOML: {exc}") from exc
        table = data.get("tool", {}).get("lashflow", {})
        if isinstance(table, dict):
            found.append((path, table))
    return found


def tools_from_config(directory: str | Path) -> list[str]:
    """The ``tools`` entries of ``[tool.lashflow]`` in ``pyproject.toml`` and ``lashflow.toml``."""
    found: list[str] = []
    for path, table in lashflow_tables(directory):
        entries = table.get("tools", [])
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise UsageError(f"{path}: [tool.lashflow] tools must be a list of strings")
        found.extend(e for e in entries if e not in found)
    return found


def project_dir(start: str | Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``pyproject.toml`` or
    ``lashflow.toml``: the project a ``.lash`` file belongs to."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if any((folder / name).is_file() for name in CONFIG_FILES):
            return folder
    return None


def tool_modules_for(lash_file: str | Path, extra: Iterable[str | Path] = ()) -> list[types.ModuleType]:
    """The tool modules a ``.lash`` file links against, found the one way ``lashflow
    check`` and the language server both use: each ``extra`` spec (``--tools``), the
    ``[tool.lashflow] tools`` of its project, and the ``.py`` file beside it."""
    path = Path(lash_file)
    modules = load_tool_modules(list(extra))
    project = project_dir(path.parent)
    if project is not None:
        modules += load_tool_modules(tools_from_config(project), base_dir=project)
    beside = path.with_suffix(".py")
    if beside.is_file():
        modules += load_tool_modules([beside])
    return modules
