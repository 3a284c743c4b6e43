"""OpenTelemetry spans of real runs, captured by the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lashflow import Engine, RetryPolicy, RunStatus, ToolCall, ToolResult, tool
from lashflow.telemetry import Metrics, Telemetry, Tracing

ROOT = Path(__file__).resolve().parents[2]
FULFILL = ROOT / "processes" / "fulfill.lash"
ORDER = json.loads((ROOT / "processes" / "fulfill.input.json").read_text())


@pytest.fixture()
def spans() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(Tracing(provider.get_tracer("lashflow")), Metrics())
    yield exporter, telemetry
    provider.shutdown()


def names(finished: Any) -> list[str]:
    return sorted(span.name for span in finished)


async def test_fulfill_across_a_park_and_a_resume(tmp_path: Path, spans: Any) -> None:
    exporter, telemetry = spans
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Engine(db=db, modules=[str(ROOT / "processes" / "fulfill.py")],
                      telemetry=telemetry) as engine:
        parked = await engine.run(FULFILL, "fulfill", ORDER)
        assert parked.status is RunStatus.WAITING
        key = parked.waiting[0].key
    first = exporter.get_finished_spans()
    assert names(first) == ["lashflow.attempt tools.quote", "lashflow.attempt tools.request_approval",
                            "lashflow.create fulfill", "lashflow.run fulfill",
                            "lashflow.step tools.quote", "lashflow.step tools.request_approval"]
    by_name = {span.name: span for span in first}
    create, drive = by_name["lashflow.create fulfill"], by_name["lashflow.run fulfill"]
    assert drive.parent.span_id == create.context.span_id  # the run's origin
    assert drive.attributes["lashflow.run_id"] == parked.run_id
    assert drive.attributes["lashflow.status"] == "waiting"
    assert [e.name for e in drive.events] == ["lashflow.wait.parked"]
    assert drive.events[0].attributes["lashflow.wait.kind"] == "completion"
    step = by_name["lashflow.step tools.request_approval"]
    assert step.parent.span_id == drive.context.span_id
    assert step.attributes["lashflow.status"] == "pending"
    assert by_name["lashflow.attempt tools.quote"].parent.span_id == \
        by_name["lashflow.step tools.quote"].context.span_id

    exporter.clear()  # a new engine, as a resuming worker would be
    async with Engine(db=db, modules=[str(ROOT / "processes" / "fulfill.py")],
                      telemetry=telemetry) as engine:
        status = await engine.complete(key, ToolResult.ok({"approved": True}))
        assert status is RunStatus.FINISHED
    second = exporter.get_finished_spans()
    # the recorded quote and approval are replayed, not run: no span of theirs again
    assert names(second) == ["lashflow.attempt tools.charge", "lashflow.run fulfill",
                             "lashflow.step tools.charge"]
    resumed = {span.name: span for span in second}["lashflow.run fulfill"]
    assert resumed.context.trace_id == drive.context.trace_id  # one trace per run
    assert resumed.parent.span_id == create.context.span_id
    assert resumed.attributes["lashflow.resumed"] is True
    assert resumed.attributes["lashflow.status"] == "finished"
    resolved = [e for e in resumed.events if e.name == "lashflow.wait.resolved"]
    assert [e.attributes["lashflow.step_key"] for e in resolved] == [step.attributes[
        "lashflow.step_key"]]




@tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=0.001))
async def flaky(call: ToolCall) -> ToolResult:
    if call.context.attempt < 3:
        return ToolResult.retryable_failure("busy", code="http_503")
    return ToolResult.ok(call.context.traceparent)


async def test_a_retried_call_has_one_span_per_attempt(tmp_path: Path, spans: Any) -> None:
    exporter, telemetry = spans
    async with Engine(db=f"sqlite:///{tmp_path / 'r.db'}", tools=[flaky],
                      telemetry=telemetry) as engine:
        outcome = await engine.run("finish await tools.flaky({})?")
    attempts = sorted((s for s in exporter.get_finished_spans()
                       if s.name == "lashflow.attempt tools.flaky"),
                      key=lambda s: s.attributes["lashflow.attempt"])
    assert [s.attributes["lashflow.attempt"] for s in attempts] == [1, 2, 3]
    assert [s.attributes["lashflow.status"] for s in attempts] == ["failed", "failed", "ok"]
    assert attempts[0].attributes["lashflow.code"] == "http_503"
    assert attempts[0].attributes["lashflow.retry_delay"] > 0
    assert attempts[0].status.status_code is trace.StatusCode.ERROR
    step = next(s for s in exporter.get_finished_spans() if s.name.startswith("lashflow.step"))
    assert {s.parent.span_id for s in attempts} == {step.context.span_id}
    assert step.attributes["lashflow.attempts"] == 3
    # the tool saw its own attempt's span as the trace context to propagate
    last = attempts[-1].context
    assert outcome.result == f"00-{last.trace_id:032x}-{last.span_id:016x}-{int(last.trace_flags):02x}"


async def test_a_replayed_run_emits_no_step_spans(tmp_path: Path, spans: Any) -> None:
    exporter, telemetry = spans
    db = f"sqlite:///{tmp_path / 'p.db'}"
    async with Engine(db=db, tools=[flaky], telemetry=telemetry) as engine:
        done = await engine.run("finish await tools.flaky({})?")
        exporter.clear()
        await engine.resume(done.run_id)  # settled: nothing runs
        run = await engine.run("finish await tools.flaky({})?", run_id=done.run_id)
        assert run.status is RunStatus.FINISHED
    assert [s for s in exporter.get_finished_spans()
            if s.name.startswith(("lashflow.step", "lashflow.attempt"))] == []


async def test_a_run_started_inside_a_span_is_its_child(tmp_path: Path, spans: Any) -> None:
    exporter, telemetry = spans
    tracer = telemetry.tracing._tracer
    async with Engine(db=f"sqlite:///{tmp_path / 'c.db'}", tools=[flaky],
                      telemetry=telemetry) as engine:
        with tracer.start_as_current_span("request") as request:
            await engine.run("finish await tools.flaky({})?")
    drive = next(s for s in exporter.get_finished_spans() if s.name == "lashflow.run main")
    assert drive.parent.span_id == request.get_span_context().span_id
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("lashflow.create")]


def test_without_a_provider_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import asyncio, sys
        from lashflow import Engine, tool

        @tool
        async def echo(x: int) -> int:
            return x

        async def main():
            async with Engine(db={str(tmp_path / 'n.db')!r}, tools=[echo]) as engine:
                outcome = await engine.run("finish await tools.echo({{x: 2}})?")
                assert engine.telemetry is None, engine.telemetry
                print(outcome.result, [m for m in sys.modules if m.startswith('opentelemetry')])
        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 []"


def test_a_provider_installed_by_the_application_is_found(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from lashflow import Engine, tool

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        @tool
        async def echo(x: int) -> int:
            return x

        async def main():
            async with Engine(db={str(tmp_path / 'g.db')!r}, tools=[echo]) as engine:
                await engine.run("finish await tools.echo({{x: 2}})?")
            print(sorted(s.name for s in exporter.get_finished_spans()))
        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(["lashflow.attempt tools.echo", "lashflow.create main",
                                      "lashflow.run main", "lashflow.step tools.echo"])


def _timeless(value: Any) -> Any:
    """A journal document without what differs between two runs of one program: times,
    durations and ids."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()
                if not (k.endswith("_at") or k in ("at", "run_id", "seconds", "duration"))}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


async def test_a_run_records_the_same_journal_with_telemetry_on_and_off(
        tmp_path: Path, spans: Any) -> None:
    """Telemetry stays a branch on the per-step path (ADR 0041: a no-op object costs more
    than the branch); both paths must record the same run."""
    _, telemetry = spans
    journals = []
    for name, given in (("on", telemetry), ("off", None)):
        db = f"sqlite:///{tmp_path / (name + '.db')}"
        async with Engine(db=db, modules=[str(ROOT / "processes" / "fulfill.py")],
                          telemetry=given) as engine:
            parked = await engine.run(FULFILL, "fulfill", ORDER)
            assert parked.status is RunStatus.WAITING
            await engine.complete(parked.waiting[0].key, {"approved": True, "by": "ops"})
            done = await engine.get(parked.run_id)
            assert done.status is RunStatus.FINISHED, done
            events = [(e.seq, e.kind) for e in await engine.run_events(done.run_id)]
            journals.append((_timeless(await engine.export([done.run_id])), events))
    assert journals[0] == journals[1]
