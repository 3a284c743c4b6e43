"""The console's queues page through httpx: sign-in, the list with limits and depth,
the pause and resume forms (CSRF-checked), and the rate limits of tools with their
state; and in a real headless Chromium against a real ``lashflow serve``, a queue and a
rate limit made through its HTTP API, shown, and the queue paused by clicking.
Screenshots go to ``test-artifacts/console/``."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest
from api_support import console_client, csrf_of
from serve_support import TOKEN, Server, console_page, serving

from lashflow import Engine

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "console"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def test_the_queues_page_lists_pauses_and_resumes(tmp_path: Path) -> None:
    source = tmp_path / "job.lash"
    source.write_text("process job(n: int) {\n  finish n\n}\n")
    async with Engine(db=f"sqlite:///{tmp_path / 'c.db'}") as engine:
        await engine.queues.create("orders", concurrency_per_key=2, rate="20/s", fair=True)
        for n in range(3):
            await engine.create(source, input={"n": n}, queue="orders", key="a", priority=1)
        async with console_client(engine) as client:
            page = await client.get("/queues")
            assert page.status_code == 200
            assert "2 per key · 20/s" in page.text and "p1: 3" in page.text
            assert (await client.post("/queues/orders/pause", data={})).status_code == 403
            done = await client.post("/queues/orders/pause", data={"csrf": csrf_of(page.text)})
            assert done.status_code == 303
            page = await client.get(done.headers["location"])
            assert "orders paused" in page.text and (await engine.queues.get("orders")).paused
            await client.post("/queues/orders/resume", data={"csrf": csrf_of(page.text)})
            assert not (await engine.queues.get("orders")).paused


async def test_the_queues_page_shows_rate_limits_and_their_state(tmp_path: Path) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'c.db'}") as engine:
        async with console_client(engine) as client:
            assert "No rate limits yet" in (await client.get("/queues")).text
            await engine.rate_limits.set("payments", "2/m")
            now = engine.clock.now()
            # three slots of 2 a minute: the third is booked 60 s ahead
            assert await engine.store.take_rate("payments", None, 3, now) is not None
            assert await engine.store.take_rate("tool:shop.ship", (10.0, 1.0), 1, now)
            page = (await client.get("/queues")).text
        row = page[page.index('data-rate-limit="payments"'):]
        row = row[:row.index("</tr>")]
        assert ">2/m<" in row and ">3<" in row and "rate limited until" in row
        own = page[page.index('data-rate-limit="tool:shop.ship"'):]
        assert "own rate" in own[:own.index("</tr>")]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path, {}) as running:
        yield running


def test_serve_shows_queues_and_rate_limits_made_through_its_api(served: Server) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        made = client.post("/v1/queues", headers=AUTH, json={"name": "orders",
                                                              "concurrency_per_key": 2})
        assert made.status_code == 201, made.text
        limit = client.put("/v1/ratelimits/payments", headers=AUTH, json={"rate": "10/s"})
        assert limit.status_code == 200, limit.text
        assert client.get("/v1/ratelimits", headers=AUTH).json()["rate_limits"] == [
            {"name": "payments", "rate": "10/s", "tool": None, "calls": 0, "delayed": 0,
             "limited_until": None}]
    SHOTS.mkdir(parents=True, exist_ok=True)
    with console_page(served.url, 700) as page:
        page.click("nav a[href='/queues']")
        limit_row = page.locator("tr[data-rate-limit='payments']")
        assert "10/s" in limit_row.inner_text()
        assert "a call may start at once" in limit_row.inner_text()
        page.locator("tr[data-queue='orders'] button.pause").click()
        page.wait_for_url("**/queues?done=*")
        assert "paused" in page.locator("tr[data-queue='orders']").inner_text()
        page.screenshot(path=str(SHOTS / "queues.png"), full_page=True)
    with httpx.Client(base_url=served.url, timeout=30) as client:
        assert client.get("/v1/queues/orders", headers=AUTH).json()["paused"] is True
