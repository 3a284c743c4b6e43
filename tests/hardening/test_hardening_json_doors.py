"""Every door a JSON value comes in by refuses what JSON cannot carry, with input_invalid
and the value's JSON path, and writes nothing: NaN, Infinity, -Infinity, 1e999 (an
infinity by overflow), a 5,000-digit integer, a lone surrogate, nesting ~900 deep.

Found here: NaN, Infinity and 1e999 were accepted in run inputs, webhook results,
``--input``, signal payloads and ``fork --set`` and stored as non-JSON (``{"x":NaN}``), so
``GET /v1/runs/ID`` answered 500 for good; a 5,000-digit integer exited 70; a lone
surrogate in ``file`` or ``run_id`` of ``POST /v1/runs``, a NUL in ``file`` and a webhook
result nested 900 deep answered 500 with a traceback in the log.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import InputInvalid
from lashflow.http import ServeConfig, create_app

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "json-doors-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ECHO = "process p(x: any) {\n  finish x\n}\n"
GATE = 'process g() {\n  d = wait_signal("go")\n  finish d\n}\n'
PARK = "x = await tools.park({})?\nfinish x\n"
NESTED_900 = "[" * 900 + "]" * 900

# (JSON text of a value, what the refusal names, the JSON path below the value's root)
BAD_TEXT = [
    ("NaN", "NaN is not a JSON number", ""),
    ("Infinity", "Infinity is not a JSON number", ""),
    ('{"a": [1, -Infinity]}', "-Infinity is not a JSON number", ".a[1]"),
    ('{"a": 1e999}', "1e999 is out of range", ".a"),
    ('{"a": ' + "9" * 5000 + "}", "an integer of 5,000 digits is out of range", ".a"),
    ('{"a": "\\ud800"}', "a lone surrogate (\\ud800) is not Unicode text", ".a"),
]
# the same from a Python caller
BAD_VALUES = [
    (float("nan"), "nan is not a JSON number", ""),
    ({"a": [1, float("-inf")]}, "-inf is not a JSON number", ".a[1]"),
    ({"a": 10 ** 5000 - 1}, "an integer of 5,000 digits is out of range", ".a"),
    ({"a": "\udc80"}, "a lone surrogate (\\udc80) is not Unicode text", ".a"),
]


@tool
async def park(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(hours=1)))


def _stored_json(db: Path) -> list[str]:
    """Every JSON column the database holds for runs, steps and signals."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT input FROM runs UNION ALL SELECT result FROM runs "
                            "UNION ALL SELECT outcome FROM steps UNION ALL SELECT payload "
                            "FROM signals UNION ALL SELECT resolution FROM completions")
        return [text for (text,) in rows if text is not None]


def _all_strict_json(db: Path) -> None:
    for text in _stored_json(db):
        json.loads(text, parse_constant=lambda name: pytest.fail(f"stored {name}: {text}"))


# ------------------------------------------------------------------- the Python API


@pytest.mark.parametrize("value, names, below", BAD_VALUES)
async def test_the_engine_refuses_them_from_python_callers(tmp_path: Path, value: Any,
                                                           names: str, below: str) -> None:
    db = tmp_path / "e.db"
    async with Engine(db=f"sqlite:///{db}", tools=[park]) as engine:
        with pytest.raises(InputInvalid) as started:
            await engine.run(ECHO, process="p", input={"x": value})
        assert started.value.message.startswith(f"$.x{below}: {names}")
        assert started.value.details["path"] == f"$.x{below}"
        assert (await engine.runs()).runs == []

        gated = await engine.run(GATE, process="g", run_id="g")
        with pytest.raises(InputInvalid) as signalled:
            await engine.signal("g", "go", value)
        assert signalled.value.details["path"] == f"${below}"

        parked = await engine.run(PARK, run_id="k")
        key = parked.waiting[0].key
        for given in (value, ToolResult.ok(value)):
            with pytest.raises(InputInvalid) as completed:
                await engine.complete(key, given)
            assert names in completed.value.message
        assert (await engine.completion(key)).state == "open"

        [step] = await engine.steps("k")
        with pytest.raises(InputInvalid) as forked:
            await engine.fork("k", step.step_key, set={step.step_key: value},
                              run_id_of_fork="f")
        assert forked.value.message.startswith(f"set {step.step_key}: ${below}: {names}")
        assert {r.run_id for r in (await engine.runs()).runs} == {"g", "k"}
        assert (await engine.get(gated.run_id)).status is RunStatus.WAITING
    _all_strict_json(db)


@pytest.mark.parametrize("run_id", ["a\ud800b", "a\x00b", "", "x" * 257])
async def test_a_run_id_is_text_every_database_stores(tmp_path: Path, run_id: str) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'e.db'}") as engine:
        with pytest.raises(InputInvalid) as refused:
            await engine.run("finish 1\n", run_id=run_id)
        assert refused.value.details["path"] == "run_id"
        assert "text of 1 to 256 characters with no NUL and no lone surrogate" in \
            refused.value.message
        first = await engine.run("finish 1\n", run_id="fine")
        with pytest.raises(InputInvalid):
            await engine.fork(first.run_id, "1", run_id_of_fork=run_id)
        assert [r.run_id for r in (await engine.runs()).runs] == ["fine"]


async def test_a_tool_returning_nan_fails_its_call_and_nothing_non_json_is_written(
        tmp_path: Path) -> None:
    @tool
    async def ratio() -> ToolResult:
        return ToolResult.ok({"r": float("inf")})

    db = tmp_path / "e.db"
    async with Engine(db=f"sqlite:///{db}", tools=[ratio]) as engine:
        kept = await engine.run("x = await tools.ratio({})\nfinish x\n")
        assert kept.result == {"ok": False, "error": "the tool's output is not JSON data: "
                               "$.r: inf is not a JSON number (JSON has no NaN or Infinity)"}
        # a non-finite number the process computes is null in JSON (the language's rule)
        divided = await engine.run("finish { q: 1 / 0, n: -1 / 0 }\n")
        assert divided.status is RunStatus.FINISHED and divided.result == {"q": None, "n": None}
    _all_strict_json(db)


# ------------------------------------------------------------------- the HTTP API


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[Engine, httpx.AsyncClient]]:
    processes = tmp_path / "processes"
    processes.mkdir()
    (processes / "echo.lash").write_text(ECHO)
    async with Engine(db=f"sqlite:///{tmp_path / 'h.db'}", tools=[park]) as engine:
        app = create_app(engine, ServeConfig(TOKEN, processes))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://lashflow") as http:
            yield engine, http


async def _refused(answer: httpx.Response, path: str, names: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "input_invalid" and error["path"] == path, error
    assert names in error["message"]


@pytest.mark.parametrize("text, names, below", BAD_TEXT)
async def test_http_bodies_refuse_them_at_the_door(client: Any, text: str, names: str,
                                                   below: str) -> None:
    engine, http = client
    started = await http.post("/v1/runs", headers=AUTH, content=(
        '{"file": "echo.lash", "process": "p", "input": {"x": %s}}' % text).encode())
    await _refused(started, f"$.input.x{below}", names)
    parked = await engine.run(PARK, run_id="k")
    key = parked.waiting[0].key
    await _refused(await http.post(f"/v1/completions/{key}",
                                   content=('{"result": %s}' % text).encode()),
                   f"$.result{below}", names)
    gated = await engine.run(GATE, process="g", run_id="g")
    await _refused(await http.post(f"/v1/runs/{gated.run_id}/signals/go", headers=AUTH,
                                   content=('{"payload": %s}' % text).encode()),
                   f"$.payload{below}", names)
    # nothing was written: every read still answers, the key is still open
    assert (await http.get(f"/v1/completions/{key}")).json()["state"] == "open"
    for run_id in ("k", "g"):
        assert (await http.get(f"/v1/runs/{run_id}", headers=AUTH)).status_code == 200
    assert [r["run_id"] for r in (await http.get("/v1/runs", headers=AUTH)).json()["runs"]] \
        == ["g", "k"]


async def test_client_mistakes_in_post_runs_are_400_not_500(client: Any) -> None:
    _, http = client
    for body, path in ((b'{"file": "\\ud800.lash"}', "$.file"),
                       (b'{"file": "echo.lash", "process": "p", "input": {"x": 1}, '
                        b'"run_id": "\\udfff"}', "$.run_id"),
                       (b'{"file": "echo\\u0000.lash"}', "$.file"),
                       (b'{"file": "echo.lash", "process": "p", "input": {"x": 1}, '
                        b'"run_id": "a\\u0000b"}', "run_id"),
                       (b'{"file": "echo.lash", "input": {"\\ud83d": 1}}', "$.input")):
        answer = await http.post("/v1/runs", headers=AUTH, content=body)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["error"]["code"] == "input_invalid"
        assert answer.json()["error"]["path"] == path, body
    assert (await http.get("/v1/runs", headers=AUTH)).json()["runs"] == []


async def test_a_webhook_result_nested_900_deep_is_400(client: Any) -> None:
    engine, http = client
    key = (await engine.run(PARK, run_id="k")).waiting[0].key
    answer = await http.post(f"/v1/completions/{key}",
                             content=('{"result": %s}' % NESTED_900).encode())
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "input_invalid"
    assert "nested deeper than" in answer.json()["error"]["message"]
    assert (await http.get(f"/v1/completions/{key}")).json()["state"] == "open"
    bad_bytes = await http.post(f"/v1/completions/{key}", content=b'{"result": "\xff"}')
    assert bad_bytes.status_code == 400 and "not UTF-8" in bad_bytes.json()["error"]["message"]


# ------------------------------------------------------------------- the command line


def _cli(cli_env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lashflow", *args], env=cli_env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


CLI_FLOW = "process p(x: any) {\n  a = await tools.first({})?\n  finish { a: a, x: x }\n}\n"
CLI_TOOLS = "from lashflow import tool\n\n@tool\nasync def first() -> int:\n    return 1\n"


CLI_BAD = [BAD_TEXT[0], BAD_TEXT[3], BAD_TEXT[4], BAD_TEXT[5],
           (NESTED_900, "nested deeper than 256 levels", "[0]")]


def test_cli_options_refuse_them_with_exit_2(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """Every option goes through the one reader: each value on ``--input``, then
    ``fork --set`` (900 deep: it made a fork that went needs_attention with a traceback;
    5,000 digits: exit 70) and ``signal --payload``."""
    (tmp_path / "flow.lash").write_text(CLI_FLOW)
    (tmp_path / "flow_tools.py").write_text(CLI_TOOLS)
    (tmp_path / "gate.lash").write_text(GATE)
    tools = ("--tools", str(tmp_path / "flow_tools.py"))
    for text, names, below in CLI_BAD:
        refused = _cli(cli_env, tmp_path, "run", "flow.lash", *tools, "--json",
                       "--input", '{"x": %s}' % text)
        assert refused.returncode == 2, refused
        error = json.loads(refused.stdout)["error"]
        assert error["code"] == "input_invalid" and names in error["message"], error
        assert error["path"].startswith(f"$.x{below}"), error
    ran = _cli(cli_env, tmp_path, "run", "flow.lash", *tools, "--input", '{"x": 2}',
               "--run-id", "r1", "--json")
    assert ran.returncode == 0, ran
    step = json.loads(_cli(cli_env, tmp_path, "show", "r1", "--json").stdout)["steps"][0]["step"]
    for text, names, _ in (CLI_BAD[4], CLI_BAD[2]):
        forked = _cli(cli_env, tmp_path, "fork", "r1", "--from", step, "--set",
                      f"{step}={text}", *tools, "--run-id", "f1")
        assert forked.returncode == 2, forked
        assert forked.stderr.startswith(f"error[input_invalid]: --set {step}"), forked.stderr
        assert names in forked.stderr
    assert _cli(cli_env, tmp_path, "run", "gate.lash", "--run-id", "g").returncode == 3
    signalled = _cli(cli_env, tmp_path, "signal", "g", "go", "--payload", "Infinity")
    assert signalled.returncode == 2, signalled
    assert signalled.stderr.startswith("error[input_invalid]: --payload: $: Infinity is not")
    listed = json.loads(_cli(cli_env, tmp_path, "list", "--json").stdout)
    assert sorted(r["run_id"] for r in listed["runs"]) == ["g", "r1"]


@pytest.fixture(params=["sqlite", "postgres"])
async def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database URL on each backend (PostgreSQL: a fresh schema, dropped after)."""
    from pg_support import database_url

    async with database_url(request.param, tmp_path) as url:
        yield url


async def test_a_nul_in_a_run_id_or_filter_of_a_url_is_a_client_mistake(any_db: str) -> None:
    """Found here: on PostgreSQL, ``GET /v1/runs/a%00b`` answered db_error with the
    database's URL (the server refuses NUL in text); no run id holds a NUL, so no run has
    that one."""
    async with Engine(db=any_db) as engine:
        app = create_app(engine, ServeConfig(TOKEN))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://lashflow") as http:
            for method, path in (("GET", "/v1/runs/a%00b"), ("GET", "/v1/runs/a%00b/steps"),
                                 ("POST", "/v1/runs/a%09b/cancel"),
                                 ("POST", "/v1/runs/%00/retry")):
                answer = await http.request(method, path, headers=AUTH)
                assert answer.status_code == 404, (path, answer.text)
                assert answer.json()["error"]["code"] == "unknown_run"
            for query in ("process=a%00b", "parent=%00"):
                answer = await http.get(f"/v1/runs?{query}", headers=AUTH)
                assert answer.status_code == 400, (query, answer.text)
                assert answer.json()["error"]["code"] == "usage_error"
