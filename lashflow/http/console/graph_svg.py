"""The ``lashflow graph`` model drawn as SVG for the console, with no outside service.

Layout: every node gets a row by breadth-first order from the graph's entries (an edge
back to a node already placed, a loop, does not move it) and a column by its order in
that row; edges are straight lines down, loops a curve on the right. Each node is
coloured by its state in the run (done, waiting, failed, unreached). The SVG is built
from escaped text only and uses presentation attributes, no inline style (the console's
Content-Security-Policy allows no inline style).
"""

from __future__ import annotations

from collections import deque
from html import escape

from ...lang.graph import COLOURS, Graph, node_state

BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 200, 40, 28, 30, 12
MAX_LABEL = 32  # characters a line of a box holds; two lines, then the tooltip has it all
SHAPE_RADIUS = {"entry": 17, "finish": 17, "fail": 17, "end": 17, "decision": 2, "loop": 8}


def _rows(graph: Graph) -> dict[str, tuple[int, int]]:
    """node id -> (row, column)."""
    incoming = {target for _, target, _ in graph.edges}
    roots = [node_id for node_id in graph.nodes if node_id not in incoming] or \
        list(graph.nodes)[:1]
    outgoing: dict[str, list[str]] = {}
    for source, target, _ in graph.edges:
        outgoing.setdefault(source, []).append(target)
    row: dict[str, int] = {}
    queue = deque((root, 0) for root in roots)
    while queue:
        node_id, depth = queue.popleft()
        if node_id in row:
            continue
        row[node_id] = depth
        for target in outgoing.get(node_id, []):
            if target not in row:
                queue.append((target, depth + 1))
    for node_id in graph.nodes:  # unreachable from an entry: below everything
        row.setdefault(node_id, max(row.values(), default=-1) + 1)
    place: dict[str, tuple[int, int]] = {}
    used: dict[int, int] = {}
    for node_id in graph.nodes:
        r = row[node_id]
        place[node_id] = (r, used.get(r, 0))
        used[r] = used.get(r, 0) + 1
    return place


def _lines(text: str) -> list[str]:
    """A label in at most two lines of ``MAX_LABEL``, broken at a space where one is near;
    what is cut ends in an ellipsis (the node's ``<title>`` holds the whole text)."""
    flat = " ".join(text.split())
    if len(flat) <= MAX_LABEL:
        return [flat]
    cut = flat.rfind(" ", MAX_LABEL // 2, MAX_LABEL + 1)
    cut = cut if cut > 0 else MAX_LABEL
    first, rest = flat[:cut], flat[cut:].strip()
    if len(rest) > MAX_LABEL:
        rest = rest[:MAX_LABEL - 1] + "…"
    return [first, rest]


def _label_svg(x: float, y: float, text: str) -> str:
    lines = _lines(text)
    top = y + 4 - 7 * (len(lines) - 1)
    spans = "".join(f'<tspan x="{x:.0f}" y="{top + 14 * i:.0f}">{escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    return f'<text text-anchor="middle" font-size="12">{spans}</text>'


def graph_svg(graph: Graph, states: dict[str, list[str]]) -> str:
    place = _rows(graph)
    columns = max((c for _, c in place.values()), default=0) + 1
    rows = max((r for r, _ in place.values()), default=0) + 1
    width = MARGIN * 2 + columns * (BOX_W + GAP_X) + 40
    height = MARGIN * 2 + rows * (BOX_H + GAP_Y)

    def centre(node_id: str) -> tuple[float, float]:
        r, c = place[node_id]
        return (MARGIN + c * (BOX_W + GAP_X) + BOX_W / 2, MARGIN + r * (BOX_H + GAP_Y) + BOX_H / 2)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="process graph">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
           'fill="#666"/></marker></defs>']
    for source, target, label in graph.edges:
        (x1, y1), (x2, y2) = centre(source), centre(target)
        if place[target][0] > place[source][0]:
            path = f"M {x1:.0f} {y1 + BOX_H / 2:.0f} L {x2:.0f} {y2 - BOX_H / 2 - 2:.0f}"
            lx, ly = (x1 + x2) / 2 + 4, (y1 + y2) / 2
        else:  # back to an earlier row: a loop, drawn on the right
            side = max(x1, x2) + BOX_W / 2 + 18
            path = (f"M {x1 + BOX_W / 2:.0f} {y1:.0f} C {side:.0f} {y1:.0f} {side:.0f} "
                    f"{y2:.0f} {x2 + BOX_W / 2 + 2:.0f} {y2:.0f}")
            lx, ly = side - 6, (y1 + y2) / 2
        out.append(f'<path d="{path}" fill="none" stroke="#666" stroke-width="1.3" '
                   f'marker-end="url(#arrow)"/>')
        if label:
            out.append(f'<text x="{lx:.0f}" y="{ly:.0f}" font-size="11" fill="#444">'
                       f'{escape(label)}</text>')
    for node_id, node in graph.nodes.items():
        x, y = centre(node_id)
        state, runs = node_state(node, states)
        fill, stroke = COLOURS.get(state or "", ("#ffffff", "#555555"))
        text = node.label + (f" ×{runs}" if runs > 1 else "")
        whole = node.label if not node.text or node.text in node.label else \
            f"{node.label}\n{node.text}"
        radius = SHAPE_RADIUS.get(node.kind, 4)
        ended = node.kind == "fail" and state == "failed"  # the fail that ended the run
        out.append(f'<g class="node" data-kind="{escape(node.kind)}" '
                   f'data-state="{escape(state or "none")}">'
                   f'<title>{escape(node.kind)}: {escape(whole)}'
                   f'{" ×" + str(runs) if runs > 1 else ""}'
                   f'{" (" + escape(state) + ")" if state else ""}</title>'
                   f'<rect x="{x - BOX_W / 2:.0f}" y="{y - BOX_H / 2:.0f}" width="{BOX_W}" '
                   f'height="{BOX_H}" rx="{radius}" fill="{fill}" stroke="{stroke}" '
                   f'stroke-width="{3.5 if ended else 1.5}"/>'
                   f'{_label_svg(x, y, text)}</g>')
    out.append("</svg>")
    return "".join(out)


__all__ = ["graph_svg"]
