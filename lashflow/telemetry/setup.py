"""The CLI's OpenTelemetry set-up from the standard ``OTEL_*`` environment variables.

A library must not install global providers, so the engine never does; the ``lashflow``
command is an application, and installs them when asked to:
``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` = ``console`` (JSON on stderr, so
stdout stays the command's own) or ``otlp`` (needs ``opentelemetry-exporter-otlp``; the
endpoint and headers come from ``OTEL_EXPORTER_OTLP_*``). ``OTEL_SERVICE_NAME`` names the
service (default ``lashflow``); batching and intervals follow ``OTEL_BSP_*`` and
``OTEL_METRIC_EXPORT_*`` as the SDK reads them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable

from ..errors import LashflowError

_EXPORTERS = ("console", "otlp", "none")


def configure_from_environment() -> Callable[[], None] | None:
    """Install the providers the environment asks for; returns their shutdown (which
    flushes what is buffered), or None when nothing was installed."""
    traces = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    metrics = os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if traces in ("", "none") and metrics in ("", "none"):
        return None
    for name, value in (("OTEL_TRACES_EXPORTER", traces), ("OTEL_METRICS_EXPORTER", metrics)):
        if value and value not in _EXPORTERS:
            raise LashflowError(f"{name}={value}: lashflow knows console, otlp and none",
                                code="usage_error")
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        print("lashflow: OTEL_*_EXPORTER is set but OpenTelemetry is not installed; "
              "pip install 'lashflow[otel]' (nothing is exported)", file=sys.stderr)
        return None
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME",
                                                               "lashflow")})
    stops: list[Callable[[], Any]] = []
    if traces not in ("", "none"):
        stops.append(_tracing(traces, resource))
    if metrics not in ("", "none"):
        stops.append(_metrics(metrics, resource))

    def shutdown() -> None:
        for stop in stops:
            stop()
    return shutdown


def _tracing(exporter_name: str, resource: Any) -> Callable[[], Any]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if exporter_name == "console":
        exporter: Any = ConsoleSpanExporter(out=sys.stderr)
    else:
        exporter = _otlp("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                         "OTLPSpanExporter")
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _metrics(exporter_name: str, resource: Any) -> Callable[[], Any]:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter, PeriodicExportingMetricReader,
    )

    if exporter_name == "console":
        exporter: Any = ConsoleMetricExporter(out=sys.stderr)
    else:
        exporter = _otlp("opentelemetry.exporter.otlp.proto.http.metric_exporter",
                         "OTLPMetricExporter")
    provider = MeterProvider(resource=resource,
                             metric_readers=[PeriodicExportingMetricReader(exporter)])
    metrics.set_meter_provider(provider)
    return provider.shutdown


def _otlp(module: str, name: str) -> Any:
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise LashflowError("the otlp exporter needs opentelemetry-exporter-otlp-proto-http: "
                            "pip install opentelemetry-exporter-otlp-proto-http",
                            code="usage_error")
    return getattr(importlib.import_module(module), name)()


__all__ = ["configure_from_environment"]
