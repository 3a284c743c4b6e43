"""What an edit does to a program's effect sites, read from the two texts alone.

A run's journal is keyed by effect site (``<site>:<occurrence>``), and a site id is where
the effect sits in the tree (``sites.py``). Comparing the sites of two versions of a file
tells, before any run is looked at, which call sites were added, removed, moved (the same
call under a new site id: its recorded steps no longer replay) or changed (same site,
another tool or other argument expressions), and so which recorded step keys the new
version can no longer reach.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from lashflow.errors import position_of
from lashflow.lang import ast as A
from lashflow.lang.sites import EFFECT_NODES, assign_sites, nodes


@dataclass(frozen=True, slots=True)
class CallSite:
    """One effect site of a program."""

    site: str
    entry: str  # "main" or the process name
    kind: str  # tool | await | start | sleep | wait_signal | signal_run | print | yield | ...
    label: str  # what it calls: "billing.charge", "start ship", "sleep for", ...
    args: str  # its argument expressions, printed
    line: int
    column: int

    @property
    def what(self) -> tuple[str, str, str, str]:
        return self.entry, self.kind, self.label, self.args

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Change:
    """``added``/``removed``/``moved``/``changed``: ``old`` and/or ``new`` site."""

    change: str
    old: CallSite | None
    new: CallSite | None

    @property
    def unreachable(self) -> str | None:
        """The recorded step keys the new version cannot reach (a key pattern)."""
        if self.change in ("removed", "moved", "changed") and self.old is not None:
            return f"{self.old.site}:*"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "old": self.old and self.old.to_json(),
                "new": self.new and self.new.to_json(), "unreachable": self.unreachable}


def _text(source: str, node: Any) -> str:
    from lashflow.lang.printer import Unprintable, print_expr

    try:
        return print_expr(node)
    except (Unprintable, TypeError, ValueError, AttributeError):
        return " ".join(source[node.span.start:node.span.end].split())


def _describe(source: str, node: Any) -> tuple[str, str, str]:
    """(kind, label, printed arguments) of an effect node."""
    if isinstance(node, A.ReceiverCall):
        receiver = node.module or _text(source, node.receiver)
        return "tool", f"{receiver}.{node.operation}", ", ".join(_text(source, a) for a in node.args)
    if isinstance(node, A.Start):
        args = ", ".join(f"{name}: {_text(source, value)}" for name, value in node.args)
        return "start", f"start {node.process}", args
    if isinstance(node, A.Await):
        return "await", "await", _text(source, node.expr)
    if isinstance(node, A.Sleep):
        return "sleep", f"sleep {node.mode}", _text(source, node.value)
    if isinstance(node, A.WaitSignal):
        return "wait_signal", f"wait_signal {node.name}", ""
    if isinstance(node, A.SignalRun):
        return ("signal_run", f"signal_run {node.name}",
                f"{_text(source, node.run)}, {_text(source, node.payload)}")
    return node.kind, node.kind, _text(source, node.value)  # a ValueStmt


def call_sites(module: A.Module) -> dict[str, CallSite]:
    """Every effect site of ``module`` (sites assigned here if the linker has not)."""
    if not module.main and not module.processes:
        return {}
    assign_sites(module)
    source = module.source
    found: dict[str, CallSite] = {}
    entries = [("main", module.main)] + [(d.name, d.body.body) for d in module.processes]
    for entry, body in entries:
        for stmt in body:
            for node in nodes(stmt):
                if isinstance(node, EFFECT_NODES) and node.site:
                    if isinstance(node, A.ValueStmt) and node.kind in ("finish", "fail"):
                        continue
                    kind, label, args = _describe(source, node)
                    pos = position_of(source, node.span.start)
                    found[node.site] = CallSite(node.site, entry, kind, label, args, pos.line,
                                                pos.column)
    return found


def diff_sites(old: dict[str, CallSite], new: dict[str, CallSite]) -> list[Change]:
    """The changes from ``old`` to ``new``: a call found again under another site id is
    ``moved``; a site that holds another call is ``changed``; the rest are ``added`` or
    ``removed``. In the order of the new file, removed ones last (in the old's order)."""
    old_left = {site: call for site, call in old.items()
                if site not in new or new[site].what != call.what}
    new_left = {site: call for site, call in new.items()
                if site not in old or old[site].what != call.what}
    found: list[Change] = []
    # the same call under another site id (matched once each, in file order): moved; the
    # same tool with other arguments elsewhere: changed (and moved)
    for key in (lambda c: c.what, lambda c: c.what[:3]):
        twins: dict[Any, list[CallSite]] = {}
        for call in old_left.values():
            twins.setdefault(key(call), []).append(call)
        for site, call in list(new_left.items()):
            same = twins.get(key(call))
            if same:
                was = same.pop(0)
                del old_left[was.site], new_left[site]
                found.append(Change("moved" if was.what == call.what else "changed", was, call))
    moved: set[str] = set()
    for site, call in new_left.items():
        if site in moved:
            continue
        if site in old_left:
            found.append(Change("changed", old_left.pop(site), call))
        else:
            found.append(Change("added", None, call))
    found.sort(key=lambda change: (change.new.line, change.new.column) if change.new else (0, 0))
    return found + [Change("removed", call, None) for call in old_left.values()]


def diff_sources(old_source: str, new_source: str) -> list[Change]:
    from lashflow.lang import parse

    return diff_sites(call_sites(parse(old_source)), call_sites(parse(new_source)))


def operations_called(module: A.Module) -> dict[str, list[str]]:
    """Module path -> the operations the program calls on it (for a catalog that takes
    every call as ``any -> any`` when the tools themselves are not at hand)."""
    found: dict[str, list[str]] = {}
    bodies = [module.main] + [decl.body.body for decl in module.processes]
    for body in bodies:
        for stmt in body:
            for node in nodes(stmt):
                if not isinstance(node, A.ReceiverCall):
                    continue
                path, receiver = [], node.receiver
                while isinstance(receiver, A.Field):
                    path.append(receiver.name)
                    receiver = receiver.obj
                if isinstance(receiver, A.Name):
                    name = ".".join([receiver.name, *reversed(path)])
                    operations = found.setdefault(name, [])
                    if node.operation not in operations:
                        operations.append(node.operation)
    return found


def site_of(step_key: str) -> str:
    """The site part of a step key (``<site>:<occurrence>[:<member>]``)."""
    return step_key.split(":", 1)[0]


__all__ = ["CallSite", "Change", "call_sites", "diff_sites", "diff_sources", "operations_called",
           "site_of"]
