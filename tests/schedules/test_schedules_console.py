"""The console's schedules page: through httpx (sign-in, CSRF, the forms) and in a real
headless Chromium against a real ``lashflow serve``, whose worker fires the schedule
(pause, run now, resume by clicking). Screenshots go to ``test-artifacts/console/``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from api_support import console_client, csrf_of
from serve_support import TOKEN, Server, console_page, serving

from lashflow import Engine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHOTS = ROOT / "test-artifacts" / "console"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def test_the_schedules_page_pauses_resumes_and_triggers(tmp_path: Path) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'c.db'}") as engine:
        await engine.schedules.create("nightly", str(HERE / "hold.lash"), input={"n": 1},
                                      cron="30 2 * * *", tz="Europe/Berlin")
        async with console_client(engine) as client:
            page = await client.get("/schedules")
            assert page.status_code == 200 and "cron 30 2 * * * (Europe/Berlin)" in page.text
            refused = await client.post("/schedules/nightly/pause", data={"note": "x"})
            assert refused.status_code == 403
            assert not (await engine.schedules.get("nightly")).paused
            done = await client.post("/schedules/nightly/pause",
                                     data={"note": "<b>db move</b>", "csrf": csrf_of(page.text)})
            assert done.status_code == 303
            page = await client.get(done.headers["location"])
            assert "nightly paused" in page.text and "&lt;b&gt;db move&lt;/b&gt;" in page.text
            assert (await engine.schedules.get("nightly")).paused
            await client.post("/schedules/nightly/resume", data={"csrf": csrf_of(page.text)})
            assert not (await engine.schedules.get("nightly")).paused
            ran = await client.post("/schedules/nightly/trigger",
                                    data={"csrf": csrf_of(page.text)})
            page = await client.get(ran.headers["location"])
            [run_id] = [r.run_id for r in await engine.schedules.runs("nightly")]
            assert f">{run_id}</a>" in page.text and run_id.endswith("-trigger")
            missing = await client.post("/schedules/nope/pause", data={"csrf": csrf_of(page.text)})
            assert missing.status_code == 400 and "unknown_schedule" in missing.text


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path, {"hold.lash": (HERE / "hold.lash").read_text()}) as running:
        yield running


def test_serve_fires_a_schedule_and_the_console_steers_it(served: Server) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        made = client.post("/v1/schedules", headers=AUTH, json={
            "name": "every-second", "file": "hold.lash", "input": {"n": 5}, "every": "1s",
            "overlap": "allow"})
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 60
        while client.get("/v1/schedules/every-second", headers=AUTH).json()["fired"] < 2:
            assert time.monotonic() < deadline, "serve's worker never fired the schedule"
            time.sleep(0.05)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with console_page(served.url, 700) as page:
        page.click("nav a[href='/schedules']")
        row = page.locator("tr[data-schedule='every-second']")
        assert "every 1s" in row.inner_text()
        row.locator("input[name='note']").fill("maintenance")
        row.locator("button.pause").click()
        page.wait_for_url("**/schedules?done=*")
        row = page.locator("tr[data-schedule='every-second']")
        assert "paused" in row.inner_text() and "maintenance" in row.inner_text()
        page.screenshot(path=str(SHOTS / "schedules.png"), full_page=True)
        row.locator("button.trigger").click()
        page.wait_for_url("**/schedules?done=*")
        link = page.locator("#done a")
        assert "-trigger" in link.inner_text()
        page.locator("tr[data-schedule='every-second'] button.resume").click()
        page.wait_for_url("**/schedules?done=*")
        assert "paused" not in page.locator("tr[data-schedule='every-second']").inner_text()
    assert served.stop() == 0
