"""The console in a real headless Chromium (driven by Playwright) against a real
`lashflow serve` process: sign in, approve the fulfill example from the inbox, see it
finished with its three steps; a hostile tool output stays text; a form post without its
CSRF token is refused. Screenshots of each page go to ``test-artifacts/console/``.

The browser is Debian's ``chromium`` from PATH (``apt-get install chromium``), else
Playwright's own (``playwright install chromium``). With ``LASHFLOW_REQUIRE_BROWSER=1``
(CI) a missing browser fails; otherwise the test skips and says what to install."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from playwright import sync_api
from serve_support import TOKEN, Server, launch_browser, serving

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "console"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HOSTILE_LASH = 'process show(x: int) {\n  out = await tools.hostile({x: x})?\n  finish out\n}\n'
HOSTILE_PY = '''
from lashflow import tool

@tool
async def hostile(x: int) -> str:
    return "<script>alert(1)</script><img src=x onerror=alert(2)>"
'''


GATE_LASH = ('process gate() {\n  a = await tools.stamp({ n: 1 })?\n'
             '  go = wait_signal("go")\n  b = await tools.stamp({ n: 2 })?\n  finish go\n}\n')
GATE_PY = """
from lashflow import tool

@tool
async def stamp(n: int) -> int:
    return n
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    examples = {name: (ROOT / "processes" / name).read_text()
                for name in ("fanout.lash", "fanout.py", "retry.lash", "retry.py")}
    with serving(tmp_path, {"hostile.lash": HOSTILE_LASH, "hostile.py": HOSTILE_PY,
                            "gate.lash": GATE_LASH, "gate.py": GATE_PY,
                            **examples}) as running:
        yield running


def _start(server: Server, file: str, data: Any, run_id: str, status: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        started = client.post("/v1/runs", headers=AUTH,
                              json={"file": file, "input": data, "run_id": run_id})
        assert started.status_code == 202, started.text
        deadline = time.monotonic() + 30
        while client.get(f"/v1/runs/{run_id}", headers=AUTH).json()["status"] != status:
            assert time.monotonic() < deadline, f"{run_id} never became {status}"
            time.sleep(0.05)


def test_approve_in_the_inbox_and_see_the_run_finish(served: Server) -> None:
    order = json.loads((ROOT / "processes" / "fulfill.input.json").read_text())
    _start(served, "fulfill.lash", order, "order-1", "waiting")
    _start(served, "hostile.lash", {"x": 1}, "hostile-1", "finished")
    fan = json.loads((ROOT / "processes" / "fanout.input.json").read_text())
    _start(served, "fanout.lash", fan, "fan-out-run-with-a-long-identifier-1", "finished")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

        page.goto(served.url + "/")
        assert page.url.endswith("/login")
        page.screenshot(path=str(SHOTS / "login.png"))
        page.fill("#token", "wrong")
        page.click("#sign-in")
        assert "not the management token" in page.inner_text("#login-error")
        page.fill("#token", TOKEN)
        page.click("#sign-in")
        page.wait_for_url("**/runs")
        assert page.locator("#run-rows tr").count() == 3
        page.screenshot(path=str(SHOTS / "runs.png"), full_page=True)

        page.goto(served.url + "/inbox")
        ask = page.locator("section.ask[data-run='order-1']")
        assert "tools.request_approval" in ask.inner_text()
        assert "ord-1001" in ask.locator("pre.args").inner_text()
        page.screenshot(path=str(SHOTS / "inbox.png"), full_page=True)
        ask.locator("button.approve").click()
        page.wait_for_url("**/inbox?resolved=order-1")
        assert page.locator("#inbox-empty").is_visible()

        page.goto(served.url + "/runs/order-1")
        page.wait_for_function(
            "document.getElementById('run-status').textContent === 'finished'", timeout=30_000)
        steps = page.locator("#timeline li.step")
        assert steps.count() == 3
        assert [steps.nth(i).locator("b.tool").inner_text() for i in range(3)] == [
            "tools.quote", "tools.request_approval", "tools.charge"]
        assert json.loads(page.inner_text("#run-result"))["charged"] is True
        assert page.locator("#graph g.node[data-state='done']").count() == 3
        page.screenshot(path=str(SHOTS / "run.png"), full_page=True)

        page.goto(served.url + "/runs/hostile-1")
        result = page.inner_text("#run-result")
        assert "<script>alert(1)</script><img src=x onerror=alert(2)>" in result
        assert page.locator("main script, main img").count() == 0
        page.screenshot(path=str(SHOTS / "hostile.png"), full_page=True)

        _fits_a_phone(page, served.url)

        forged = page.request.post(served.url + "/runs/order-1/retry", form={"x": "1"})
        assert forged.status == 403
        assert "csrf_rejected" in forged.text()
        assert dialogs == []
        # the one error the browser reports is the wrong token's 401, on purpose
        assert [e for e in errors if "status of 401" not in e] == []
        browser.close()
    assert served.stop() == 0


def _until(page: Any, expression: str) -> None:
    """Until ``expression`` is true in the page (evaluated from here: the console's
    Content-Security-Policy refuses the string evaluation ``wait_for_function`` polls
    with)."""
    deadline = time.monotonic() + 60
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"never true: {expression}"
        page.wait_for_timeout(50)


def _sign_in(page: Any, url: str) -> None:
    page.goto(url + "/login")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    page.wait_for_url("**/runs")


def test_the_timeline_and_live_updates_from_the_run_events(served: Server) -> None:
    """The run page draws steps and attempts over time (retries as several bars, a
    fan-out's calls under their batch in source order, waits), and a run parked on a
    signal moves on the open page when the signal arrives: pushed by the run's event
    stream, the page is not reloaded."""
    fan = json.loads((ROOT / "processes" / "fanout.input.json").read_text())
    _start(served, "fanout.lash", fan, "fan-1", "finished")
    rates = json.loads((ROOT / "processes" / "retry.input.json").read_text())
    _start(served, "retry.lash", rates, "rates-1", "finished")
    _start(served, "gate.lash", {}, "gate-1", "waiting")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = launch_browser(playwright)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        _sign_in(page, served.url)

        page.goto(served.url + "/runs/fan-1")
        labels = page.locator("#gantt g.gantt-row text").all_text_contents()
        assert labels[:4] == ["fan-out · 3 calls", "[0] tools.stock", "[1] tools.stock",
                              "[2] tools.stock"], labels
        assert page.locator("#gantt rect.bar-err").count() == 1  # east is offline
        page.screenshot(path=str(SHOTS / "timeline-fanout.png"), full_page=True)

        page.goto(served.url + "/runs/rates-1")
        rows = page.locator("#gantt g.gantt-row")
        bars = page.evaluate("""() => [...document.querySelectorAll('#gantt rect.bar')]
            .map(bar => bar.getAttribute('class'))""")
        assert rows.count() == 2 and bars.count("bar bar-failed") + bars.count(
            "bar bar-err") >= 2, bars  # the flaky call's failed attempts, then its answer
        page.screenshot(path=str(SHOTS / "timeline-retries.png"), full_page=True)

        page.goto(served.url + "/runs/gate-1")
        assert page.inner_text("#run-status") == "waiting"
        assert page.locator("#gantt rect.bar-wait").count() == 0  # not journaled yet
        page.evaluate("window.notReloaded = true")
        sent = httpx.post(f"{served.url}/v1/runs/gate-1/signals/go", headers=AUTH,
                          json={"payload": "yes"}, timeout=30)
        assert sent.status_code == 200, sent.text
        _until(page, "document.getElementById('run-status').textContent === 'finished'")
        assert page.evaluate("window.notReloaded === true")  # updated in place
        assert int(page.evaluate("document.body.dataset.refreshed")) >= 1
        assert page.locator("#gantt g.gantt-row").count() == 3
        assert page.locator("#gantt rect.bar-wait").count() == 1  # the signal's wait
        page.screenshot(path=str(SHOTS / "timeline-live.png"), full_page=True)

        # the runs list hears of a new run without a reload too
        page.goto(served.url + "/runs")
        before = page.locator("#run-rows tr").count()
        page.evaluate("window.notReloaded = true")
        _start(served, "gate.lash", {}, "gate-2", "waiting")
        _until(page, f"document.querySelectorAll('#run-rows tr').length > {before}")
        assert page.evaluate("window.notReloaded === true")
        assert errors == []
        browser.close()
    assert served.stop() == 0


def _fits_a_phone(page: Any, url: str) -> None:
    """On a 390 x 844 phone screen no page is wider than the screen and a fan-out's graph
    is drawn whole inside its card. Found here: the runs table made the page 617 px wide
    and a three-column graph was cut at the card's edge."""
    page.set_viewport_size({"width": 390, "height": 844})
    for name, path in (("runs-phone", "/runs"), ("run-phone", "/runs/order-1"),
                       ("fanout-phone", "/runs/fan-out-run-with-a-long-identifier-1"),
                       ("inbox-phone", "/inbox")):
        page.goto(url + path)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, name
        if name == "fanout-phone":
            graph = page.evaluate(_GRAPH_INSIDE_ITS_CARD)
            assert graph["nodes"] >= 6 and graph["inside"], graph
    page.set_viewport_size({"width": 1200, "height": 900})


_GRAPH_INSIDE_ITS_CARD = """() => {
    const box = document.getElementById('graph').getBoundingClientRect();
    const nodes = [...document.querySelectorAll('#graph g.node rect')]
        .map(rect => rect.getBoundingClientRect());
    return {nodes: nodes.length,
            inside: nodes.every(n => n.left >= box.left - 0.5 && n.right <= box.right + 0.5)};
}"""
