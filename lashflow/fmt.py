"""``lashflow fmt`` over files: find the ``.lash`` files, format each, then write them,
name them (``--check``) or show the diff (``--diff``).

The layout itself is ``lashflow.lang.format`` (pure); this module is the file handling
around it, with the CLI's contract: one ``error[code]: ...`` per file that cannot be
formatted, exit 0 (nothing to do or done), 1 (``--check``: some file would change) or 2
(some file could not be read or formatted).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Callable, Iterable

from lashflow.errors import LashflowError, UsageError
from lashflow.lang.diagnostics import LangError
from lashflow.lang.format import format_source

EXIT_OK, EXIT_WOULD_CHANGE, EXIT_ERROR = 0, 1, 2
_SKIPPED_DIRS = frozenset(["node_modules", "__pycache__"])

Write = Callable[[str], None]


def lash_files(paths: Iterable[Path]) -> list[Path]:
    """The files named, and the ``*.lash`` files under the folders named (hidden folders
    and ``node_modules`` skipped), each once, in a stable order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(
                p for p in path.rglob("*.lash")
                if p.is_file() and not any(part.startswith(".") or part in _SKIPPED_DIRS
                                           for part in p.relative_to(path).parts[:-1]))
        elif path.exists():
            found.append(path)
        else:
            raise UsageError(f"no such file or folder: {path}")
    seen: set[Path] = set()
    unique = []
    for path in found:
        if path.resolve() not in seen:
            seen.add(path.resolve())
            unique.append(path)
    return unique


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def _error_text(exc: LashflowError, path: Path, source: str | None) -> str:
    if isinstance(exc, LangError) and source is not None:
        return f"error[{exc.code}]: " + exc.diagnostic.render(source, str(path))
    return f"error[{exc.code}]: {path}: {exc.message}"


def format_paths(paths: Iterable[Path], *, check: bool, diff: bool, out: Write,
                 err: Write) -> int:
    """Format every ``.lash`` file under ``paths``; see the module docstring for what is
    printed and the exit code returned."""
    try:
        files = lash_files(paths)
    except UsageError as exc:
        err(f"error[{exc.code}]: {exc.message}")
        return EXIT_ERROR
    changed = failed = 0
    for path in files:
        source: str | None = None
        try:
            source = _read(path)
            formatted = format_source(source)
        except LashflowError as exc:
            err(_error_text(exc, path, source))
            failed += 1
            continue
        if formatted == source:
            continue
        changed += 1
        if diff:
            out("".join(difflib.unified_diff(
                source.splitlines(keepends=True), formatted.splitlines(keepends=True),
                f"{path}", f"{path} (formatted)")).rstrip("\n"))
        if check or diff:
            if check:
                out(str(path))
            continue
        path.write_text(formatted, encoding="utf-8")
        out(str(path))
    verb = "would be reformatted" if check or diff else "reformatted"
    summary = f"{changed} file{'s' * (changed != 1)} {verb}, {len(files) - changed - failed} unchanged"
    err(summary + (f", {failed} failed" if failed else ""))
    if failed:
        return EXIT_ERROR
    return EXIT_WOULD_CHANGE if check and changed else EXIT_OK
