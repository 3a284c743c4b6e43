"""The console through httpx's ASGI transport: sign-in, CSRF, escaping, the security
headers, the inbox answering a key, --inbox-only. (The real browser is in
test_console_browser.py.)"""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.http import ServeConfig, create_app

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "console-token-0123456789"
HOSTILE = "<script>alert(1)</script>"


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(hours=1)))


@tool
async def hostile(x: int) -> str:
    return HOSTILE


async def client_for(engine: Engine, console: str = "full") -> httpx.AsyncClient:
    app = create_app(engine, ServeConfig(TOKEN, console=console))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with Engine(db=f"sqlite:///{tmp_path / 'c.db'}", tools=[approve, hostile]) as engine:
        yield engine


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


async def sign_in(client: httpx.AsyncClient) -> None:
    page = await client.get("/login")
    response = await client.post("/login", data={"token": TOKEN, "csrf": csrf_of(page.text)})
    assert response.status_code == 303, response.text


async def test_pages_need_a_session_and_the_right_token(engine: Engine) -> None:
    async with await client_for(engine) as client:
        assert (await client.get("/runs")).headers["location"] == "/login"
        page = await client.get("/login")
        wrong = await client.post("/login", data={"token": "nope", "csrf": csrf_of(page.text)})
        assert wrong.status_code == 401 and "not the management token" in wrong.text
        forged = await client.post("/login", data={"token": TOKEN, "csrf": "x" * 40})
        assert forged.status_code == 403
        await sign_in(client)
        cookie = client.cookies.jar
        session = next(c for c in cookie if c.name == "lashflow_console")
        assert session.has_nonstandard_attr("HttpOnly")
        runs = await client.get("/runs")
        assert runs.status_code == 200
        assert "default-src 'none'" in runs.headers["content-security-policy"]
        assert "script-src 'self'" in runs.headers["content-security-policy"]


async def test_a_form_without_its_csrf_token_is_refused(engine: Engine) -> None:
    parked = await engine.run("finish await tools.approve({})")
    async with await client_for(engine) as client:
        await sign_in(client)
        refused = await client.post(f"/runs/{parked.run_id}/cancel", data={"reason": "x"})
        assert refused.status_code == 403 and "csrf_rejected" in refused.text
        assert (await engine.get(parked.run_id)).status is RunStatus.WAITING
        page = await client.get(f"/runs/{parked.run_id}")
        done = await client.post(f"/runs/{parked.run_id}/cancel",
                                 data={"reason": "x", "csrf": csrf_of(page.text)})
        assert done.status_code == 303
        assert (await engine.get(parked.run_id)).status is RunStatus.CANCELLED


async def test_values_from_runs_are_text(engine: Engine) -> None:
    run = await engine.run(f'finish {{ out: await tools.hostile({{x: 1}})?, note: "{HOSTILE}" }}')
    async with await client_for(engine) as client:
        await sign_in(client)
        page = (await client.get(f"/runs/{run.run_id}")).text
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


async def test_the_inbox_answers_a_key(engine: Engine) -> None:
    parked = await engine.run("finish await tools.approve({ amount: 12 })")
    async with await client_for(engine, console="inbox") as client:
        await sign_in(client)
        assert (await client.get("/runs")).status_code == 404  # inbox only
        assert (await client.get("/v1/runs", headers={
            "Authorization": f"Bearer {TOKEN}"})).status_code == 404
        inbox = await client.get("/inbox")
        assert "tools.approve" in inbox.text and '"amount": 12' in html.unescape(inbox.text)
        key = re.search(r'name="key" value="([^"]+)"', inbox.text).group(1)
        answered = await client.post("/inbox/resolve", data={
            "key": key, "decision": "approve", "csrf": csrf_of(inbox.text)})
        assert answered.status_code == 303
    if engine.driver.is_driving(parked.run_id):
        await engine.driver.join(parked.run_id)
    outcome = await engine.get(parked.run_id)
    assert outcome.status is RunStatus.FINISHED
    assert outcome.result == {"ok": True, "value": {"approved": True}}


async def test_the_run_page_shows_the_version_and_verifies_against_the_latest(
        engine: Engine) -> None:
    flow = "process gate() {\n  d = wait_signal(\"go\")\n  finish d\n}\n"
    await engine.deploy(flow)
    run = await engine.run(None, "gate")
    await engine.deploy(flow.replace("finish d", "finish [d, 2]"))
    async with await client_for(engine) as client:
        await sign_in(client)
        page = (await client.get(f"/runs/{run.run_id}")).text
        assert "<b>v1</b>" in page and "verify against the latest version" in page
        assert "gate v1" in (await client.get("/runs")).text
        answer = await client.get(f"/runs/{run.run_id}/verify")
        assert answer.status_code == 200
        assert answer.text.startswith("compatible against version 2 of gate")
        api = await client.get(f"/v1/runs/{run.run_id}",
                               headers={"authorization": f"Bearer {TOKEN}"})
        assert api.status_code == 200 and api.json()["version"] == 1


def test_graph_labels_wrap_and_keep_their_whole_text_in_a_tooltip() -> None:
    """Found: labels were cut to 30 characters with no way to read the rest."""
    from lashflow.http.console.graph_svg import graph_svg
    from lashflow.lang.graph import build_graph

    source = ('process p(x: int) {\n  if x > 1 {\n    fail { reason: "a reason long enough to '
              'be cut in any box of the graph", x: x }\n  }\n  finish x\n}\n')
    graph = build_graph(source)
    [fail] = [n for n in graph.nodes.values() if n.kind == "fail"]
    drawn = graph_svg(graph, {fail.sites[0]: ["failed"]})
    assert html.escape('to be cut in any box of the graph", x: x }') in drawn  # the title
    assert drawn.count("<tspan") >= 3  # a long label takes two lines
    assert 'data-kind="fail" data-state="failed"' in drawn and 'stroke-width="3.5"' in drawn
