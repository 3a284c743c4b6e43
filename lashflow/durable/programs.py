"""Source text -> linked module and compiled program, cached per source hash.

A run stores its source (content-addressed) and is compiled again by whichever process
drives it; the cache makes every later drive of the same source free.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import LimitExceeded, UsageError
from ..lang import link
from ..lang.record import fields_of, record

if TYPE_CHECKING:  # the syntax tree and the compiler load with the first compile
    from ..interp.compiler import Program
    from ..lang import ast


@record
class Compiled:
    module: ast.Module
    program: Program
    source_hash: str


@record
class Source:
    text: str
    path: str | None  # the file it was read from, if any


def source_digest(source: str) -> str:
    return "sha256:" + hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def is_source_path(source_or_path: str | os.PathLike[str]) -> bool:
    """A ``Path``, or a ``str`` ending in ``.lash`` on one line, names a file; any other
    ``str`` is source text."""
    return isinstance(source_or_path, os.PathLike) or (
        isinstance(source_or_path, str) and source_or_path.endswith(".lash")
        and "\n" not in source_or_path)


def read_source(source_or_path: str | os.PathLike[str]) -> Source:
    if not is_source_path(source_or_path):
        return Source(str(source_or_path), None)
    path = Path(source_or_path)
    return Source(read_source_file(path), str(path))


def read_source_file(path: Path) -> str:
    """A ``.lash`` file's text, or one clear error. At most one byte past the source
    size limit is read, so a huge file (or ``/dev/zero``) is refused at once."""
    from ..lang.parser import MAX_SOURCE_CHARS, source_too_large

    try:
        with path.open("rb") as handle:
            data = handle.read(4 * MAX_SOURCE_CHARS + 1)  # UTF-8: up to 4 bytes a character
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}", code="file_not_found") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a .lash file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > 4 * MAX_SOURCE_CHARS:
        raise LimitExceeded(f"{path} is over {4 * MAX_SOURCE_CHARS:,} bytes, and a source may "
                            f"hold {MAX_SOURCE_CHARS:,} characters (split it into several files)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    if len(text) > MAX_SOURCE_CHARS:
        raise source_too_large(len(text), str(path))
    return text


def entry_of(module: ast.Module, process: str | None) -> ast.ProcessDecl | None:
    """The process a run of ``module`` starts (``None``: the main block)."""
    if process is not None:
        decl = module.process(process)
        if decl is None:
            names = ", ".join(p.name for p in module.processes) or "none"
            raise UsageError(f"no process `{process}` in this file (processes: {names})")
        return decl
    if module.main:
        return None
    if len(module.processes) == 1:
        return module.processes[0]
    if not module.processes:
        raise UsageError("the file has no main block and no process to run")
    names = ", ".join(p.name for p in module.processes)
    raise UsageError(f"the file has several processes ({names}); choose one with --process")


def signal_names(decl: ast.ProcessDecl) -> list[str]:
    """The signals a process can take: those it declares (``signals { ... }``) and those
    its body waits for (``wait_signal`` names are always literals)."""
    from ..lang import ast

    names = [param.name for param in decl.signals]
    stack: list[Any] = [decl.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.WaitSignal):
            if node.name not in names:
                names.append(node.name)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        else:
            stack.extend(getattr(node, name) for name in fields_of(node))
    return names


class Programs:
    """The compile cache of one engine; ``catalog`` gives the tools linked against."""

    def __init__(self, catalog: Callable[[], Any]) -> None:
        self._catalog = catalog
        self._compiled: dict[str, Compiled] = {}
        # the text compiled last, and its program: runs started from one text (a module's
        # constant, a file's text kept by its caller) pass the same object each time, and
        # ``is`` spares its SHA-256 (about 1 us a run); one reference, not a copy
        self._last: tuple[str, Compiled] | None = None

    def parse(self, source: str) -> ast.Module:
        """The module's declarations only (no tools needed): compiled if cached, else
        parsed (or decoded from the parse cache, ``lashflow.lang.cache``)."""
        compiled = self._compiled.get(source_digest(source))
        if compiled is not None:
            return compiled.module
        from ..lang.cache import cached_parse

        return cached_parse(source)

    def cached(self, source_hash: str) -> Compiled | None:
        """The program compiled here from the text whose digest is ``source_hash``, if
        any (its text hashed to that when it was compiled)."""
        return self._compiled.get(source_hash)

    def compile(self, source: str) -> Compiled:
        """Parse, link against the registered tools and compile; cached per source text."""
        last = self._last
        if last is not None and last[0] is source:
            return last[1]
        source_hash = source_digest(source)
        compiled = self._compiled.get(source_hash)
        if compiled is None:
            from ..interp.compiler import compile_module
            from ..lang.cache import cached_parse

            catalog = self._catalog()
            module = link(cached_parse(source), catalog)
            compiled = Compiled(module, compile_module(module, catalog), source_hash)
            self._compiled[source_hash] = compiled
        self._last = (source, compiled)
        return compiled


__all__ = ["Compiled", "Programs", "Source", "entry_of", "is_source_path", "read_source",
           "signal_names", "source_digest"]
