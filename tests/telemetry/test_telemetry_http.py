"""``/metrics`` in the Prometheus text format, and the completion webhook continuing the
sender's trace."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.http import ServeConfig, create_app
from lashflow.telemetry import Metrics, Telemetry, Tracing

TOKEN = "metrics-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SAMPLE = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+Inf-]+$')


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(seconds=60)))


@tool
async def echo(x: int) -> int:
    return x


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient, Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(Tracing(provider.get_tracer("lashflow")), Metrics())
    async with Engine(db=f"sqlite:///{tmp_path / 'm.db'}", tools=[approve, echo],
                      telemetry=telemetry) as engine:
        app = create_app(engine, ServeConfig(TOKEN))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lashflow") as client:
            yield engine, client, exporter
    provider.shutdown()


def samples(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        assert SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        found[name] = float(value)
    return found


async def test_metrics_need_the_token_and_count_runs_waits_steps_and_commits(
        served: Any) -> None:
    engine, client, _ = served
    assert (await client.get("/metrics")).status_code == 401
    assert (await engine.run("finish await tools.echo({x: 1})?")).status is RunStatus.FINISHED
    waiting = await engine.run("finish await tools.approve({})")
    assert waiting.status is RunStatus.WAITING
    response = await client.get("/metrics", headers=AUTH)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(response.text)
    assert found['lashflow_runs{status="finished"}'] == 1
    assert found['lashflow_runs{status="waiting"}'] == 1
    assert found['lashflow_open_waits{kind="completion"}'] == 1
    assert 0 <= found['lashflow_oldest_wait_age_seconds{kind="completion"}'] < 60
    assert found['lashflow_steps_total{tool="tools.echo",outcome="ok"}'] == 1
    assert found['lashflow_attempts_total{tool="tools.approve",outcome="pending"}'] == 1
    assert found['lashflow_attempt_duration_seconds_count{tool="tools.echo"}'] == 1
    assert found['lashflow_attempt_duration_seconds_bucket{tool="tools.echo",le="+Inf"}'] == 1
    assert found['lashflow_drives_total{status="waiting"}'] == 1
    assert found["lashflow_journal_commit_seconds_count"] >= 2
    assert found["lashflow_journal_commit_group_size_count"] == \
        found["lashflow_journal_commit_seconds_count"]
    assert "lashflow_lease_takeovers_total" in response.text  # described, none yet


async def test_the_webhook_continues_the_senders_trace(served: Any) -> None:
    engine, client, exporter = served
    parked = await engine.run("finish await tools.approve({})")
    key = parked.waiting[0].key
    exporter.clear()
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    response = await client.post(f"/v1/completions/{key}", json={"result": "yes"},
                                 headers={"traceparent": f"00-{trace_id}-{parent}-01"})
    assert response.status_code == 200
    if engine.driver.is_driving(parked.run_id):
        await engine.driver.join(parked.run_id)
    assert (await engine.get(parked.run_id)).status is RunStatus.FINISHED
    spans = {span.name: span for span in exporter.get_finished_spans()}
    webhook = spans["lashflow.completion"]
    assert f"{webhook.context.trace_id:032x}" == trace_id
    assert f"{webhook.parent.span_id:016x}" == parent
    drive = spans["lashflow.run main"]  # the resume the delivery started
    assert drive.parent.span_id == webhook.context.span_id
    assert key not in str([dict(s.attributes or {}) for s in exporter.get_finished_spans()])


async def test_records_are_mirrored_to_an_opentelemetry_meter(tmp_path: Path) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    async with Engine(db=f"sqlite:///{tmp_path / 'o.db'}", tools=[echo],
                      telemetry=Telemetry(None, Metrics(provider))) as engine:
        for x in range(3):
            await engine.run(f"finish await tools.echo({{x: {x}}})?")
    points = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    points[(metric.name, tuple(sorted(point.attributes.items())))] = point
    steps = points[("lashflow.steps", (("outcome", "ok"), ("tool", "tools.echo")))]
    assert steps.value == 3
    duration = points[("lashflow.attempt.duration", (("tool", "tools.echo"),))]
    assert duration.count == 3
    assert points[("lashflow.drives", (("status", "finished"),))].value == 3
    provider.shutdown()


async def test_a_run_taken_from_a_silent_worker_counts_as_a_takeover(served: Any) -> None:
    engine, client, _ = served
    run = await engine.create("finish await tools.echo({x: 5})?")
    assert await engine.store.claim(run.run_id, "elsewhere:1:gone", 0.0, now=0.0) == 1
    assert (await engine.resume(run.run_id)).status is RunStatus.FINISHED
    found = samples((await client.get("/metrics", headers=AUTH)).text)
    assert found["lashflow_lease_takeovers_total"] == 1
