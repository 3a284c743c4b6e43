"""Render the trace of the fulfill example (park on approval, then resume) as an SVG
timeline: docs/observability-trace.svg, the picture docs/observability.md shows.

The spans come from OpenTelemetry's in-memory exporter, so no tracing backend is needed.
Each row is one span, indented under its parent, its bar placed on the trace's time axis;
a dot on a bar is one of the span's events (a wait parked or resolved).

Usage: python scripts/render_trace.py [--out docs/observability-trace.svg]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lashflow import Engine, ToolResult
from lashflow.telemetry import Metrics, Telemetry, Tracing

ROOT = Path(__file__).resolve().parent.parent
ROW, LEFT, WIDTH = 26, 330, 560
COLOURS = {"lashflow.create": "#9aa5b1", "lashflow.run": "#3b6fb6",
           "lashflow.step": "#2f9e6e", "lashflow.attempt": "#8cc9a5"}


async def capture() -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(Tracing(provider.get_tracer("lashflow")), Metrics())
    order = json.loads((ROOT / "processes" / "fulfill.input.json").read_text())
    tools = [str(ROOT / "processes" / "fulfill.py")]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'trace.db'}"
        async with Engine(db=db, modules=tools, telemetry=telemetry) as engine:
            parked = await engine.run(ROOT / "processes" / "fulfill.lash", "fulfill", order)
        await asyncio.sleep(0.05)  # a person takes a moment to approve
        async with Engine(db=db, modules=tools, telemetry=telemetry) as engine:
            await engine.complete(parked.waiting[0].key, ToolResult.ok({"approved": True}))
    return list(exporter.get_finished_spans())


def render(spans: list[Any]) -> str:
    by_id = {span.context.span_id: span for span in spans}

    def depth(span: Any) -> int:
        level = 0
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            level += 1
        return level

    ordered = sorted(spans, key=lambda s: (s.start_time, depth(s)))
    start = min(s.start_time for s in spans)
    total = max(s.end_time for s in spans) - start
    scale = WIDTH / total
    height = ROW * (len(ordered) + 2)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 150}" '
           f'height="{height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="8" y="16" font-weight="bold">trace of one fulfill run '
           f'({total / 1e6:.0f} ms, park and resume)</text>']
    for row, span in enumerate(ordered, start=1):
        y = ROW * row + 8
        x = LEFT + (span.start_time - start) * scale
        width = max((span.end_time - span.start_time) * scale, 2)
        colour = COLOURS.get(span.name.split(" ")[0], "#777")
        label = html.escape(span.name)
        status = (span.attributes or {}).get("lashflow.status")
        out.append(f'<text x="{8 + 14 * depth(span)}" y="{y + 13}">{label}</text>')
        out.append(f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="16" rx="3" '
                   f'fill="{colour}"/>')
        for event in span.events:
            ex = LEFT + (event.timestamp - start) * scale
            out.append(f'<circle cx="{ex:.1f}" cy="{y + 8}" r="4" fill="#d9822b">'
                       f'<title>{html.escape(event.name)}</title></circle>')
        duration = (span.end_time - span.start_time) / 1e6
        note = f"{duration:.1f} ms" + (f" {status}" if status else "")
        out.append(f'<text x="{x + width + 4:.1f}" y="{y + 13}" fill="#444">'
                   f'{html.escape(note)}</text>')
    out.append(f'<text x="8" y="{height - 6}" fill="#666">orange dot: an event '
               f'(lashflow.wait.parked, lashflow.wait.resolved)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "observability-trace.svg"))
    args = parser.parse_args()
    spans = asyncio.run(capture())
    Path(args.out).write_text(render(spans), encoding="utf-8")
    print(f"{len(spans)} spans -> {args.out}")


if __name__ == "__main__":
    main()
