"""The queues routes of the HTTP API through httpx's ASGI transport: each route once, its
answer checked against its model in the OpenAPI document; a run started into a queue,
the run list filtered by queue and key, the refusals, and the queue gauges of
``/metrics``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest
from api_support import AUTH, T0, answer_each_route, api_client

from lashflow import Engine
from lashflow.http import queues as models
from lashflow.testing import FakeClock


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient, FakeClock]]:
    processes = tmp_path / "processes"
    processes.mkdir()
    (processes / "job.lash").write_text("process job(n: int) {\n  finish n\n}\n")
    clock = FakeClock(T0)
    async with Engine(db=f"sqlite:///{tmp_path / 'http.db'}", clock=clock) as engine, \
            api_client(engine, processes, drive=False) as client:
        yield engine, client, clock


async def test_every_queue_route_answers_its_model(served: Any) -> None:
    engine, client, _ = served
    calls = [
        ("POST", "/v1/queues", "/v1/queues", {"name": "orders", "concurrency_per_key": 2,
                                               "rate": "20/s", "fair": True,
                                               "weights": {"gold": 3}}),
        ("GET", "/v1/queues", "/v1/queues", None),
        ("GET", "/v1/queues/{name}", "/v1/queues/orders", None),
        ("PATCH", "/v1/queues/{name}", "/v1/queues/orders", {"rate": None, "concurrency": 9}),
        ("POST", "/v1/queues/{name}/pause", "/v1/queues/orders/pause", None),
        ("POST", "/v1/queues/{name}/resume", "/v1/queues/orders/resume", None),
        ("DELETE", "/v1/queues/{name}", "/v1/queues/orders", None),
    ]
    seen = await answer_each_route(client, "/v1/queues", calls, models)
    made = seen["POST", "/v1/queues"]
    assert (made["concurrency_per_key"], made["rate"], made["weights"]) == (2, "20/s",
                                                                          {"gold": 3.0})
    changed = seen["PATCH", "/v1/queues/{name}"]
    assert (changed["rate"], changed["concurrency"], changed["concurrency_per_key"]) == \
        (None, 9, 2)
    assert seen["POST", "/v1/queues/{name}/pause"]["paused"] is True
    assert seen["POST", "/v1/queues/{name}/resume"]["paused"] is False
    assert await engine.queues.list() == []


async def test_runs_enter_a_queue_and_list_by_queue_and_key(served: Any) -> None:
    engine, client, clock = served
    made = await client.post("/v1/queues", headers=AUTH, json={"name": "orders",
                                                                "concurrency": 1})
    assert made.status_code == 201
    started = []
    for n, key in enumerate(["a", "b", "a"]):
        answer = await client.post("/v1/runs", headers=AUTH, json={
            "file": "job.lash", "input": {"n": n}, "queue": "orders", "key": key,
            "priority": 1 + n})
        assert answer.status_code == 202 and answer.json()["status"] == "queued", answer.text
        started.append(answer.json()["run_id"])
    again = await client.post("/v1/runs", headers=AUTH, json={
        "file": "job.lash", "input": {"n": 7}, "queue": "orders", "dedup_id": "d1"})
    same = await client.post("/v1/runs", headers=AUTH, json={
        "file": "job.lash", "input": {"n": 8}, "queue": "orders", "dedup_id": "d1"})
    assert again.json()["run_id"] == same.json()["run_id"]
    listed = (await client.get("/v1/runs?queue=orders&key=a", headers=AUTH)).json()
    assert sorted(run["run_id"] for run in listed["runs"]) == sorted([started[0], started[2]])
    everyone = (await client.get("/v1/runs?queue=orders", headers=AUTH)).json()
    assert len(everyone["runs"]) == 4
    shown = (await client.get("/v1/queues/orders", headers=AUTH)).json()
    assert (shown["waiting"], shown["waiting_by_key"]) == (4, {"a": 2, "b": 1, "": 1})
    assert shown["waiting_by_priority"] == {"1": 1, "2": 1, "3": 2}
    clock.advance(30)
    text = (await client.get("/metrics", headers=AUTH)).text
    assert 'lashflow_queue_waiting{queue="orders"} 4' in text
    assert 'lashflow_queue_oldest_wait_seconds{queue="orders"} 30' in text
    assert 'lashflow_queue_paused{queue="orders"} 0' in text


async def test_refusals(served: Any) -> None:
    _, client, _ = served
    missing = await client.get("/v1/queues/nope", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_queue"
    assert (await client.post("/v1/queues", headers=AUTH, json={"name": "q"})).status_code == 201
    again = await client.post("/v1/queues", headers=AUTH, json={"name": "q"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "queue_exists"
    bad = await client.post("/v1/queues", headers=AUTH, json={"name": "r", "rate": "fast"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "queue_invalid"
    into_nothing = await client.post("/v1/runs", headers=AUTH, json={
        "file": "job.lash", "input": {"n": 1}, "queue": "nope"})
    assert into_nothing.status_code == 404
    low = await client.post("/v1/runs", headers=AUTH, json={
        "file": "job.lash", "input": {"n": 1}, "queue": "q", "priority": 0})
    assert low.status_code == 400 and low.json()["error"]["code"] == "queue_invalid"
