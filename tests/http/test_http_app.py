"""The HTTP API through httpx's ASGI transport: webhooks resolve completion keys (with
duplicates, conflicts, expiry and forgeries answered as documented), the runs API needs
the token, bodies have a limit, the OpenAPI document is served."""

from __future__ import annotations

import asyncio
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.http import ServeConfig, create_app
from lashflow.testing import FakeClock

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(seconds=60)))


WAITS = 'r = await tools.approve({})\nfinish r\n'


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient, FakeClock]]:
    processes = tmp_path / "processes"
    processes.mkdir()
    shutil.copy(ROOT / "processes" / "fulfill.lash", processes)
    shutil.copy(ROOT / "processes" / "fulfill.py", processes)
    (tmp_path / "secret.lash").write_text("finish 1\n")  # outside the processes dir
    clock = FakeClock()
    async with Engine(db=f"sqlite:///{tmp_path / 'http.db'}", tools=[approve],
                      clock=clock) as engine:
        app = create_app(engine, ServeConfig(TOKEN, processes, body_limit=4096))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lashflow") as client:
            yield engine, client, clock


async def parked(engine: Engine) -> tuple[str, str]:
    outcome = await engine.run(WAITS)
    assert outcome.status is RunStatus.WAITING
    [wait] = outcome.waiting
    assert wait.key is not None
    return outcome.run_id, wait.key


async def settled(engine: Engine, run_id: str) -> Any:
    """The run once the drive the server started for it (if any) has ended."""
    if engine.driver.is_driving(run_id):
        await asyncio.wait_for(asyncio.shield(engine.driver.spawn(run_id)), 10)
    return await engine.get(run_id)


async def test_a_webhook_resolves_its_key_and_the_run_moves_on(served: Any) -> None:
    engine, client, _ = served
    run_id, key = await parked(engine)
    state = await client.get(f"/v1/completions/{key}")
    assert state.status_code == 200 and state.json()["state"] == "open"
    answer = await client.post(f"/v1/completions/{key}", json={"result": {"approved": True}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["run_id"] == run_id and answer.json()["duplicate"] is False
    outcome = await settled(engine, run_id)
    assert outcome.status is RunStatus.FINISHED
    assert outcome.result == {"ok": True, "value": {"approved": True}}
    state = await client.get(f"/v1/completions/{key}")
    assert state.json()["state"] == "resolved"


async def test_duplicates_conflicts_forgeries_and_expiry(served: Any) -> None:
    engine, client, clock = served
    run_id, key = await parked(engine)
    first = await client.post(f"/v1/completions/{key}", json={"error": "declined"})
    assert first.status_code == 200
    again = await client.post(f"/v1/completions/{key}", json={"error": "declined"})
    assert again.status_code == 200 and again.json()["duplicate"] is True
    other = await client.post(f"/v1/completions/{key}", json={"result": 1})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "completion_already_resolved"
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    for bad in (forged, "lfk_nonsense", "x"):
        refused = await client.post(f"/v1/completions/{bad}", json={"result": 1})
        assert refused.status_code == 404
        assert refused.json() == {"error": {"code": "unknown_completion_key",
                                            "message": "unknown completion key"}}
        assert (await client.get(f"/v1/completions/{bad}")).status_code == 404
    # expiry: the deadline passes before anyone answers
    late_run, late_key = await parked(engine)
    clock.advance(61)
    late = await client.post(f"/v1/completions/{late_key}", json={"result": 1})
    assert late.status_code == 410 and late.json()["error"]["code"] == "completion_expired"
    # a cancelled run's key is unknown like a forged one, and nothing is written
    gone_run, gone_key = await parked(engine)
    await engine.cancel(gone_run)
    gone = await client.post(f"/v1/completions/{gone_key}", json={"result": 1})
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "unknown_completion_key"


async def test_bad_bodies_are_refused_with_a_code(served: Any) -> None:
    engine, client, _ = served
    _, key = await parked(engine)
    for body, code in ((b"{", "input_invalid"), (b"{}", "input_invalid"),
                       (b'{"result": 1, "error": "x"}', "input_invalid"),
                       (b'{"result": 1, "extra": 2}', "input_invalid"),
                       (b'{"result": "' + b"x" * 5000 + b'"}', "body_too_large")):
        answer = await client.post(f"/v1/completions/{key}", content=body,
                                    headers={"content-type": "application/json"})
        assert answer.json()["error"]["code"] == code, body[:40]
        assert answer.status_code == (413 if code == "body_too_large" else 400)
    assert (await client.get(f"/v1/completions/{key}")).json()["state"] == "open"


async def test_management_routes_need_the_token(served: Any) -> None:
    _, client, _ = served
    for method, path in (("GET", "/v1/runs"), ("POST", "/v1/runs"), ("GET", "/v1/waiting"),
                         ("GET", "/v1/runs/x"), ("POST", "/v1/runs/x/cancel")):
        refused = await client.request(method, path)  # no token offered: not a guess
        assert refused.status_code == 401, path
        assert refused.json()["error"]["code"] == "unauthorized"
    wrong = await client.get("/v1/runs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert (await client.get("/openapi.json")).status_code == 200
    assert (await client.get("/nowhere")).json()["error"]["code"] == "not_found"


async def test_the_runs_api(served: Any) -> None:
    engine, client, _ = served
    data = (ROOT / "processes" / "fulfill.input.json").read_text()
    import json

    started = await client.post("/v1/runs", headers=AUTH, json={
        "file": "fulfill.lash", "input": json.loads(data), "run_id": "order-1"})
    assert started.status_code == 202, started.text
    await settled(engine, "order-1")
    run = (await client.get("/v1/runs/order-1", headers=AUTH)).json()
    assert run["status"] == "waiting" and run["input"] == json.loads(data)
    [wait] = run["waiting"]
    steps = (await client.get("/v1/runs/order-1/steps", headers=AUTH)).json()["steps"]
    assert [s["tool"] for s in steps] == ["tools.quote", "tools.request_approval"]
    output = await client.get(f"/v1/runs/order-1/steps/{steps[0]['step']}/output", headers=AUTH)
    assert output.json()["outcome"]["value"]["amount"] == 48.0
    waiting = (await client.get("/v1/waiting", headers=AUTH)).json()["waiting"]
    assert [w["run_id"] for w in waiting] == ["order-1"]
    listed = (await client.get("/v1/runs?status=waiting&limit=5", headers=AUTH)).json()
    assert [r["run_id"] for r in listed["runs"]] == ["order-1"]
    answer = await client.post(f"/v1/completions/{wait['key']}",
                               json={"result": {"approved": True}})
    assert answer.status_code == 200
    finished = await settled(engine, "order-1")
    assert finished.status is RunStatus.FINISHED
    for file in ("../secret.lash", "/etc/passwd", "nope.lash", "fulfill.py"):
        refused = await client.post("/v1/runs", headers=AUTH, json={"file": file})
        assert refused.status_code == 404, file
        assert refused.json()["error"]["code"] == "unknown_process_file"
    missing = await client.get("/v1/runs/nope", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_run"
    bad = await client.get("/v1/runs?status=bogus", headers=AUTH)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "usage_error"
    cancel = await client.post("/v1/runs/order-1/cancel", headers=AUTH, json={})
    assert cancel.json()["already_settled"] is True


async def test_signal_cancel_and_retry_over_http(served: Any, tmp_path: Path) -> None:
    engine, client, _ = served
    outcome = await engine.run('process g() {\n  d = wait_signal("go")\n  finish d\n}\n',
                               run_id="g")
    assert outcome.status is RunStatus.WAITING
    typo = await client.post("/v1/runs/g/signals/og", headers=AUTH, json={"payload": 1})
    assert typo.status_code == 400 and typo.json()["error"]["code"] == "unknown_signal"
    sent = await client.post("/v1/runs/g/signals/go", headers=AUTH, json={"payload": 7})
    assert sent.status_code == 200
    assert (await settled(engine, "g")).result == 7
    sleeper = await engine.run('sleep for "1h"\nfinish 1', run_id="s")
    assert sleeper.status is RunStatus.WAITING
    cancelled = await client.post("/v1/runs/s/cancel", headers=AUTH, json={"reason": "test"})
    assert cancelled.json()["status"] == "cancelled"
    retried = await client.post("/v1/runs/s/retry", headers=AUTH)
    assert retried.status_code == 202
    again = await client.post("/v1/runs/g/retry", headers=AUTH)
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_not_retryable"


async def test_pause_and_unpause_over_http(served: Any) -> None:
    engine, client, _ = served
    assert (await engine.run('sleep for "1h"\nfinish 1', run_id="p")).status is RunStatus.WAITING
    paused = await client.post("/v1/runs/p/pause", headers=AUTH, json={"reason": "look"})
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    shown = (await client.get("/v1/runs/p", headers=AUTH)).json()
    assert shown["paused"]["reason"] == "look" and shown["paused"]["by"].startswith("api (")
    listed = (await client.get("/v1/runs?status=paused", headers=AUTH)).json()
    assert [r["run_id"] for r in listed["runs"]] == ["p"]
    unpaused = await client.post("/v1/runs/p/unpause", headers=AUTH)
    assert unpaused.json()["status"] in ("queued", "running", "waiting")
    again = await client.post("/v1/runs/p/unpause", headers=AUTH)
    assert again.status_code == 400 and again.json()["error"]["code"] == "run_not_paused"


async def test_a_bulk_action_over_http_is_a_job_whose_progress_reads(served: Any) -> None:
    engine, client, _ = served
    for i in range(3):
        await engine.run('sleep for "1h"\nfinish 1', run_id=f"b{i}")
    bad = await client.post("/v1/runs/bulk", headers=AUTH,
                            json={"action": "pause", "where": "colour=red"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "usage_error"
    started = await client.post("/v1/runs/bulk", headers=AUTH, json={
        "action": "pause", "where": "status=waiting", "reason": "bulk"})
    assert started.status_code == 202
    job_id = started.json()["job_id"]
    while (job := (await client.get(f"/v1/jobs/{job_id}", headers=AUTH)).json())[
            "state"] == "running":
        await asyncio.sleep(0.02)
    assert (job["state"], job["matched"], job["acted"]) == ("done", 3, 3)
    paused = (await client.get("/v1/runs?status=paused", headers=AUTH)).json()["runs"]
    assert {r["run_id"] for r in paused} == {"b0", "b1", "b2"}
    missing = await client.get("/v1/jobs/job_nope", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_job"


async def test_the_openapi_document_describes_the_bodies(served: Any) -> None:
    _, client, _ = served
    doc = (await client.get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    assert {"CompletionBody", "StartRun", "ErrorBody"} <= set(doc["components"]["schemas"])
    post = doc["paths"]["/v1/completions/{key}"]["post"]
    assert post["security"] == []
    assert doc["paths"]["/v1/runs"]["get"]["security"] == [{"bearer": []}]


async def test_every_answer_has_a_schema_and_matches_it(served: Any) -> None:
    """Found here: the OpenAPI document typed every 200 answer as a bare ``object``."""
    from pydantic import TypeAdapter

    from lashflow.http import models

    engine, client, _ = served
    doc = (await client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    answers: dict[tuple[str, str], str] = {}
    streams: set[str] = set()
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            [(status, success)] = [(s, r) for s, r in operation["responses"].items()
                                   if s.startswith("2")]
            [(media, content)] = success["content"].items()
            if media == "text/event-stream":  # checked in test_http_events.py
                assert content["schema"]["$ref"].endswith("/RunEventData")
                streams.add(path)
                continue
            if media == "text/plain":
                assert path == "/metrics" and content["schema"]["type"] == "string"
                continue
            name = content["schema"]["$ref"].rsplit("/", 1)[1]
            assert schemas[name]["properties"], name  # a shape, not a bare object
            answers[method.upper(), path] = name

    run_id, key = await parked(engine)
    gate = await engine.run('process g() {\n  d = wait_signal("go")\n  finish d\n}\n',
                            run_id="g")
    [step] = await engine.steps(run_id)
    other, _ = await parked(engine)
    held, _ = await parked(engine)
    job = (await client.post("/v1/runs/bulk", headers=AUTH,
                             json={"action": "gc", "where": "all", "dry_run": True})).json()
    calls = [
        ("GET", "/v1/runs", "/v1/runs", None),
        ("POST", "/v1/runs", "/v1/runs", {"file": "fulfill.lash", "input": {
            "order": {"id": "o", "items": [], "total": 0}}}),
        ("GET", "/v1/runs/{run_id}", f"/v1/runs/{run_id}", None),
        ("GET", "/v1/runs/{run_id}/steps", f"/v1/runs/{run_id}/steps", None),
        ("GET", "/v1/runs/{run_id}/steps/{step}/output",
         f"/v1/runs/{run_id}/steps/{step.step_key}/output", None),
        ("GET", "/v1/waiting", "/v1/waiting", None),
        ("GET", "/v1/completions/{key}", f"/v1/completions/{key}", None),
        ("POST", "/v1/completions/{key}", f"/v1/completions/{key}", {"result": 1}),
        ("POST", "/v1/runs/{run_id}/signals/{name}", f"/v1/runs/{gate.run_id}/signals/go",
         {"payload": 1}),
        ("POST", "/v1/runs/{run_id}/cancel", f"/v1/runs/{other}/cancel", {}),
        ("POST", "/v1/runs/{run_id}/retry", f"/v1/runs/{other}/retry", None),
        ("POST", "/v1/runs/{run_id}/pause", f"/v1/runs/{held}/pause", {"reason": "r"}),
        ("POST", "/v1/runs/{run_id}/unpause", f"/v1/runs/{held}/unpause", None),
        ("POST", "/v1/runs/bulk", "/v1/runs/bulk", {"action": "pause", "where": "all",
                                                    "dry_run": True}),
        ("GET", "/v1/jobs/{job_id}", f"/v1/jobs/{job['job_id']}", None),
        ("GET", "/healthz", "/healthz", None),
    ]
    assert streams == {"/v1/runs/{run_id}/events", "/v1/events"}
    # the schedules routes are checked in tests/schedules/test_schedules_http.py, the
    # queues and rate-limit routes in tests/http/test_http_queues.py and
    # tests/http/test_http_ratelimits.py
    assert {(method, path) for method, path, _, _ in calls} == {
        answer for answer in answers if not answer[1].startswith(
            ("/v1/schedules", "/v1/queues", "/v1/ratelimits"))}
    for method, path, url, body in calls:
        answer = await client.request(method, url, headers=AUTH, json=body)
        assert answer.status_code in (200, 202), (url, answer.text)
        model = getattr(models, answers[method, path])
        TypeAdapter(model).validate_python(answer.json())
        await settled(engine, run_id)
