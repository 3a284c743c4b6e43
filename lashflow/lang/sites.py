"""Stable effect-site ids (SPEC 4.2): where an effect sits in the tree, not in the text.

A site id is 16 hex chars of sha256 over the entry ("main" or the process name), the
node's index path from that entry (field names and list positions) and the node kind.
Comments, whitespace, reformatting and edits to other processes leave it unchanged, so a
journal recorded under one version of a file replays under a reformatted one.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields
from typing import Any, Iterator

from lashflow.lang import ast as A

EFFECT_NODES = (A.ReceiverCall, A.Await, A.Start, A.Sleep, A.WaitSignal, A.SignalRun, A.ValueStmt)
_SKIP = frozenset(["span", "site", "label", "module", "source"])
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(node: Any) -> tuple[str, ...]:
    """Names of the fields of ``node`` that can hold sub-nodes, in declaration order."""
    cls = type(node)
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls) if f.name not in _SKIP)
        _FIELDS[cls] = names
    return names


def site_id(entry: str, path: str, kind: str) -> str:
    return hashlib.sha256(f"{entry}\x00{path}\x00{kind}".encode()).hexdigest()[:16]


def walk(node: Any, path: str) -> Iterator[tuple[Any, str]]:
    """Every AST node under ``node`` with its index path (pre-order, iterative)."""
    todo: list[tuple[Any, str]] = [(node, path)]
    while todo:
        current, where = todo.pop()
        yield current, where
        children: list[tuple[Any, str]] = []
        for name in child_fields(current):
            value = getattr(current, name)
            _collect(value, f"{where}.{name}", children)
        todo.extend(reversed(children))


def _collect(value: Any, where: str, out: list[tuple[Any, str]]) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _collect(item, f"{where}[{i}]", out)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _collect(item, f"{where}[{i}]", out)
    elif hasattr(value, "__dataclass_fields__"):
        out.append((value, where))


def assign_sites(module: A.Module) -> A.Module:
    """Fill ``site`` on every effectful node of ``module`` (in place); returns it."""
    _assign("main", module.main)
    for decl in module.processes:
        _assign(decl.name, decl.body.body)
    return module


def _assign(entry: str, body: list[Any]) -> None:
    for i, stmt in enumerate(body):
        for node, path in walk(stmt, f"[{i}]"):
            if isinstance(node, EFFECT_NODES):
                node.site = site_id(entry, path, type(node).__name__)
