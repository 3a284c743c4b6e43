"""Spans for run drives, steps and attempts, through the OpenTelemetry API.

lashflow never imports OpenTelemetry on its own: tracing is on only when the application
has imported ``opentelemetry.trace`` and installed a tracer provider before the engine
opens (``tracer()``). Otherwise the engine holds no ``Tracing`` at all and the hot path
pays one ``is None`` test per drive, step and attempt.

The span tree of a run:

- ``lashflow.run <process>``: one per drive. Every drive of a run has the run's *origin*
  as its parent when no span is current (a worker's resume), so all drives of a run share
  one trace, and links to it otherwise. The origin is the span current when the run was
  created (the caller's request, the parent run's drive), or a ``lashflow.create`` span
  made for it; its ``traceparent`` is kept in the run's meta.
- ``lashflow.step <tool>``: one per tool call that runs (replayed steps run nothing and
  get no span), with ``lashflow.attempt <tool>`` children, one per attempt. The attempt's
  span is the current one while the tool runs, so a tool's instrumented HTTP calls join
  the trace; ``ToolContext.traceparent`` gives it for hand-made propagation.
- events: ``lashflow.wait.parked`` (a call parked on its completion key, or the drive
  ended waiting) and ``lashflow.wait.resolved`` (a parked call's result was taken).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

from ..states import RunStatus

TRACER_NAME = "lashflow"
RUN_ID = "lashflow.run_id"
FAILED_OUTCOMES = frozenset(["err", "failed", "exhausted"])  # a call's outcome statuses


def tracer() -> Any | None:
    """The application's tracer for lashflow, or None when it traces nothing."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    from lashflow import __version__

    return provider.get_tracer(TRACER_NAME, __version__)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the span current in this task, if any."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _span_context(traceparent: Any) -> Any | None:
    """The remote span context a stored ``traceparent`` names (None if malformed)."""
    from opentelemetry import trace

    if not isinstance(traceparent, str):
        return None
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        context = trace.SpanContext(int(parts[1], 16), int(parts[2], 16), is_remote=True,
                                    trace_flags=trace.TraceFlags(int(parts[3], 16)))
    except ValueError:
        return None
    return context if context.is_valid else None


class Tracing:
    """The engine's spans (see the module doc)."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import trace

        self._tracer = tracer
        self._trace = trace

    def origin(self, process: str | None, run_id: str) -> str | None:
        """The ``traceparent`` a new run's drives hang under (stored in its meta)."""
        found = current_traceparent()
        if found is not None:
            return found
        span = self._tracer.start_span(f"lashflow.create {process or 'main'}",
                                       attributes={RUN_ID: run_id})
        span.end()
        context = span.get_span_context()
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"

    @contextlib.contextmanager
    def drive(self, run_id: str, process: str | None, generation: int, origin: Any,
              resumed: bool) -> Iterator[Any]:
        trace = self._trace
        stored = _span_context(origin)
        current = trace.get_current_span().get_span_context()
        parent = None
        links = []
        if stored is not None:
            if current.is_valid:
                if (current.trace_id, current.span_id) != (stored.trace_id, stored.span_id):
                    links.append(trace.Link(stored))
            else:
                parent = trace.set_span_in_context(trace.NonRecordingSpan(stored))
        attributes = {RUN_ID: run_id, "lashflow.process": process or "main",
                      "lashflow.generation": generation, "lashflow.resumed": resumed}
        with self._tracer.start_as_current_span(
                f"lashflow.run {process or 'main'}", context=parent, links=links,
                attributes=attributes, record_exception=False,
                set_status_on_exception=True) as span:
            yield span

    def drive_ended(self, span: Any, status: str, waits: list[tuple[str, str]],
                    error_code: str | None) -> None:
        """``waits``: (kind, step key) of what the run parked on."""
        span.set_attribute("lashflow.status", status)
        for kind, step in waits:
            span.add_event("lashflow.wait.parked", {"lashflow.wait.kind": kind,
                                                    "lashflow.step_key": step})
        if status in (RunStatus.FAILED, RunStatus.NEEDS_ATTENTION):
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR,
                                               error_code or status))

    @contextlib.contextmanager
    def step(self, run_id: str, step_key: str, tool: str) -> Iterator[Any]:
        with self._tracer.start_as_current_span(
                f"lashflow.step {tool}", record_exception=False,
                attributes={RUN_ID: run_id, "lashflow.step_key": step_key,
                            "lashflow.tool": tool}) as span:
            yield span

    def step_ended(self, span: Any, status: str, attempts: int) -> None:
        span.set_attribute("lashflow.status", status)
        span.set_attribute("lashflow.attempts", attempts)
        if status == "pending":
            span.add_event("lashflow.wait.parked", {"lashflow.wait.kind": "completion"})
        elif status in FAILED_OUTCOMES:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, status))

    @contextlib.contextmanager
    def attempt(self, run_id: str, step_key: str, tool: str, attempt: int) -> Iterator[Any]:
        with self._tracer.start_as_current_span(
                f"lashflow.attempt {tool}", record_exception=True,
                attributes={RUN_ID: run_id, "lashflow.step_key": step_key,
                            "lashflow.tool": tool, "lashflow.attempt": attempt}) as span:
            yield span

    def attempt_ended(self, span: Any, status: str, code: str | None,
                      retry_delay: float | None) -> None:
        span.set_attribute("lashflow.status", status)
        if code:
            span.set_attribute("lashflow.code", code)
        if retry_delay is not None:
            span.set_attribute("lashflow.retry_delay", retry_delay)
        if status in FAILED_OUTCOMES:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code or status))

    @contextlib.contextmanager
    def request(self, headers: Any, name: str) -> Iterator[Any]:
        """A span for an incoming HTTP request, continuing the caller's ``traceparent``."""
        from opentelemetry.propagate import extract

        with self._tracer.start_as_current_span(name, context=extract(headers),
                                                kind=self._trace.SpanKind.SERVER) as span:
            yield span

    def wait_resolved(self, step_key: str, how: str) -> None:
        """A parked call's result was taken in the current drive."""
        self._trace.get_current_span().add_event("lashflow.wait.resolved", {
            "lashflow.step_key": step_key, "lashflow.resolution": how})


__all__ = ["Tracing", "current_traceparent", "tracer"]
