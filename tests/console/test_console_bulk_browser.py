"""The console's bulk action in a real headless Chromium against a real `lashflow serve`:
the runs page selects the waiting runs by filter, shows how many the action applies to
before anything changes, and pauses all of them once confirmed; the job page shows the
progress and the run page who paused it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from serve_support import TOKEN, Server, console_page, serving

pytestmark = pytest.mark.subprocess

AUTH = {"Authorization": f"Bearer {TOKEN}"}
NAP = 'process nap() {\n  sleep for "1h"\n  finish 1\n}\n'
QUICK = "process quick() {\n  finish 1\n}\n"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path, {"nap.lash": NAP, "quick.lash": QUICK}) as running:
        yield running


def _statuses(client: httpx.Client) -> dict[str, str]:
    runs = client.get("/v1/runs?limit=100", headers=AUTH).json()["runs"]
    return {run["run_id"]: run["status"] for run in runs}


def test_pause_every_waiting_run_from_the_runs_page(served: Server) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        for run_id, file in (("nap-1", "nap.lash"), ("nap-2", "nap.lash"),
                             ("nap-3", "nap.lash"), ("quick-1", "quick.lash")):
            started = client.post("/v1/runs", headers=AUTH,
                                  json={"file": file, "input": {}, "run_id": run_id})
            assert started.status_code == 202, started.text
        deadline = time.monotonic() + 60  # a hang guard, not a speed check
        while _statuses(client) != {"nap-1": "waiting", "nap-2": "waiting",
                                    "nap-3": "waiting", "quick-1": "finished"}:
            assert time.monotonic() < deadline, _statuses(client)
            time.sleep(0.05)
        with console_page(served.url) as page:
            page.goto(served.url + "/runs?status=waiting")
            assert page.input_value("#bulk-where") == "status=waiting"
            page.select_option("#bulk-action", "pause")
            page.fill("#bulk-form input[name=reason]", "vendor outage")
            page.click("#bulk-count")
            page.wait_for_url("**/runs/bulk/preview")
            assert page.inner_text("#bulk-acted") == "3"
            assert "3 run(s) match" in page.inner_text("#bulk-count")
            assert set(_statuses(client).values()) == {"waiting", "finished"}  # not yet
            page.click("#bulk-confirm")
            page.wait_for_url("**/jobs/job_*")
            page.wait_for_selector("#job[data-state='done']", timeout=60_000)
            assert page.inner_text("#job-acted") == "3"
            assert _statuses(client) == {"nap-1": "paused", "nap-2": "paused",
                                         "nap-3": "paused", "quick-1": "finished"}
            page.goto(served.url + "/runs/nap-2")
            shown = page.inner_text("#run-paused")
            assert "paused by console (" in shown and "vendor outage" in shown
            page.click("#unpause")
            page.wait_for_url("**/runs/nap-2")
        deadline = time.monotonic() + 60
        while _statuses(client)["nap-2"] != "waiting":  # unpaused, driven, parked again
            assert time.monotonic() < deadline, _statuses(client)
            time.sleep(0.05)
    assert served.stop() == 0
