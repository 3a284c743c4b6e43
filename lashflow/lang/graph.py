"""``lashflow graph``: a process drawn as a flowchart (Mermaid or Graphviz DOT).

Built from the syntax tree alone (``lashflow.lang.parse`` + the site ids of
``lashflow.lang.sites``, the same ids the runtime puts in step keys), so a file can be
drawn without its tools. Nodes are the durable steps (tool calls, starts, awaits,
sleeps, signals, yields), branches and loops; an aggregate ``await { ... }`` of tool calls
is one batch, drawn as a box of its members. ``@label(title: ...)`` titles what it
annotates. Given step states (from a run's journal), nodes are coloured by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from . import ast as A

__all__ = ["Graph", "GraphError", "Node", "build_graph", "render", "node_state"]

LABEL_WIDTH = 40
FULL_WIDTH = 2000  # a node's whole text (its tooltip) is cut only past this
MEMBERS = "#*"  # a node site ending so stands for every member of a fan-out at that site


class GraphError(Exception):
    """The graph cannot be drawn as asked (e.g. no such process)."""


@dataclass
class Node:
    id: str
    kind: str          # entry end finish fail tool start await wait decision loop note event
    label: str
    sites: list[str] = field(default_factory=list)  # state keys: "site" or "site#member"
    text: str = ""  # the node's source, uncut (labels are cut to LABEL_WIDTH): a tooltip


@dataclass
class Cluster:
    id: str
    title: str
    kind: str                       # entry | batch | label
    nodes: list[str] = field(default_factory=list)
    clusters: list["Cluster"] = field(default_factory=list)


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)


Pending = list[tuple[str, str]]  # (node id, edge label) waiting for the next node


def _text(source: str, node: Any, width: int = LABEL_WIDTH) -> str:
    span = getattr(node, "span", None)
    if span is None or span.end <= span.start:
        return ""
    flat = " ".join(source[span.start:span.end].split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _receiver(expr: Any) -> str:
    if isinstance(expr, A.Name):
        return expr.name
    if isinstance(expr, A.Field):
        return f"{_receiver(expr.obj)}.{expr.name}"
    return "?"


def _strip(expr: Any) -> Any:
    while isinstance(expr, A.Unwrap):
        expr = expr.expr
    return expr


def _impure(node: Any) -> bool:
    from .sites import nodes

    return any(isinstance(n, A.EFFECTS) for n in nodes(node))


def _batch_leaves(expr: Any) -> list[tuple[str, A.ReceiverCall]] | None:
    """The calls of an aggregate ``await`` literal if it is ONE batch (every leaf a direct
    call, maybe with ``?``, or pure), in emission (source) order, each with its place in
    the literal (``north``, ``[1]``); else None."""
    calls: list[tuple[str, A.ReceiverCall]] = []

    def visit(node: Any, where: str) -> bool:
        bare = _strip(node)
        if isinstance(bare, A.ReceiverCall):
            if any(_impure(arg) for arg in bare.args):
                return False
            calls.append((where, bare))
            return True
        if isinstance(bare, (A.ListLit, A.TupleLit)):
            return all(visit(item, f"{where}[{i}]") for i, item in enumerate(bare.items))
        if isinstance(bare, A.RecordLit):
            return all(visit(value, f"{where}.{key}" if where else key)
                       for key, value in bare.entries)
        return not _impure(bare)

    if not isinstance(expr, (A.ListLit, A.TupleLit, A.RecordLit)):
        return None
    if not visit(expr, "") or not calls:
        return None
    return calls


def _fanout_call(expr: Any) -> A.ReceiverCall | None:
    """The call of a fan-out ``[tools.f(x) for x in xs]`` that runs as ONE batch (a direct
    call with pure arguments, pure clauses), else None."""
    if not isinstance(expr, A.Comprehension):
        return None
    call = _strip(expr.element)
    if not isinstance(call, A.ReceiverCall) or any(_impure(arg) for arg in call.args):
        return None
    parts = [c.cond if isinstance(c, A.CompIf) else c.iterable for c in expr.clauses]
    return None if any(_impure(p) for p in parts) else call


def fan_outs(module: A.Module, source: str) -> list[dict[str, Any]]:
    """Every fan-out ``await`` of the file (one concurrent batch each), in source order:
    its line and what it calls over what (``tools.fetch for u in urls``)."""
    from .sites import nodes

    roots = [*module.main, *(decl.body for decl in module.processes)]
    found = []
    for node in (n for root in roots for n in nodes(root)):
        label = _fanout_label(_strip(node.expr), source) if isinstance(node, A.Await) else None
        if label is not None:
            found.append({"line": source.count("\n", 0, node.span.start) + 1, "fan_out": label})
    return sorted(found, key=lambda batch: batch["line"])


def _fanout_label(expr: Any, source: str) -> str | None:
    """``tools.fetch for u in urls`` for a fan-out, else None."""
    call = _fanout_call(expr)
    if call is None:
        return None
    loops = " ".join(_text(source, clause, 40) for clause in expr.clauses)
    return f"{call.module or _receiver(call.receiver)}.{call.operation} {loops}"


class _Builder:
    """Walks statements, emitting nodes and the edges between them (a control-flow graph
    of the durable steps; pure statements are left out unless labelled)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.graph = Graph()
        self.count = 0
        self.cluster_stack: list[Cluster] = []
        self.loops: list[tuple[str, Pending]] = []  # (loop node, break exits)

    # -- nodes and edges -----------------------------------------------------------------
    def node(self, kind: str, label: str, pending: Pending, sites: Iterable[str] = (),
             where: Any = None) -> str:
        """A node; ``where`` is its syntax node, whose whole text the node keeps."""
        self.count += 1
        node_id = f"n{self.count}"
        text = _text(self.source, where, FULL_WIDTH) if where is not None else ""
        self.graph.nodes[node_id] = Node(node_id, kind, label, list(sites), text)
        if self.cluster_stack:
            self.cluster_stack[-1].nodes.append(node_id)
        for src, label_ in pending:
            self.graph.edges.append((src, node_id, label_))
        return node_id

    def open_cluster(self, kind: str, title: str) -> Cluster:
        self.count += 1
        cluster = Cluster(f"c{self.count}", title, kind)
        (self.cluster_stack[-1].clusters if self.cluster_stack else self.graph.clusters).append(
            cluster)
        self.cluster_stack.append(cluster)
        return cluster

    def close_cluster(self) -> None:
        self.cluster_stack.pop()

    # -- entries -------------------------------------------------------------------------
    def entry(self, title: str, body: list[Any]) -> None:
        self.open_cluster("entry", title)
        start = self.node("entry", "start", [])
        pending = self.block(body, [(start, "")])
        if pending:
            self.node("end", "end", pending)
        self.close_cluster()

    # -- statements ------------------------------------------------------------------------
    def block(self, stmts: list[Any], pending: Pending) -> Pending:
        for stmt in stmts:
            if not pending:
                break  # unreachable after finish, fail, break or continue
            pending = self.statement(stmt, pending)
        return pending

    def statement(self, stmt: Any, pending: Pending) -> Pending:
        label = getattr(stmt, "label", None)
        title = label.title if label is not None else None
        if isinstance(stmt, A.If):
            return self.if_(stmt, pending, title)
        if isinstance(stmt, (A.For, A.While)):
            return self.loop(stmt, pending, title)
        if isinstance(stmt, A.Break):
            if self.loops:
                self.loops[-1][1].extend(pending)
            return []
        if isinstance(stmt, A.Continue):
            if self.loops:
                for src, lab in pending:
                    self.graph.edges.append((src, self.loops[-1][0], lab or "next"))
            return []
        value = stmt.value if isinstance(stmt, (A.Assign, A.ValueStmt)) else getattr(stmt, "expr", None)
        count_before = self.count
        cluster = None
        if title is not None and value is not None and self._effect_count(value) > 1 \
                and not self._single_batch(value):
            cluster = self.open_cluster("label", title)
            title = None
        pending = self.expr(value, pending, title) if value is not None else pending
        if cluster is not None:
            self.close_cluster()
        emitted = self.count != count_before
        if isinstance(stmt, A.ValueStmt):
            return self.value_stmt(stmt, pending, title if not emitted else None)
        if not emitted and title is not None:
            pending = [(self.node("note", title, pending, where=stmt), "")]
        return pending

    def value_stmt(self, stmt: A.ValueStmt, pending: Pending, title: str | None) -> Pending:
        what = _text(self.source, stmt.value)
        if stmt.kind in ("finish", "fail"):
            # a failed run's error names the ``fail`` that ended it (its site)
            sites = [stmt.site] if stmt.kind == "fail" else []
            self.node(stmt.kind, title or f"{stmt.kind} {what}".strip(), pending, sites, stmt)
            return []
        node = self.node("event", title or f"{stmt.kind} {what}".strip(), pending, [stmt.site],
                         stmt)
        return [(node, "")]

    def if_(self, stmt: A.If, pending: Pending, title: str | None) -> Pending:
        pending = self.expr(stmt.cond, pending, None)
        if title is None and not self._interesting(stmt):
            return pending
        cond = _text(self.source, stmt.cond)
        decision = self.node("decision", f"{title}: if {cond}" if title else f"if {cond}", pending,
                             where=stmt.cond)
        out = self.block(stmt.then.body, [(decision, "yes")])
        otherwise = stmt.otherwise
        if otherwise is None:
            out += [(decision, "no")]
        elif isinstance(otherwise, A.If):
            out += self.if_(otherwise, [(decision, "no")], None) if self._interesting(otherwise) \
                else [(decision, "no")]
        else:
            out += self.block(otherwise.body, [(decision, "no")])
        return out

    def loop(self, stmt: Any, pending: Pending, title: str | None) -> Pending:
        head = stmt.iterable if isinstance(stmt, A.For) else stmt.cond
        pending = self.expr(head, pending, None) if isinstance(stmt, A.For) else pending
        if title is None and not self._interesting(stmt):
            return pending
        text = (f"for {stmt.var} in {_text(self.source, stmt.iterable)}" if isinstance(stmt, A.For)
                else f"while {_text(self.source, stmt.cond)}")
        node = self.node("loop", f"{title}: {text}" if title else text, pending, where=head)
        breaks: Pending = []
        self.loops.append((node, breaks))
        if isinstance(stmt, A.While):
            pre = self.expr(stmt.cond, [(node, "")], None)
            body_entry = [(src, "each" if src == node else lab) for src, lab in pre]
        else:
            body_entry = [(node, "each")]
        end = self.block(stmt.body.body, body_entry)
        self.loops.pop()
        for src, lab in end:
            self.graph.edges.append((src, node, lab or "next"))
        return [(node, "done")] + breaks

    def _interesting(self, stmt: Any) -> bool:
        """Worth a node: holds an effect, a finish/fail, a labelled statement or a loop exit."""
        from .sites import nodes

        for n in nodes(stmt):
            if isinstance(n, A.EFFECTS) or isinstance(n, (A.Break, A.Continue)) and n is not stmt:
                return True
            if isinstance(n, A.ValueStmt) or getattr(n, "label", None) is not None and n is not stmt:
                return True
        return False

    # -- expressions -------------------------------------------------------------------------
    @staticmethod
    def _single_batch(expr: Any) -> bool:
        bare = _strip(expr)
        return isinstance(bare, A.Await) and _batch_leaves(_strip(bare.expr)) is not None

    def _effect_count(self, expr: Any) -> int:
        from .sites import nodes

        return sum(1 for n in nodes(expr) if isinstance(n, (A.ReceiverCall, A.Start, A.Sleep,
                                                              A.WaitSignal, A.SignalRun)))

    def expr(self, expr: Any, pending: Pending, title: str | None) -> Pending:
        """Emit the effects of ``expr`` in evaluation order; ``title`` names the first."""
        state = {"title": title}

        def named(default: str) -> str:
            if state["title"]:
                label, state["title"] = f"{state['title']}\n{default}", None
                return label
            return default

        def visit(node: Any, pend: Pending) -> Pending:
            if isinstance(node, A.Await):
                inner = _strip(node.expr)
                if isinstance(inner, A.ReceiverCall):
                    return visit(inner, pend)
                calls = _batch_leaves(inner)
                if calls is not None:
                    return self.batch(node, calls, pend, named)
                fanned = _fanout_label(inner, self.source)
                if fanned is not None:
                    # its members' steps are ``site:occ:i`` (state keys ``site#i``)
                    return [(self.node("tool", named(f"fan-out: {fanned}"), pend,
                                       [node.site + MEMBERS], node), "")]
                pend = visit(inner, pend)
                return [(self.node("await", named(f"await {_text(self.source, node.expr)}"), pend,
                                   [node.site], node), "")]
            if isinstance(node, A.ReceiverCall):
                for arg in node.args:
                    pend = visit(arg, pend)
                name = f"{node.module or _receiver(node.receiver)}.{node.operation}"
                return [(self.node("tool", named(name), pend, [node.site], node), "")]
            if isinstance(node, A.Start):
                for _, arg in node.args:
                    pend = visit(arg, pend)
                return [(self.node("start", named(f"start {node.process}"), pend, [node.site]), "")]
            if isinstance(node, A.Sleep):
                pend = visit(node.value, pend)
                text = f"sleep {node.mode} {_text(self.source, node.value)}"
                return [(self.node("wait", named(text), pend, [node.site], node), "")]
            if isinstance(node, A.WaitSignal):
                text = f'wait_signal("{node.name}")'
                return [(self.node("wait", named(text), pend, [node.site], node), "")]
            if isinstance(node, A.SignalRun):
                pend = visit(node.payload, visit(node.run, pend))
                text = f'signal_run({_text(self.source, node.run, 16)}, "{node.name}")'
                return [(self.node("event", named(text), pend, [node.site], node), "")]
            from .sites import children

            for child in children(node):
                pend = visit(child, pend)
            return pend

        return visit(expr, pending)

    def batch(self, node: A.Await, calls: list[tuple[str, A.ReceiverCall]], pending: Pending,
              named: Any) -> Pending:
        title = named("")
        self.open_cluster("batch", (title.strip() + " · " if title.strip() else "")
                          + f"batch: {len(calls)} call{'s' if len(calls) != 1 else ''} at once")
        members = []
        for i, (where, call) in enumerate(calls):
            name = f"{call.module or _receiver(call.receiver)}.{call.operation}"
            name = f"{where}: {name}" if where else name
            members.append(self.node("tool", name, pending, [f"{node.site}#{i}"]))
        self.close_cluster()
        return [(member, "") for member in members]


def build_graph(source: str, process: str | None = None) -> Graph:
    """The graph of every process and the main block (or only ``process``)."""
    from . import parse
    from .sites import assign_sites

    module = assign_sites(parse(source))
    builder = _Builder(source)
    if process is not None:
        decl = module.process(process)
        if decl is None:
            names = ", ".join(p.name for p in module.processes) or "none"
            raise GraphError(f"no process `{process}` in this file (processes: {names})")
        decls = [decl]
    else:
        decls = list(module.processes)
        if module.main:
            builder.entry("main block", module.main)
    for decl in decls:
        params = ", ".join(p.name for p in decl.params)
        title = f"process {decl.name}({params})"
        if decl.label is not None:
            title = f"{decl.label.title} · {title}"
        builder.entry(title, decl.body.body)
    return builder.graph


# --------------------------------------------------------------------------- states

FAILED = {"err", "failed", "exhausted", "cancelled", "interrupted"}
OPEN = {"pending", "started", "waiting", "running"}


def _seen(site: str, states: dict[str, list[str]]) -> list[str]:
    if not site.endswith(MEMBERS):
        return states.get(site, [])
    prefix = site[:-1]  # "site#": every member of the fan-out
    return [s for key, found in states.items() if key.startswith(prefix) for s in found]


def node_state(node: Node, states: dict[str, list[str]]) -> tuple[str | None, int]:
    """(``done`` | ``failed`` | ``waiting`` | ``unreached``, executions) for a node. A
    fan-out counts its members; a ``fail`` has a state only if it ended the run."""
    seen = [s for site in node.sites for s in _seen(site, states)]
    if not node.sites:
        return None, 0
    if not seen:
        return (None, 0) if node.kind == "fail" else ("unreached", 0)
    if any(s in OPEN for s in seen):
        return "waiting", len(seen)
    if any(s in FAILED for s in seen):
        return "failed", len(seen)
    return "done", len(seen)


async def site_states(eng: Any, run_id: str) -> dict[str, list[str]]:
    """Step states of a run and its descendants, keyed by the site part of the step key."""
    states: dict[str, list[str]] = {}
    family = [await eng.run_detail(run_id)]  # unknown_run if it does not exist
    while family:
        detail = family.pop()
        for step in detail.steps:
            states.setdefault(state_key(step.step_key), []).append(step.state)
        for wait in detail.summary.waiting:  # a wait not journaled yet (signal, sleep)
            keys = states.setdefault(state_key(wait.step), [])
            if "pending" not in keys:
                keys.append("waiting")
        error = detail.summary.error
        if error is not None and error.site:  # the ``fail`` that ended it
            states.setdefault(error.site, []).append("failed")
        for child in detail.children:
            family.append(await eng.run_detail(child.run_id))
    return states


def state_key(step_key: str) -> str:
    """``site:occ`` -> ``site``; a batch member ``site:occ:i`` -> ``site#i`` (graph nodes)."""
    parts = step_key.split(":")
    return f"{parts[0]}#{parts[2]}" if len(parts) == 3 else parts[0]


COLOURS = {"done": ("#d4edda", "#2e7d32"), "failed": ("#f8d7da", "#c62828"),
           "waiting": ("#fff3cd", "#f9a825"), "unreached": ("#eeeeee", "#9e9e9e")}


def _label(node: Node, states: dict[str, list[str]] | None) -> tuple[str, str | None]:
    if states is None:
        return node.label, None
    state, runs = node_state(node, states)
    label = node.label + (f" ×{runs}" if runs > 1 else "")
    return label, state


# --------------------------------------------------------------------------- mermaid

_MERMAID_SHAPES = {
    "entry": ('(["', '"])'), "end": ('(["', '"])'), "finish": ('(["', '"])'),
    "fail": ('(["', '"])'), "tool": ('["', '"]'), "start": ('[["', '"]]'),
    "await": ('[/"', '"/]'), "wait": ('>"', '"]'), "event": ('>"', '"]'),
    "decision": ('{"', '"}'), "loop": ('{{"', '"}}'), "note": ('["', '"]'),
}


def _visible(text: str) -> str:
    """A label with line breaks as ``\\n`` and no other control character."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch if ch == "\n" or ch.isprintable() else " " for ch in text)


def _mermaid_text(text: str) -> str:
    text = _visible(text)
    return (text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;")
            .replace(">", "#gt;").replace("\n", "<br/>"))


def to_mermaid(graph: Graph, states: dict[str, list[str]] | None = None) -> str:
    lines = ["flowchart TD"]
    classes: dict[str, list[str]] = {}

    def emit(cluster: Cluster, indent: str) -> None:
        lines.append(f'{indent}subgraph {cluster.id}["{_mermaid_text(cluster.title)}"]')
        lines.append(f"{indent}  direction TB")
        for node_id in cluster.nodes:
            node = graph.nodes[node_id]
            label, state = _label(node, states)
            left, right = _MERMAID_SHAPES[node.kind]
            lines.append(f"{indent}  {node_id}{left}{_mermaid_text(label)}{right}")
            if state:
                classes.setdefault(state, []).append(node_id)
            elif node.kind in ("finish", "fail", "note"):
                classes.setdefault(node.kind, []).append(node_id)
        for inner in cluster.clusters:
            emit(inner, indent + "  ")
        lines.append(f"{indent}end")

    for cluster in graph.clusters:
        emit(cluster, "  ")
    for src, dst, label in graph.edges:
        arrow = f" -- {_mermaid_text(label)} --> " if label else " --> "
        lines.append(f"  {src}{arrow}{dst}")
    styles = dict(COLOURS, finish=("#e3f2fd", "#1565c0"), fail=("#fdecea", "#c62828"),
                  note=("#fafafa", "#757575"))
    for name, ids in classes.items():
        fill, stroke = styles[name]
        lines.append(f"  classDef {name} fill:{fill},stroke:{stroke},color:#000")
        lines.append(f"  class {','.join(ids)} {name}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- dot

_DOT_SHAPES = {
    "entry": "oval", "end": "oval", "finish": "oval", "fail": "oval", "tool": "box",
    "start": "component", "await": "parallelogram", "wait": "cds", "event": "cds",
    "decision": "diamond", "loop": "hexagon", "note": "note",
}


def _dot_text(text: str) -> str:
    return _visible(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(graph: Graph, states: dict[str, list[str]] | None = None) -> str:
    lines = ["digraph lashflow {", "  rankdir=TB;", "  compound=true;",
             '  node [fontname="Helvetica", fontsize=11, style="rounded,filled", '
             'fillcolor="white"];', '  edge [fontname="Helvetica", fontsize=10];']

    def emit(cluster: Cluster, indent: str) -> None:
        style = "dashed" if cluster.kind == "batch" else "rounded"
        lines.append(f"{indent}subgraph cluster_{cluster.id} {{")
        lines.append(f'{indent}  label="{_dot_text(cluster.title)}"; style="{style}";')
        for node_id in cluster.nodes:
            node = graph.nodes[node_id]
            label, state = _label(node, states)
            attrs = [f'label="{_dot_text(label)}"', f"shape={_DOT_SHAPES[node.kind]}"]
            if state:
                fill, stroke = COLOURS[state]
                attrs += [f'fillcolor="{fill}"', f'color="{stroke}"']
            elif node.kind == "fail":
                attrs.append('color="#c62828"')
            lines.append(f"{indent}  {node_id} [{', '.join(attrs)}];")
        for inner in cluster.clusters:
            emit(inner, indent + "  ")
        lines.append(f"{indent}}}")

    for cluster in graph.clusters:
        emit(cluster, "  ")
    for src, dst, label in graph.edges:
        lines.append(f'  {src} -> {dst}' + (f' [label="{_dot_text(label)}"];' if label else ";"))
    lines.append("}")
    return "\n".join(lines)


def render(graph: Graph, fmt: str = "mermaid", states: dict[str, list[str]] | None = None) -> str:
    """``mermaid`` or ``dot`` text; ``states`` maps state keys to the states seen there."""
    if fmt == "dot":
        return to_dot(graph, states)
    return to_mermaid(graph, states)
