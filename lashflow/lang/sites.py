"""Stable effect-site ids: where an effect sits in the tree, not in the text, so that
edits of comments and layout replay cleanly.

A site id is 16 hex chars of sha256 over the entry ("main" or the process name), the
node's index path from that entry (field names and list positions, e.g.
``[2].then.body[0].value.expr``) and the node kind. Comments, whitespace, reformatting and
edits to other processes leave it unchanged, so a journal recorded under one version of
a file replays under a reformatted one.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterator

from lashflow.lang import ast as A

# The nodes that get a site id: every effect (``ast.EFFECTS``) and every value statement
# (finish, fail, yield, wake, print, cancel: each is journaled or ends the run there).
EFFECT_NODES = (*A.EFFECTS, A.ValueStmt)

# The fields of each node that can hold sub-nodes (lists, optional nodes, or
# ``(key, node)`` pairs), in declaration order. Leaves and types have none here.
CHILDREN: dict[type, tuple[str, ...]] = {
    A.TupleLit: ("items",), A.ListLit: ("items",), A.CompFor: ("iterable",),
    A.CompIf: ("cond",), A.Comprehension: ("element", "clauses"), A.RecordLit: ("entries",),
    A.Field: ("obj",), A.Index: ("obj", "index"), A.BuiltinCall: ("args",),
    A.ReceiverCall: ("receiver", "args"), A.Await: ("expr",), A.Unwrap: ("expr",),
    A.Unary: ("operand",), A.Binary: ("left", "right"), A.Ternary: ("cond", "then", "otherwise"),
    A.Start: ("args",), A.Sleep: ("value",), A.SignalRun: ("run", "payload"),
    A.IndexStep: ("index",), A.Assign: ("steps", "value"), A.Block: ("body",),
    A.If: ("cond", "then", "otherwise"), A.For: ("iterable", "body"), A.While: ("cond", "body"),
    A.ValueStmt: ("value",), A.ExprStmt: ("expr",),
}


def site_id(entry: str, path: str, kind: str) -> str:
    return hashlib.sha256(f"{entry}\x00{path}\x00{kind}".encode()).hexdigest()[:16]


def children(node: Any) -> Iterator[Any]:
    """The direct sub-nodes of ``node`` (statements and expressions)."""
    for name in CHILDREN.get(type(node), ()):
        value = getattr(node, name)
        if isinstance(value, list):
            for item in value:
                yield item[1] if isinstance(item, tuple) else item
        elif value is not None:
            yield value


def nodes(node: Any) -> Iterator[Any]:
    """``node`` and everything under it (pre-order, iterative)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        names = CHILDREN.get(type(current))
        if not names:
            continue
        for name in reversed(names):
            value = getattr(current, name)
            if isinstance(value, list):
                for item in reversed(value):
                    todo.append(item[1] if isinstance(item, tuple) else item)
            elif value is not None:
                todo.append(value)


def walk(node: Any, path: str) -> Iterator[tuple[Any, str]]:
    """Every node under ``node`` with its index path (pre-order)."""
    todo: list[tuple[Any, str]] = [(node, path)]
    while todo:
        current, where = todo.pop()
        yield current, where
        names = CHILDREN.get(type(current))
        if not names:
            continue
        found: list[tuple[Any, str]] = []
        for name in names:
            value = getattr(current, name)
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, tuple):
                        found.append((item[1], f"{where}.{name}[{i}][1]"))
                    else:
                        found.append((item, f"{where}.{name}[{i}]"))
            elif value is not None:
                found.append((value, f"{where}.{name}"))
        todo.extend(reversed(found))


def assign_sites(module: A.Module) -> A.Module:
    """Fill ``site`` on every effectful node of ``module`` (in place); returns it."""
    _assign("main", module.main)
    for decl in module.processes:
        _assign(decl.name, decl.body.body)
    return module


def _assign(entry: str, body: list[Any]) -> None:
    parts: list[str] = []
    for i, stmt in enumerate(body):
        parts.append(f"[{i}]")
        _visit(stmt, parts, entry)
        parts.pop()


def _visit(node: Any, parts: list[str], entry: str) -> None:
    # Recursion depth is bounded by the parser's nesting and chain limits.
    if isinstance(node, EFFECT_NODES):
        node.site = site_id(entry, "".join(parts), type(node).__name__)
    names = CHILDREN.get(type(node))
    if not names:
        return
    for name in names:
        value = getattr(node, name)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, tuple):
                    parts.append(f".{name}[{i}][1]")
                    _visit(item[1], parts, entry)
                else:
                    parts.append(f".{name}[{i}]")
                    _visit(item, parts, entry)
                parts.pop()
        elif value is not None:
            parts.append("." + name)
            _visit(value, parts, entry)
            parts.pop()


def fail_site(module: A.Module, start: int) -> str | None:
    """The site of the ``fail`` statement that starts at offset ``start`` (what ended a
    failed run, for the graph to mark), or None."""
    roots = [*module.main, *(decl.body for decl in module.processes)]
    for root in roots:
        for node in nodes(root):
            if isinstance(node, A.ValueStmt) and node.kind == "fail" and node.span.start == start:
                return node.site or None
    return None
