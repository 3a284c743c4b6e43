"""What an attacker found, through the ASGI app and httpx: answers without no-store and
nosniff, a sign-out that only dropped the browser's cookie (a copy kept working for
12 h), ``--token a`` accepted, wrong tokens tried at full speed, and a genuinely signed
key of an unknown run refused by a different path (one more database read) than a
forged one."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx
import pytest

from lashflow import Engine, PendingCompletion, ToolCall, ToolResult, tool
from lashflow.errors import UsageError
from lashflow.http import ServeConfig, create_app
from lashflow.testing import FakeClock

TOKEN = "guards-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer not-the-token-at-all"}


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(hours=1)))


Client = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Engine, Client, FakeClock]]:
    """The engine, a maker of clients (each from its own address), the clock."""
    clock = FakeClock()
    async with Engine(db=f"sqlite:///{tmp_path / 'g.db'}", tools=[approve],
                      clock=clock) as engine:
        app = create_app(engine, ServeConfig(TOKEN, tmp_path))

        def client(address: str = "10.0.0.1") -> httpx.AsyncClient:
            transport = httpx.ASGITransport(app=app, client=(address, 40000))
            return httpx.AsyncClient(transport=transport, base_url="http://lashflow")
        yield engine, client, clock


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


async def _sign_in(http: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    page = await http.get("/login")
    return await http.post("/login", data={"token": token, "csrf": _csrf(page.text)})


async def test_every_answer_is_no_store_and_nosniff(served: Any) -> None:
    engine, client, _ = served
    parked = await engine.run('r = await tools.approve({})\nfinish r\n', run_id="p")
    key = parked.waiting[0].key
    async with client() as http:
        answers = [await http.get(path, headers=AUTH) for path in (
            "/v1/runs", "/v1/runs/p", "/v1/runs/p/steps", "/v1/waiting", "/metrics",
            "/healthz", "/openapi.json", "/v1/runs/nope", "/nowhere")]
        answers += [await http.get(f"/v1/completions/{key}"), await http.get("/v1/runs"),
                    await http.post("/v1/completions/lfk_forged", json={"result": 1}),
                    await http.post(f"/v1/completions/{key}", json={"result": 1}),
                    await http.get("/login"), await http.get("/runs")]
        assert (await _sign_in(http)).status_code == 303
        answers += [await http.get("/runs"), await http.get("/runs/p"),
                    await http.get("/inbox/state")]
        for answer in answers:
            assert answer.headers.get("cache-control") == "no-store", answer.request.url
            assert answer.headers.get("x-content-type-options") == "nosniff", answer.request.url
        assert {a.status_code for a in answers} >= {200, 303, 401, 404}
        style = await http.get("/static/console.css")  # no data in it: it may be cached
        assert style.headers["x-content-type-options"] == "nosniff"
        assert "cache-control" not in style.headers


async def test_sign_out_ends_the_session_on_the_server(served: Any, tmp_path: Path) -> None:
    engine, client, _ = served
    async with client() as browser, client("10.0.0.2") as thief:
        assert (await _sign_in(browser)).status_code == 303
        copied = browser.cookies["lashflow_console"]
        thief.cookies.set("lashflow_console", copied)
        assert (await thief.get("/runs")).status_code == 200  # a copy works while signed in
        page = await browser.get("/runs")
        out = await browser.post("/logout", data={"csrf": _csrf(page.text)})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        stolen = await thief.get("/runs")
        assert stolen.status_code == 303 and stolen.headers["location"] == "/login"
        refused = await thief.post("/runs/p/cancel", data={"csrf": "x"})
        assert refused.status_code == 401
        assert (await _sign_in(browser)).status_code == 303  # signing in again works
        assert (await browser.get("/runs")).status_code == 200
    # a server started anew on the same database still refuses the old cookie
    async with Engine(db=f"sqlite:///{tmp_path / 'g.db'}") as again:
        app = create_app(again, ServeConfig(TOKEN))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://lashflow") as later:
            later.cookies.set("lashflow_console", copied)
            assert (await later.get("/runs")).status_code == 303


@pytest.mark.parametrize("token", ["a", "short-token", "aaaaaaaaaaaaaaaaaaaaaaaa",
                                   "abababababababababab"])
async def test_a_weak_token_is_refused(tmp_path: Path, token: str) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'w.db'}") as engine:
        with pytest.raises(UsageError) as refused:
            create_app(engine, ServeConfig(token))
    assert refused.value.code == "weak_token"
    assert "at least 16 characters, 8 of them different" in refused.value.message
    assert "secrets.token_urlsafe" in refused.value.details["hint"]


async def test_wrong_tokens_are_slowed_down_per_client(served: Any) -> None:
    _, client, clock = served
    async with client("10.0.0.1") as guesser, client("10.0.0.2") as operator:
        for _ in range(3):  # typos are free
            assert (await guesser.get("/v1/runs", headers=WRONG)).status_code == 401
        assert (await guesser.get("/v1/runs", headers=WRONG)).status_code == 401
        waits = []
        for _ in range(8):
            held = await guesser.get("/v1/runs", headers=AUTH)  # even the right token waits
            assert held.status_code == 429
            assert held.json()["error"]["code"] == "too_many_attempts"
            waits.append(int(held.headers["retry-after"]))
            # every other client is served at once, while this one waits
            assert (await operator.get("/v1/runs", headers=AUTH)).status_code == 200
            clock.advance(waits[-1])
            assert (await guesser.get("/v1/runs", headers=WRONG)).status_code == 401
        assert waits == [1, 2, 4, 8, 16, 32, 60, 60]  # doubling, at most a minute
        clock.advance(60)
        assert (await guesser.get("/v1/runs", headers=AUTH)).status_code == 200
        assert (await guesser.get("/v1/runs", headers=WRONG)).status_code == 401  # forgotten


async def test_wrong_sign_ins_are_slowed_down_per_client(served: Any) -> None:
    _, client, clock = served
    async with client("10.0.0.3") as guesser, client("10.0.0.4") as operator:
        for _ in range(4):
            assert (await _sign_in(guesser, "not-the-token-at-all")).status_code == 401
        held = await _sign_in(guesser)
        assert held.status_code == 429 and "try again in 1 s" in held.text
        assert (await _sign_in(operator)).status_code == 303
        clock.advance(1)
        assert (await _sign_in(guesser)).status_code == 303


async def test_a_signed_key_of_an_unknown_run_is_refused_like_a_forged_one(
        served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, client, _ = served
    parked = await engine.run('r = await tools.approve({})\nfinish r\n', run_id="p")
    genuine = parked.waiting[0].key
    unknown = engine.tools.key_for("no-such-run", parked.waiting[0].step)  # validly signed
    forged = genuine[:-6] + ("AAAAAA" if not genuine.endswith("AAAAAA") else "BBBBBB")
    reads: list[str] = []
    for name in ("get_run", "completion_get"):
        original = getattr(engine.store, name)

        def counted(*args: Any, _name: str = name, _original: Any = original) -> Any:
            reads.append(_name)
            return _original(*args)
        monkeypatch.setattr(engine.store, name, counted)
    work: dict[str, list[list[str]]] = {}
    async with client() as http:
        for label, key in (("unknown", unknown), ("forged", forged)):
            answers = []
            for method in ("GET", "POST"):
                reads.clear()
                answer = await http.request(method, f"/v1/completions/{key}",
                                            json={"result": 1} if method == "POST" else None)
                answers.append((answer.status_code, answer.json()))
                work.setdefault(label, []).append(list(reads))
            assert answers == [(404, {"error": {"code": "unknown_completion_key",
                                                "message": "unknown completion key"}})] * 2
    assert work["unknown"] == work["forged"] == [["get_run"], ["get_run"]]
