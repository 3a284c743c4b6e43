"""What lashflow tells operators: OpenTelemetry spans and metrics, ``/metrics`` text and
run-transition log lines.

OpenTelemetry is optional (``pip install 'lashflow[otel]'``) and never imported by
lashflow unless the application did first; see ``Telemetry.detect``.
"""

from __future__ import annotations


from .metrics import Metrics
from .tracing import Tracing, current_traceparent, tracer
from ..slotted import Slotted


class Telemetry(Slotted):
    """The engine's reporters; either may be None (nothing of that kind is reported)."""

    __slots__ = ("tracing", "metrics")

    def __init__(self, tracing: Tracing | None = None, metrics: Metrics | None = None) -> None:
        self.tracing = tracing
        self.metrics = metrics

    @classmethod
    def detect(cls, *, metrics: bool = False) -> "Telemetry | None":
        """Spans when the application installed a tracer provider; counters when it
        installed a meter provider or ``metrics`` (``lashflow serve``'s ``/metrics``)."""
        found = tracer()
        counting = Metrics() if metrics else None
        if counting is None:
            probe = Metrics()
            counting = probe if probe.mirrored else None
        if found is None and counting is None:
            return None
        return cls(Tracing(found) if found is not None else None, counting)


__all__ = ["Metrics", "Telemetry", "Tracing", "current_traceparent"]
