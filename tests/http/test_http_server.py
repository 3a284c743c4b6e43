"""A real `lashflow serve` process on a free loopback port, driven with httpx: the fulfill
example from start to finished over HTTP, 20 concurrent webhook retries, forged keys,
the token, an access log without keys, and a SIGKILL while completions arrive."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from serve_support import Server, serving

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

PARK_LASH = 'process park(n: int) {\n  r = await tools.wait_for_it({n: n})?\n  finish r\n}\n'
PARK_PY = '''
from lashflow import PendingCompletion, ToolCall, ToolResult, tool

@tool
async def wait_for_it(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())
'''


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path, {"park.lash": PARK_LASH, "park.py": PARK_PY}) as running:
        yield running


async def until(client: httpx.AsyncClient, run_id: str, status: str) -> dict[str, Any]:
    """Poll the run (real state, with a deadline) until it has ``status``."""
    deadline = time.monotonic() + 30
    while True:
        run = (await client.get(f"/v1/runs/{run_id}", headers=AUTH)).json()
        if run.get("status") == status:
            return run
        assert time.monotonic() < deadline, run
        await asyncio.sleep(0.02)


async def start_parked(client: httpx.AsyncClient, run_id: str, n: int = 0) -> str:
    started = await client.post("/v1/runs", headers=AUTH, json={
        "file": "park.lash", "input": {"n": n}, "run_id": run_id})
    assert started.status_code == 202, started.text
    run = await until(client, run_id, "waiting")
    return run["waiting"][0]["key"]


async def test_fulfill_over_http_and_webhook_retries(server: Server, tmp_path: Path) -> None:
    keys: list[str] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        order = json.loads((ROOT / "processes" / "fulfill.input.json").read_text())
        started = await client.post("/v1/runs", headers=AUTH,
                                    json={"file": "fulfill.lash", "input": order,
                                          "run_id": "order"})
        assert started.status_code == 202
        waiting = await until(client, "order", "waiting")
        key = waiting["waiting"][0]["key"]
        keys.append(key)
        answer = await client.post(f"/v1/completions/{key}", json={"result": {"approved": True}})
        assert answer.status_code == 200 and answer.json()["duplicate"] is False
        done = await until(client, "order", "finished")
        assert done["result"]["charged"] is True
        steps = (await client.get("/v1/runs/order/steps", headers=AUTH)).json()["steps"]
        assert [s["tool"] for s in steps] == ["tools.quote", "tools.request_approval",
                                              "tools.charge"]

        # 20 clients retry the same webhook at once: one delivery, 19 duplicates
        key = await start_parked(client, "p20")
        keys.append(key)
        answers = await asyncio.gather(*(
            client.post(f"/v1/completions/{key}", json={"result": "yes"}) for _ in range(20)))
        assert [a.status_code for a in answers] == [200] * 20
        assert sorted(a.json()["duplicate"] for a in answers) == [False] + [True] * 19
        assert (await until(client, "p20", "finished"))["result"] == "yes"
        conflict = await client.post(f"/v1/completions/{key}", json={"result": "no"})
        assert conflict.status_code == 409

        # a forged key: 404 and nothing written
        db = tmp_path / "serve.db"
        before = _rows(db)
        forged = key[:-6] + "AAAAAA"
        refused = await client.post(f"/v1/completions/{forged}", json={"result": 1})
        assert refused.status_code == 404
        assert refused.json()["error"]["code"] == "unknown_completion_key"
        assert _rows(db) == before
        assert (await client.get("/v1/runs")).status_code == 401
        scraped = await client.get("/metrics", headers=AUTH)
        assert scraped.status_code == 200
        assert 'lashflow_runs{status="finished"} 2' in scraped.text
        assert 'lashflow_steps_total{tool="tools.charge",outcome="ok"} 1' in scraped.text
    assert server.stop() == 0
    log = "".join(server.log)
    # one line per run transition: the order ran, parked, was resumed and finished
    order = [line.split()[3] for line in server.log if re.match(r"\S+Z run order ", line)]
    assert order == ["running", "waiting", "running", "finished"]
    assert "/v1/completions/<key>" in log  # the access log saw the requests...
    for key in keys:
        assert key not in log  # ...and never a key
    assert TOKEN not in log


def _rows(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("runs", "steps", "attempts", "completions")}
    finally:
        conn.close()


async def test_sigkill_while_completions_arrive(server: Server) -> None:
    """Every completion that got a 200 is delivered after a restart, none twice."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        keys = {f"k{i}": await start_parked(client, f"k{i}", i) for i in range(30)}
    answered: dict[str, int] = {}

    async def post(client: httpx.AsyncClient, run_id: str, key: str) -> None:
        try:
            reply = await client.post(f"/v1/completions/{key}", json={"result": run_id})
            answered[run_id] = reply.status_code
        except httpx.HTTPError:
            pass  # the server died under this request: no answer, no promise

    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        posts = [asyncio.ensure_future(post(client, r, k)) for r, k in keys.items()]
        while len(answered) < 10:  # kill once some (not all) have been answered
            await asyncio.sleep(0.001)
        server.kill()
        await asyncio.gather(*posts)
    delivered = [r for r, code in answered.items() if code == 200]
    assert len(delivered) >= 10
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for run_id in delivered:
            run = await until(client, run_id, "finished")
            assert run["result"] == run_id
            again = await client.post(f"/v1/completions/{keys[run_id]}",
                                      json={"result": run_id})
            assert again.status_code == 200 and again.json()["duplicate"] is True
            steps = (await client.get(f"/v1/runs/{run_id}/steps", headers=AUTH)).json()["steps"]
            assert len(steps) == 1 and len(steps[0]["attempt_log"]) == 1
    assert server.stop() == 0


FROZEN_LASH = 'process frozen() {\n  n = await tools.frozen_objects({})?\n  finish n\n}\n'
FROZEN_PY = '''
import gc
from lashflow import tool

@tool
async def frozen_objects() -> int:
    return gc.get_freeze_count()
'''


async def test_the_server_freezes_its_start_up_heap(tmp_path: Path) -> None:
    """Once up, `lashflow serve` moves what start-up made out of the collector's reach
    (ADR 0021): a tool run by its worker loop sees a frozen heap."""
    with serving(tmp_path, {"frozen.lash": FROZEN_LASH, "frozen.py": FROZEN_PY}) as running:
        async with httpx.AsyncClient(base_url=running.url, timeout=30) as client:
            started = await client.post("/v1/runs", headers=AUTH,
                                        json={"file": "frozen.lash", "run_id": "f"})
            assert started.status_code == 202, started.text
            done = await until(client, "f", "finished")
        running.stop()
    assert done["result"] > 10_000  # the imported web stack, the parser's tables...


async def test_no_token_or_completion_url_reaches_the_servers_log(tmp_path: Path) -> None:
    """A token sent in a query string, and the fulfill example run where a public URL is
    set, leave neither the token nor a key in the server's log. Found here: the access
    log wrote ``?token=...`` as sent, and the example printed its live completion URL."""
    public = {"LASHFLOW_PUBLIC_URL": "https://flows.example.com"}
    with serving(tmp_path, {}, env=public) as running:
        async with httpx.AsyncClient(base_url=running.url, timeout=30) as client:
            order = json.loads((ROOT / "processes" / "fulfill.input.json").read_text())
            started = await client.post("/v1/runs", headers=AUTH, json={
                "file": "fulfill.lash", "input": order, "run_id": "order"})
            assert started.status_code == 202, started.text
            key = (await until(client, "order", "waiting"))["waiting"][0]["key"]
            for query in (f"token={TOKEN}", f"access_token={TOKEN}", f"t={TOKEN}",
                          f"status=waiting&api_key={TOKEN}"):
                answer = await client.get(f"/v1/runs?{query}")
                assert answer.status_code == 401  # a token is taken from the header only
            answer = await client.post(f"/v1/completions/{key}",
                                       json={"result": {"approved": True}})
            assert answer.status_code == 200
            await until(client, "order", "finished")
        assert running.stop() == 0
    log = "".join(running.log)
    assert "GET /v1/runs?token=<redacted>" in log  # the access log saw the requests...
    assert "status=waiting&api_key=<redacted>" in log
    assert TOKEN not in log and key not in log  # ...and never the token nor the key
    assert "flows.example.com" not in log


def test_serve_refuses_a_weak_token_before_making_a_database(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "lashflow", "serve", "--port", "0",
                           "--token", "a", "--db", f"sqlite:///{tmp_path / 'w.db'}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.startswith("error[weak_token]: the management token is too weak"), done
    assert "secrets.token_urlsafe(24)" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "w.db").exists()
