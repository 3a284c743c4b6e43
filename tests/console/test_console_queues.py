"""The console's queues page through httpx: sign-in, the list with limits and depth,
the pause and resume forms (CSRF-checked), a name that needs escaping."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from lashflow import Engine
from lashflow.http import ServeConfig, create_app

TOKEN = "s3cret-token-0123456789"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


async def test_the_queues_page_lists_pauses_and_resumes(tmp_path: Path) -> None:
    source = tmp_path / "job.lash"
    source.write_text("process job(n: int) {\n  finish n\n}\n")
    async with Engine(db=f"sqlite:///{tmp_path / 'c.db'}") as engine:
        await engine.queues.create("orders", concurrency_per_key=2, rate="20/s", fair=True)
        for n in range(3):
            await engine.create(source, input={"n": n}, queue="orders", key="a", priority=1)
        app = create_app(engine, ServeConfig(TOKEN))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://console") as client:
            assert (await client.get("/queues")).headers["location"] == "/login"
            login = await client.get("/login")
            await client.post("/login", data={"token": TOKEN, "csrf": csrf_of(login.text)})
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
