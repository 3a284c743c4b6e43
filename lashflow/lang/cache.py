"""Parsed syntax trees cached on disk, keyed by source text and front-end build.

A resumed run compiles its stored source again; parsing it would load Lark, its tables
and the token pass (about a third of what a resume executes before its first step).
The tree ``parse`` returns (before ``link``, so independent of the tool catalog) is
kept as tagged JSON in a per-user cache folder, one file per key; a later process
decodes it instead of parsing. The key hashes the source with the lashflow version and
the size and modification time of every front-end file (``lashflow/lang/*.py`` and the
grammar), as Python's own bytecode cache checks its sources. Every failure -- no folder,
a read-only disk, a corrupt or foreign entry -- falls back to parsing; a file whose
checksum or shape does not match is ignored. Why and the rejected options: ADR 0040.

The folder is ``$LASHFLOW_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/lashflow`` or
``~/.cache/lashflow``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from lashflow.json_text import loads, stored
from lashflow.lang import ast as A
from lashflow.lang.record import fields_of

FORMAT = b"lashflow-ast-1"  # bump when the encoding below changes
_NODES: dict[str, type] = {name: obj for name, obj in vars(A).items()
                           if isinstance(obj, type) and "__record_fields__" in vars(obj)
                           and obj.__module__ == A.__name__}
_fingerprint: bytes | None = None


class _Corrupt(Exception):
    """An entry that does not decode to a tree."""


def cache_dir() -> Path:
    """Where entries live (created on first write). ``OSError`` when there is no home
    folder to put them in (never a folder named ``~`` in the working directory)."""
    chosen = os.environ.get("LASHFLOW_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative: ignored, as the XDG spec says
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            raise OSError("no home folder for the parse cache")
        base = os.path.join(home, ".cache")
    return Path(base) / "lashflow"


def front_end_fingerprint() -> bytes:
    """This process's ``fingerprint`` of the front end (computed once)."""
    global _fingerprint
    if _fingerprint is None:
        from lashflow import __version__
        from lashflow.lang.grammar_file import GRAMMAR_PATH

        _fingerprint = fingerprint(__version__, Path(__file__).resolve().parent, GRAMMAR_PATH)
    return _fingerprint


def fingerprint(version: str, folder: Path, grammar: Path) -> bytes:
    """The version and the (name, size, mtime) of each ``.py`` in ``folder`` and of
    ``grammar``: any edit, reinstall or upgrade of the parser gives new keys."""
    stats = [(entry.name, entry.stat()) for entry in os.scandir(folder)
             if entry.name.endswith(".py")]
    stats.append((grammar.name, grammar.stat()))
    text = ";".join(f"{name}:{st.st_size}:{st.st_mtime_ns}" for name, st in sorted(stats))
    return f"{version};{text}".encode()


def entry_path(source: str) -> Path:
    digest = hashlib.sha256(FORMAT + b"\0" + front_end_fingerprint() + b"\0"
                            + source.encode("utf-8", "surrogatepass")).hexdigest()
    return cache_dir() / f"{digest}.ast"


def cached_parse(source: str) -> A.Module:
    """``lashflow.lang.parse(source)``, from the cache when an entry decodes; a parse
    that succeeds is stored for the next process. Parse errors are never cached."""
    from lashflow.lang import parse

    if not isinstance(source, str):
        return parse(source)  # its error
    try:
        path = entry_path(source)
    except OSError:  # no home folder, or the front end's files cannot be read: no cache
        return parse(source)
    module = _load(path, source)
    if module is None:
        module = parse(source)
        _store(path, module)
    return module


def _load(path: Path, source: str) -> A.Module | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, _, body = data.partition(b"\n")
    if head != hashlib.sha256(body).hexdigest().encode():
        return None
    try:
        module = _decode(loads(body))
    except (ValueError, TypeError, KeyError, IndexError, RecursionError, _Corrupt):
        return None
    if not isinstance(module, A.Module):
        return None
    module.source = source
    return module


def _store(path: Path, module: A.Module) -> None:
    """Write the entry atomically; a tree the encoding cannot carry exactly (it would
    decode to something unequal) is not stored."""
    try:
        body = stored(_encode(module, set())).encode("utf-8")
        if _decode(loads(body)) != _without_source(module):
            return
        import tempfile  # only a miss writes

        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except (OSError, ValueError, TypeError, RecursionError, UnicodeError, _Corrupt):
        return


def _without_source(module: A.Module) -> A.Module:
    return A.Module("", module.types, module.processes, module.main)


# A node is ["Name", field, ...] in field order; a list ["L", item, ...]; a tuple
# ["T", item, ...]; str, int, float, bool and None are themselves. The module's source
# is left out (the caller has it).

def _encode(value: Any, seen: set[int]) -> Any:
    """The tagged form; a node or list met twice raises (decoding would make two
    copies, and the linker, which fills nodes in place, would then see them apart)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if not isinstance(value, (tuple, A.Span)):
        if id(value) in seen:
            raise _Corrupt("a shared node")
        seen.add(id(value))
    if isinstance(value, list):
        return ["L", *(_encode(item, seen) for item in value)]
    if isinstance(value, tuple):
        return ["T", *(_encode(item, seen) for item in value)]
    name = type(value).__name__
    if _NODES.get(name) is not type(value):
        raise _Corrupt(f"not a syntax node: {name}")
    return [name, *(_encode(getattr(value, field), seen) for field in fields_of(value)
                    if field != "source" or not isinstance(value, A.Module))]


def _decode(value: Any) -> Any:
    if not isinstance(value, list):
        if isinstance(value, dict):
            raise _Corrupt("an object where a node belongs")
        return value
    tag, items = value[0], [_decode(item) for item in value[1:]]
    if tag == "L":
        return items
    if tag == "T":
        return tuple(items)
    cls = _NODES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise _Corrupt(f"unknown node {tag!r}")
    if cls is A.Module:
        return cls("", *items)
    return cls(*items)


__all__ = ["cache_dir", "cached_parse", "entry_path", "fingerprint", "front_end_fingerprint"]
