"""The schedules routes of the HTTP API through httpx's ASGI transport: each route once,
its answer checked against its model in the OpenAPI document, the refusals a user can
cause, and the schedule metrics on ``/metrics``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest
from api_support import AUTH, T0, answer_each_route, api_client

from lashflow import Engine
from lashflow.http import schedules as models
from lashflow.testing import FakeClock

HERE = Path(__file__).resolve().parent


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient, FakeClock]]:
    processes = tmp_path / "processes"
    processes.mkdir()
    shutil.copy(HERE / "hold.lash", processes)
    clock = FakeClock(T0)
    async with Engine(db=f"sqlite:///{tmp_path / 'http.db'}", clock=clock,
                      telemetry=True) as engine, api_client(engine, processes) as client:
        yield engine, client, clock


async def test_every_schedule_route_answers_its_model(served: Any) -> None:
    engine, client, clock = served
    create = {"name": "nightly", "file": "hold.lash", "input": {"n": 4}, "cron": "30 2 * * *",
              "tz": "Europe/Berlin", "overlap": "allow"}
    calls = [
        ("POST", "/v1/schedules", "/v1/schedules", create),
        ("GET", "/v1/schedules", "/v1/schedules", None),
        ("GET", "/v1/schedules/{name}", "/v1/schedules/nightly", None),
        ("PATCH", "/v1/schedules/{name}", "/v1/schedules/nightly", {"every": "1h"}),
        ("POST", "/v1/schedules/{name}/pause", "/v1/schedules/nightly/pause", {"note": "x"}),
        ("POST", "/v1/schedules/{name}/resume", "/v1/schedules/nightly/resume", None),
        ("POST", "/v1/schedules/{name}/trigger", "/v1/schedules/nightly/trigger", None),
        ("POST", "/v1/schedules/{name}/backfill", "/v1/schedules/nightly/backfill",
         {"from": "2027-01-01T00:00:00Z", "to": "2027-01-01T05:00:00Z"}),
        ("DELETE", "/v1/schedules/{name}", "/v1/schedules/nightly", None),
    ]
    seen = await answer_each_route(client, "/v1/schedules", calls, models)
    made = seen["POST", "/v1/schedules"]
    assert made["describe"] == "cron 30 2 * * * (Europe/Berlin)"
    assert made["next_fires"][0] == "2027-01-16T02:30:00+01:00"
    assert seen["PATCH", "/v1/schedules/{name}"]["describe"] == "every 1h"
    assert seen["POST", "/v1/schedules/{name}/pause"]["paused"] is True
    assert seen["POST", "/v1/schedules/{name}/backfill"]["started"] == 5
    assert seen["POST", "/v1/schedules/{name}/trigger"]["run_id"].startswith("nightly@")
    assert (await engine.get_record(seen["POST", "/v1/schedules/{name}/trigger"]["run_id"])
            ).meta["schedule"] == "nightly"


async def test_refusals_and_metrics(served: Any) -> None:
    engine, client, clock = served
    assert (await client.get("/v1/schedules")).status_code == 401
    missing = await client.get("/v1/schedules/nope", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_schedule"
    bad = await client.post("/v1/schedules", headers=AUTH, json={
        "name": "b", "file": "hold.lash", "input": {"n": 1}, "cron": "99 * * * *"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "schedule_invalid"
    outside = await client.post("/v1/schedules", headers=AUTH, json={
        "name": "b", "file": "../x.lash", "every": "1m"})
    assert outside.status_code == 404
    made = {"name": "m", "file": "hold.lash", "input": {"n": 1}, "every": "1m",
            "overlap": "skip"}
    assert (await client.post("/v1/schedules", headers=AUTH, json=made)).status_code == 201
    again = await client.post("/v1/schedules", headers=AUTH, json=made)
    assert again.status_code == 409 and again.json()["error"]["code"] == "schedule_exists"
    await engine.schedules.scheduler.fire_due()
    clock.advance(3600)
    await engine.schedules.scheduler.fire_due()
    text = (await client.get("/metrics", headers=AUTH)).text
    assert 'lashflow_schedule_missed_ticks_total{schedule="m"} 58' in text
    assert 'lashflow_schedule_skipped_overlaps_total{schedule="m"} 2' in text
    assert 'lashflow_schedule_runs_started_total{schedule="m"} 1' in text
    assert "lashflow_schedule_fire_lag_seconds_count 1" in text
