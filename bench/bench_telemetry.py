"""What telemetry costs on the per-step path, printed as one table.

Each configuration runs in its own fresh subprocess on a fresh SQLite file (WAL,
synchronous=FULL): RUNS runs of 10 trivial tool steps, one after another, and prints
steps/s. Configurations:

- off: OpenTelemetry never imported (as without the ``otel`` extra);
- api, no provider: ``opentelemetry.trace`` imported but no provider installed (the extra
  installed, nothing configured): the engine finds nothing and reports nothing;
- sdk, no exporter: an SDK tracer and meter provider with no processor or reader: every
  span and record is made, then dropped;
- sdk, in-memory: spans exported to memory by a ``SimpleSpanProcessor`` (the cost of
  actually keeping them, without any network).

The configurations run in interleaved rounds (``--rounds``) and each keeps its best
round: the machine is shared, the best round is the least disturbed one. The ratio is
against "off" in the same run.

Usage: python bench/bench_telemetry.py [--runs 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = ("off", "api, no provider", "sdk, no exporter", "sdk, in-memory")


def _install(config: str) -> None:
    if config == "off":
        return
    from opentelemetry import metrics, trace  # noqa: F401 - imported is the configuration

    if config == "api, no provider":
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    if config == "sdk, in-memory":
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider())


async def _worker(config: str, runs: int) -> float:
    _install(config)
    from lashflow import Engine, tool

    @tool
    async def step(i: int) -> int:
        return i

    source = "total = 0\nfor i in range(10) { total = total + await tools.step({i: i})? }\nfinish total"
    with tempfile.TemporaryDirectory() as tmp:
        async with Engine(db=f"sqlite:///{Path(tmp) / 'bench.db'}", tools=[step]) as engine:
            assert (engine.telemetry is None) == (config in ("off", "api, no provider"))
            await engine.run(source)  # warm: compile, first use of everything
            began = time.perf_counter()
            for _ in range(runs):
                await engine.run(source)
            elapsed = time.perf_counter() - began
    imported = any(name.startswith("opentelemetry") for name in sys.modules)
    assert imported == (config != "off")
    return runs * 10 / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(asyncio.run(_worker(args.worker, args.runs)))
        return
    best = {config: 0.0 for config in CONFIGS}
    for _ in range(args.rounds):
        for config in CONFIGS:
            done = subprocess.run([sys.executable, __file__, "--worker", config,
                                   "--runs", str(args.runs)],
                                  capture_output=True, text=True, check=True)
            best[config] = max(best[config], float(done.stdout))
    print(f"telemetry cost: {args.runs} runs x 10 steps, sequential, SQLite WAL FULL, "
          f"best of {args.rounds} interleaved rounds")
    print(f"{'configuration':<20} {'steps/s':>9} {'vs off':>8}")
    for config in CONFIGS:
        print(f"{config:<20} {best[config]:>9,.0f} {best[config] / best['off']:>7.2f}x")


if __name__ == "__main__":
    main()
