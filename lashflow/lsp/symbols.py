"""Where names are in a tree: bindings and uses of variables (per process, or the main
block: one flat namespace each), processes, types, tool calls, builtin calls and sleep
literals, as ``Occurrence``s with their exact text range. Hover, go to definition,
rename and document symbols are lookups in this index."""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Any, Iterator

from lashflow.lang import ast as A
from lashflow.lang.linker import path_of
from lashflow.lang.sites import nodes

_WORD = r"[A-Za-z_][A-Za-z0-9_]*"
_AFTER_KEYWORD = {kw: re.compile(rf"{kw}[\s;]+({_WORD})") for kw in ("let", "for", "process", "type", "start")}
_GAP = re.compile(r"(?:#[^\n]*|//[^\n]*|[\s;])*")
_AFTER_DOT = re.compile(rf"[\s;]*\.[\s;]*({_WORD})")


@dataclasses.dataclass(frozen=True, slots=True)
class Occurrence:
    start: int
    end: int
    kind: str  # "variable" "process" "type" "tool" "builtin" "signal" "duration"
    name: str
    scope: str = ""  # variables: "main" or the process name; tools: the module path
    binds: bool = False  # a variable's binding (assignment, parameter, loop variable)
    node: Any = None


def _word_after(text: str, keyword: str, at: int) -> tuple[int, int] | None:
    m = _AFTER_KEYWORD[keyword].match(text, at)
    return (m.start(1), m.end(1)) if m else None


class ChunkIndex:
    """The occurrences in one top-level item (a type, a process, a main-block statement),
    computed once per parse of it: offsets as they were then (``base`` is where the item
    started), shifted by the caller when text before it changes."""

    def __init__(self, node: Any, text: str, tool_modules: frozenset[str],
                 processes: frozenset[str], types: frozenset[str], base: int) -> None:
        self.item = node
        self.text = text
        self.base = base
        self.tool_modules = tool_modules
        self.process_names = processes
        self.type_names = types
        self.found: list[Occurrence] = []
        if isinstance(node, A.TypeDecl):
            self.scope = ""
            self.declaration(node, "type", "type")
            for t in _type_nodes(node.type):
                self.type_use(t)
        elif isinstance(node, A.ProcessDecl):
            self.scope = node.name
            self.process(node)
        else:
            self.scope = "main"
            self.entry("main", [node])
        self.found.sort(key=lambda o: o.start)
        self.starts = [o.start for o in self.found]

    # ------------------------------------------------------------------ building

    def add(self, start: int, end: int, kind: str, name: str, *, exact: bool = True,
            **more: Any) -> None:
        """Record an occurrence; ``exact``: only if the text there is the name (a tree
        from a stale parse must not point at the wrong text)."""
        if 0 <= start < end <= len(self.text) and (not exact or self.text[start:end] == name):
            self.found.append(Occurrence(start, end, kind, name, **more))

    def declaration(self, decl: Any, keyword: str, kind: str) -> None:
        at = decl.label.span.end if getattr(decl, "label", None) is not None else decl.span.start
        where = _GAP.match(self.text, at)
        at = where.end() if where else at
        word = _word_after(self.text, keyword, at)
        if word:
            self.add(*word, kind, decl.name, binds=True, node=decl)

    def type_use(self, node: A.TypeName) -> None:
        if node.name in self.type_names:
            self.add(node.span.start, node.span.end, "type", node.name, exact=False, node=node)

    def process(self, decl: A.ProcessDecl) -> None:
        self.declaration(decl, "process", "process")
        for param in [*decl.params, *decl.signals]:
            for node in _type_nodes(param.type):
                self.type_use(node)
        if decl.returns is not None:
            for node in _type_nodes(decl.returns):
                self.type_use(node)
        for param in decl.params:
            self.add(param.span.start, param.span.start + len(param.name), "variable",
                     param.name, scope=decl.name, binds=True, node=param)
        for signal in decl.signals:
            self.add(signal.span.start, signal.span.start + len(signal.name), "signal",
                     signal.name, scope=decl.name, binds=True, node=signal)
        self.entry(decl.name, decl.body.body)

    def entry(self, scope: str, body: list[A.Stmt]) -> None:
        for stmt in body:
            for node in nodes(stmt):
                self.node(scope, node)

    def node(self, scope: str, node: Any) -> None:  # noqa: C901 - one case per node kind
        text = self.text
        if isinstance(node, A.Assign):
            start = node.span.start
            if text.startswith("let", start):
                word = _word_after(text, "let", start)
                start = word[0] if word else start
            self.add(start, start + len(node.name), "variable", node.name, scope=scope,
                     binds=not node.steps, node=node)
        elif isinstance(node, A.For):
            word = _word_after(text, "for", node.span.start)
            if word:
                self.add(*word, "variable", node.var, scope=scope, binds=True, node=node)
        elif isinstance(node, A.CompFor):
            word = _word_after(text, "for", node.span.start)
            if word:
                self.add(*word, "variable", node.var, scope=scope, binds=True, node=node)
        elif isinstance(node, A.Name):
            if node.name in self.tool_modules:
                return
            kind = "process" if node.name in self.process_names else "variable"
            self.add(node.span.start, node.span.end, kind, node.name, scope=scope, node=node)
        elif isinstance(node, A.Start):
            word = _word_after(text, "start", node.span.start)
            if word:
                self.add(*word, "process", node.process, node=node)
        elif isinstance(node, A.ReceiverCall):
            path = path_of(node.receiver)
            m = _AFTER_DOT.match(text, node.receiver.span.end)
            if path is not None and path in self.tool_modules and m:
                self.add(m.start(1), m.end(1), "tool", node.operation, scope=path, node=node)
        elif isinstance(node, A.BuiltinCall):
            self.add(node.span.start, node.span.start + len(node.name), "builtin", node.name,
                     node=node)
        elif isinstance(node, A.Sleep) and isinstance(node.value, (A.String, A.Number)):
            self.add(node.value.span.start, node.value.span.end, "duration", node.mode,
                     exact=False, node=node.value)
        elif isinstance(node, A.WaitSignal):
            self.add(node.span.start, node.span.start + len("wait_signal"), "builtin",
                     "wait_signal", node=node)
        elif isinstance(node, A.TypeLiteral):
            for t in _type_nodes(node.type):
                self.type_use(t)

    def at(self, offset: int) -> Occurrence | None:
        """The occurrence whose range holds ``offset`` (or ends right at it)."""
        i = bisect.bisect_right(self.starts, offset) - 1
        while i >= 0 and self.found[i].start > offset - 200:
            occ = self.found[i]
            if occ.start <= offset <= occ.end:
                return occ
            i -= 1
        return None


def _moved(occ: Occurrence, by: int) -> Occurrence:
    return occ if not by else dataclasses.replace(occ, start=occ.start + by, end=occ.end + by)


Cache = dict[int, ChunkIndex]


class Index:
    """The occurrences of a whole document, from the ``ChunkIndex`` of each of its items
    (kept in ``cache`` between edits: an edit re-indexes only the item it re-parsed)."""

    def __init__(self, chunks: list[Any], module: A.Module, text: str, tool_modules: set[str],
                 cache: Cache) -> None:
        self.processes = {p.name: p for p in module.processes}
        self.types = {t.name: t for t in module.types}
        key = (frozenset(tool_modules), frozenset(self.processes), frozenset(self.types))
        self.parts: list[tuple[int, int, ChunkIndex]] = []
        fresh: Cache = {}
        for chunk in chunks:
            index = cache.get(id(chunk.node))
            if index is None or index.item is not chunk.node or (
                    index.tool_modules, index.process_names, index.type_names) != key:
                index = ChunkIndex(chunk.node, text, *key, base=chunk.start)
            fresh[id(chunk.node)] = index
            self.parts.append((chunk.start, chunk.end, index))
        cache.clear()
        cache.update(fresh)
        self.starts = [start for start, _, _ in self.parts]

    def occurrences(self, scope: str | None = None) -> Iterator[Occurrence]:
        for start, _, index in self.parts:
            if scope is None or index.scope == scope:
                for occ in index.found:
                    yield _moved(occ, start - index.base)

    def at(self, offset: int) -> Occurrence | None:
        i = bisect.bisect_right(self.starts, offset) - 1
        for start, end, index in self.parts[max(0, i - 1):i + 1]:
            if start <= offset <= end:
                found = index.at(offset - (start - index.base))
                if found is not None:
                    return _moved(found, start - index.base)
        return None

    def variables(self, scope: str, name: str) -> list[Occurrence]:
        return [o for o in self.occurrences(scope) if o.kind == "variable" and o.name == name]

    def binding(self, occ: Occurrence) -> Occurrence | None:
        """Where a variable, process or type is first bound."""
        if occ.kind in ("variable", "signal"):
            return next((o for o in self.occurrences(occ.scope)
                         if o.kind == occ.kind and o.name == occ.name and o.binds), None)
        scope = occ.name if occ.kind == "process" else ""
        return next((o for o in self.occurrences(scope) if o.kind == occ.kind
                     and o.name == occ.name and o.binds), None)

    def names_in(self, scope: str) -> list[str]:
        seen: dict[str, None] = {}
        for o in self.occurrences(scope):
            if o.kind == "variable" and o.binds:
                seen.setdefault(o.name)
        return list(seen)

    def declarations(self) -> Iterator[Occurrence]:
        for o in self.occurrences():
            if o.binds and o.kind in ("process", "type"):
                yield o


def _type_nodes(t: Any) -> Iterator[A.TypeName]:
    todo = [t]
    while todo:
        current = todo.pop()
        if isinstance(current, A.TypeName):
            yield current
        elif isinstance(current, A.TypeObject):
            todo.extend(f.type for f in current.fields)
        elif isinstance(current, (A.TypeList, A.TypeTriggerHandle)):
            todo.append(current.item)
        elif isinstance(current, A.TypeUnion):
            todo.extend(current.members)
        elif isinstance(current, A.TypeProcess):
            todo.extend([current.input, current.output])
