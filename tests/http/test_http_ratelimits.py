"""The rate-limit routes of the HTTP API through httpx's ASGI transport: each route once,
its answer checked against its model in the OpenAPI document; the refusals, with the
codes ``lashflow ratelimit`` gives; a limit's state after calls took its slots."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest
from api_support import AUTH, T0, answer_each_route, api_client

from lashflow import Engine
from lashflow.http import ratelimits as models
from lashflow.testing import FakeClock


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient, FakeClock]]:
    clock = FakeClock(T0)
    async with Engine(db=f"sqlite:///{tmp_path / 'http.db'}", clock=clock) as engine, \
            api_client(engine, drive=False) as client:
        yield engine, client, clock


async def test_every_rate_limit_route_answers_its_model(served: Any) -> None:
    engine, client, _ = served
    calls = [
        ("PUT", "/v1/ratelimits/{name}", "/v1/ratelimits/payments", {"rate": "10/s"}),
        ("GET", "/v1/ratelimits", "/v1/ratelimits", None),
        ("GET", "/v1/ratelimits/{name}", "/v1/ratelimits/payments", None),
        ("DELETE", "/v1/ratelimits/{name}", "/v1/ratelimits/payments", None),
    ]
    seen = await answer_each_route(client, "/v1/ratelimits", calls, models)
    assert seen["PUT", "/v1/ratelimits/{name}"] == {
        "name": "payments", "rate": "10/s", "tool": None, "calls": 0, "delayed": 0,
        "limited_until": None}
    assert seen["GET", "/v1/ratelimits"] == {
        "rate_limits": [seen["PUT", "/v1/ratelimits/{name}"]], "global_slots_held": {}}
    assert seen["DELETE", "/v1/ratelimits/{name}"] == {"name": "payments", "deleted": True}
    assert await engine.rate_limits.list() == []


async def test_a_limit_changed_and_its_state_after_calls(served: Any) -> None:
    engine, client, _ = served
    assert (await client.put("/v1/ratelimits/payments", headers=AUTH,
                             json={"rate": "2/s"})).status_code == 200
    assert await engine.store.take_rate("payments", None, 3, T0) is not None
    assert await engine.store.take_rate("tool:shop.ship", (5.0, 1.0), 1, T0) is not None
    shown = (await client.get("/v1/ratelimits/payments", headers=AUTH)).json()
    # slots at T0, T0 + 0.5 and T0 + 1: the next begins 1.5 s after T0
    assert (shown["calls"], shown["limited_until"]) == (3, T0 + 1.5)
    changed = await client.put("/v1/ratelimits/payments", headers=AUTH, json={"rate": "600/m"})
    assert changed.json()["rate"] == "600/m" and changed.json()["calls"] == 3
    listed = (await client.get("/v1/ratelimits", headers=AUTH)).json()["rate_limits"]
    assert [(row["name"], row["tool"]) for row in listed] == [("payments", None),
                                                            ("tool:shop.ship", "shop.ship")]


async def test_refusals_have_the_cli_codes(served: Any) -> None:
    engine, client, _ = served
    assert (await client.get("/v1/ratelimits")).status_code == 401

    async def refused(method: str, url: str, body: Any = None) -> tuple[int, str]:
        answer = await client.request(method, url, headers=AUTH, json=body)
        return answer.status_code, answer.json()["error"]["code"]

    assert await refused("GET", "/v1/ratelimits/nope") == (404, "unknown_rate_limit")
    assert await refused("DELETE", "/v1/ratelimits/nope") == (404, "unknown_rate_limit")
    assert await refused("PUT", "/v1/ratelimits/p", {"rate": "fast"}) == (400, "rate_invalid")
    assert await refused("PUT", "/v1/ratelimits/p", {"rate": "0/s"}) == (400, "rate_invalid")
    assert await refused("PUT", "/v1/ratelimits/-p", {"rate": "1/s"}) == (400, "rate_invalid")
    assert await refused("PUT", "/v1/ratelimits/p", {}) == (400, "input_invalid")
    assert await refused("PUT", "/v1/ratelimits/p", {"rate": "1/s", "x": 1}) == \
        (400, "input_invalid")
    await engine.store.take_rate("tool:shop.ship", (5.0, 1.0), 1, T0)
    assert await refused("PUT", "/v1/ratelimits/tool:shop.ship", {"rate": "1/s"}) == \
        (400, "rate_invalid")
    assert await refused("DELETE", "/v1/ratelimits/tool:shop.ship") == (400, "rate_invalid")
    assert [info.name for info in await engine.rate_limits.list()] == ["tool:shop.ship"]
