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


def static_path(node: Any) -> str | None:
    """``a.b.c`` for a name or a chain of fields, else None."""
    parts: list[str] = []
    while isinstance(node, A.Field):
        parts.append(node.name)
        node = node.obj
    if not isinstance(node, A.Name):
        return None
    parts.append(node.name)
    return ".".join(reversed(parts))


class Index:
    """Every ``Occurrence`` in a module, sorted by position."""

    def __init__(self, module: A.Module, text: str, tool_modules: set[str]) -> None:
        self.text = text
        self.tool_modules = tool_modules
        self.found: list[Occurrence] = []
        self.processes = {p.name: p for p in module.processes}
        self.types = {t.name: t for t in module.types}
        for decl in module.types:
            self.declaration(decl, "type", "type")
            for node in _type_nodes(decl.type):
                self.type_use(node)
        for decl in module.processes:
            self.process(decl)
        self.entry("main", module.main, [])
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
        if node.name in self.types:
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
        self.entry(decl.name, decl.body.body, [p.name for p in decl.params])

    def entry(self, scope: str, body: list[A.Stmt], params: list[str]) -> None:
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
            kind = "process" if node.name in self.processes else "variable"
            self.add(node.span.start, node.span.end, kind, node.name, scope=scope, node=node)
        elif isinstance(node, A.Start):
            word = _word_after(text, "start", node.span.start)
            if word:
                self.add(*word, "process", node.process, node=node)
        elif isinstance(node, A.ReceiverCall):
            path = static_path(node.receiver)
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

    # ------------------------------------------------------------------ lookups

    def at(self, offset: int) -> Occurrence | None:
        """The occurrence whose range holds ``offset`` (or ends right at it)."""
        i = bisect.bisect_right(self.starts, offset) - 1
        while i >= 0 and self.found[i].start > offset - 200:
            occ = self.found[i]
            if occ.start <= offset <= occ.end:
                return occ
            i -= 1
        return None

    def variables(self, scope: str, name: str) -> list[Occurrence]:
        return [o for o in self.found if o.kind == "variable" and o.scope == scope
                and o.name == name]

    def binding(self, occ: Occurrence) -> Occurrence | None:
        """Where a variable, process or type is first bound."""
        if occ.kind == "variable":
            return next((o for o in self.variables(occ.scope, occ.name) if o.binds), None)
        return next((o for o in self.found if o.kind == occ.kind and o.name == occ.name
                     and o.binds), None)

    def names_in(self, scope: str) -> list[str]:
        seen: dict[str, None] = {}
        for o in self.found:
            if o.kind == "variable" and o.scope == scope and o.binds:
                seen.setdefault(o.name)
        return list(seen)


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
