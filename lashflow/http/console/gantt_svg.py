"""A run's steps and attempts over time, drawn as a Gantt chart (SVG) for the run page.

One row per step in journal order, except that the members of a fan-out (step keys
``site:occurrence:index``) are grouped under one row for their batch, in index order
(the source order of the batch), whatever order they finished in. Each attempt is a bar
from its start to its end, coloured by how it ended, so retries show as several bars with
the backoff between them; a step that waited (a completion key, a timer, a signal, a
child run) shows the wait as an amber bar. Every bar has a ``<title>`` (its tooltip).
Built from escaped text only, presentation attributes, no inline style (the console's
Content-Security-Policy allows none), as ``graph_svg`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from ...durable.timeline import seconds
from ...states import AttemptStatus, StepStatus

WIDTH, LABEL_W, ROW_H, BAR_H, TOP, RIGHT = 960, 250, 20, 12, 24, 16
COLOURS = {"ok": "#43a047", "done": "#43a047", "err": "#e53935", "failed": "#e53935",
           "exhausted": "#e53935", "cancelled": "#9e9e9e", "interrupted": "#9e9e9e",
           "started": "#1e88e5", "wait": "#f9a825", "pending": "#f9a825", "batch": "#90a4ae"}
WAIT_KINDS = {"sleep", "wait_signal", "await", "start"}


@dataclass
class _Row:
    label: str
    state: str
    bars: list[tuple[float, float, str, str]] = field(default_factory=list)  # start, end, colour key, tip
    indent: bool = False


def _step_rows(step: Any, end_of_run: float, before: float | None = None) -> _Row:
    """``before``: when the journal's previous step ended (a wait that leaves no row
    until it ends, a signal's or a timer's, began about then)."""
    name = step.tool or step.kind
    row = _Row(f"{name}", step.state)
    last_end: float | None = None
    for attempt in step.attempts:
        if attempt.started_at is None:
            continue
        end = attempt.finished_at if attempt.finished_at is not None else end_of_run
        took = seconds(end - attempt.started_at)
        tip = f"{name} · attempt {attempt.attempt} · {attempt.status} · {took}"
        if attempt.code or attempt.message:
            tip += f" · {attempt.code or ''}: {attempt.message or ''}"
        row.bars.append((attempt.started_at, end, attempt.status, tip))
        last_end = end
    waited_from = last_end if last_end is not None else step.created_at
    parked = step.kind in WAIT_KINDS and not step.attempts
    if parked and before is not None and step.created_at is not None:
        waited_from = min(before, step.created_at)
    waits = parked or step.status == StepStatus.PENDING or any(a.status == AttemptStatus.PENDING
                                                      for a in step.attempts)
    if waits and waited_from is not None:
        until = step.updated_at if step.status == StepStatus.DONE and step.updated_at else end_of_run
        if until > waited_from:
            row.bars.append((waited_from, until, "wait",
                             f"{name} · waited {seconds(until - waited_from)}"))
    if not row.bars and step.created_at is not None:  # a print, a yield: a moment
        row.bars.append((step.created_at, step.created_at, step.state,
                         f"{name} · {step.state}"))
    return row


def _member(step_key: str) -> tuple[str, int] | None:
    """(batch, index) of a fan-out member's key ``site:occurrence:index``."""
    parts = step_key.split(":")
    if len(parts) == 3 and parts[2].isdigit():
        return f"{parts[0]}:{parts[1]}", int(parts[2])
    return None


def rows_of(steps: list[Any], end_of_run: float) -> list[_Row]:
    """The chart's rows: steps in journal order, a fan-out's members under their batch in
    index order."""
    rows: list[_Row] = []
    batches: dict[str, list[tuple[int, Any]]] = {}
    order: list[tuple[str, Any]] = []
    for step in steps:
        member = _member(step.step_key)
        if member is None:
            order.append(("step", step))
            continue
        batch, index = member
        if batch not in batches:
            batches[batch] = []
            order.append(("batch", batch))
        batches[batch].append((index, step))
    before: float | None = None
    for kind, item in order:
        if kind == "step":
            rows.append(_step_rows(item, end_of_run, before))
            before = max([bar[1] for bar in rows[-1].bars] or [before or 0.0]) or before
            continue
        members = [_step_rows(step, end_of_run) for _, step in sorted(batches[item],
                                                                      key=lambda m: m[0])]
        starts = [bar[0] for row in members for bar in row.bars]
        ends = [bar[1] for row in members for bar in row.bars]
        head = _Row(f"fan-out · {len(members)} calls", "batch")
        if starts:
            head.bars.append((min(starts), max(ends), "batch",
                              f"fan-out of {len(members)} calls · {seconds(max(ends) - min(starts))}"))
        rows.append(head)
        before = max(ends) if ends else before
        for index, row in enumerate(members):
            row.label, row.indent = f"[{index}] {row.label}", True
            rows.append(row)
    return rows


def gantt_svg(steps: list[Any], start: float, end_of_run: float) -> str:
    """The chart of ``steps`` (``StepView``) from ``start`` (the run's creation) to
    ``end_of_run`` (its last change, or now while it runs)."""
    rows = rows_of(steps, end_of_run)
    if not rows:
        return ""
    times = [t for row in rows for bar in row.bars for t in bar[:2]]
    first, last = min([start, *times]), max([end_of_run, *times])
    span = max(last - first, 1e-3)
    area = WIDTH - LABEL_W - RIGHT
    height = TOP + len(rows) * ROW_H + 8

    def x(moment: float) -> float:
        return LABEL_W + (moment - first) / span * area

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="gantt" width="{WIDTH}" '
           f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
           f'aria-label="steps over time">']
    for i in range(5):  # the time axis: five ticks
        moment = first + span * i / 4
        out.append(f'<line x1="{x(moment):.1f}" y1="{TOP - 6}" x2="{x(moment):.1f}" '
                   f'y2="{height - 4}" stroke="#e3e7eb" stroke-width="1"/>'
                   f'<text x="{x(moment):.1f}" y="{TOP - 10}" font-size="10" fill="#5b6b7b" '
                   f'text-anchor="{"start" if i == 0 else "end" if i == 4 else "middle"}">'
                   f'+{escape(seconds(moment - first))}</text>')
    for index, row in enumerate(rows):
        y = TOP + index * ROW_H
        label = row.label if len(row.label) <= 34 else row.label[:33] + "…"
        out.append(f'<g class="gantt-row" data-state="{escape(row.state)}">'
                   f'<title>{escape(row.label)} · {escape(row.state)}</title>'
                   f'<text x="{16 if row.indent else 4}" y="{y + BAR_H}" font-size="11" '
                   f'fill="#1f2d3a">{escape(label)}</text></g>')
        for begin, end, colour, tip in row.bars:
            width = max(x(end) - x(begin), 2.0)
            out.append(f'<rect class="bar bar-{escape(colour)}" x="{x(begin):.1f}" y="{y + 3}" '
                       f'width="{width:.1f}" height="{BAR_H}" rx="2" '
                       f'fill="{COLOURS.get(colour, "#78909c")}"><title>{escape(tip)}</title>'
                       f'</rect>')
    out.append("</svg>")
    return "".join(out)


__all__ = ["gantt_svg", "rows_of"]
