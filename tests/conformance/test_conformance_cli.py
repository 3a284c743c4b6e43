"""Every runtime program of CONFORMANCE.md through `lashflow run --json` on the durable engine,
with the stub tools written to a sibling .py file (the way a user would run them)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_conformance_run import FINISHED, READ_BY_PATH, RUNTIME_ERRORS, same

ROOT = Path(__file__).resolve().parents[2]

STUBS = '''
import json
from lashflow import tool, ToolCall, ToolResult

SPECS = json.loads({specs!r})
_positions = {{}}


def _answer(spec):
    if "ok" in spec:
        return ToolResult.ok(spec["ok"])
    if "error" in spec:
        return ToolResult.err(spec["error"])
    raise ValueError(f"bad stub {{spec}}")


def _make(name, spec):
    async def stub(call: ToolCall) -> ToolResult:
        if "seq" in spec:
            i = _positions.get(name, 0)
            _positions[name] = i + 1
            return _answer(spec["seq"][i])
        if "by" in spec:
            by = spec["by"]
            chosen = by["cases"].get(str(call.input.get(by["field"])), by.get("default"))
            return _answer(chosen)
        if spec == "echo":
            return ToolResult.ok(call.input)
        return _answer(spec)
    stub.__name__ = name
    return tool(name=name)(stub)


for _name, _spec in SPECS.items():
    globals()["tool_" + _name] = _make(_name, _spec)
'''


def write_case(folder: Path, name: str, source: str, tools: dict) -> Path:
    program = folder / f"{name}.lash"
    program.write_text(source)
    if tools:
        (folder / f"{name}.py").write_text(STUBS.format(specs=json.dumps(tools)))
    return program


def lashflow(env: dict[str, str], *args: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "lashflow", *args, "--json"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("case, source, tools, expected", FINISHED, ids=[c[0] for c in FINISHED])
def test_finished_through_the_cli(case: str, source: str, tools: dict, expected: object,
                                  tmp_path: Path, cli_env: dict[str, str]) -> None:
    program = write_case(tmp_path, case, source, tools)
    code, outcome = lashflow(cli_env, "run", str(program))
    assert code == 0, outcome
    assert outcome["status"] == "finished"
    assert same(outcome["result"], expected)


@pytest.mark.parametrize("case, source, tools, kind, message", RUNTIME_ERRORS,
                         ids=[c[0] for c in RUNTIME_ERRORS])
def test_runtime_errors_through_the_cli(case: str, source: str, tools: dict, kind: str,
                                        message: str, tmp_path: Path,
                                        cli_env: dict[str, str]) -> None:
    program = write_case(tmp_path, case, source, tools)
    code, outcome = lashflow(cli_env, "run", str(program))
    assert code == 1 and outcome["status"] == "failed"
    error = outcome["error"]
    assert (error["code"], error["kind"], error["message"]) == ("runtime_error", kind, message)
    assert error["line"] >= 1 and error["column"] >= 1


def test_c19_both_calls_are_journaled(tmp_path: Path, cli_env: dict[str, str]) -> None:
    source = ('a = await tools.read({ path: "a.txt" })?\n'
              'b = await tools.read({ path: "b.txt" })?\nfinish [a, b]\n')
    program = write_case(tmp_path, "c19", source, {"read": READ_BY_PATH})
    code, outcome = lashflow(cli_env, "run", str(program))
    assert code == 1
    _, shown = lashflow(cli_env, "show", outcome["run_id"])
    assert [s["tool"] for s in shown["steps"]] == ["tools.read", "tools.read"]


def test_c29_signals_yield_sleep_wake_fail(tmp_path: Path, cli_env: dict[str, str]) -> None:
    source = ('process approval(req: str) signals { decision: any } {\n  yield { waiting: req }\n'
              '  sleep for "1s"\n  d = wait_signal("decision")\n  if d.approved {\n'
              '    wake { kind: "approved", req: req }\n    finish { req: req, approved: true }\n  }\n'
              '  fail { req: req, approved: false }\n}\nh1 = start approval(req: "r1")\n'
              'h2 = start approval(req: "r2")\nfinish await [h1, h2]\n')
    program = write_case(tmp_path, "c29", source, {})
    code, parked = lashflow(cli_env, "run", str(program), "--max-wait", "0")
    assert code == 3, parked
    assert {w["kind"] for w in parked["waiting"]} == {"child", "sleep"}
    due = max(w["until"] for w in parked["waiting"] if w["kind"] == "sleep")
    time.sleep(max(0.0, due - time.time()) + 0.05)  # every recorded timer is due
    code, recovered = lashflow(cli_env, "recover")
    assert code == 0
    _, runs = lashflow(cli_env, "list")
    children = {r["run_id"]: r for r in runs["runs"] if r["run_id"] != parked["run_id"]}
    assert len(children) == 2 and all(r["status"] == "waiting" for r in children.values())
    payloads = {}
    for child in children:
        _, shown = lashflow(cli_env, "show", child)
        kinds = [s["kind"] for s in shown["steps"]]
        assert kinds == ["yield", "sleep"], kinds
        req = json.loads(shown["steps"][0]["preview"])["waiting"]
        payloads[child] = {"approved": req == "r1"}
    for child, payload in payloads.items():
        code, _ = lashflow(cli_env, "signal", child, "decision", "--payload", json.dumps(payload))
        assert code == 0
    _, final = lashflow(cli_env, "show", parked["run_id"])
    assert final["status"] == "finished", final
    assert same(final["result"], [{"ok": True, "value": {"req": "r1", "approved": True}},
                                  {"ok": False, "error": '{"approved":false,"req":"r2"}'}])
    for child, payload in payloads.items():
        _, shown = lashflow(cli_env, "show", child)
        kinds = [s["kind"] for s in shown["steps"]]
        assert kinds == (["yield", "sleep", "wait_signal", "wake"] if payload["approved"]
                         else ["yield", "sleep", "wait_signal"])


def test_c41_capability_passing(tmp_path: Path, cli_env: dict[str, str]) -> None:
    source = ("process worker(t: Tools, n: int) {\n  out = []\n  for i in range(n) {\n"
              "    v = await t.inc({ i: i })?\n    out = push(out, v)\n  }\n  finish out\n}\n"
              "finish (await start worker(t: tools, n: 3))?\n")
    program = write_case(tmp_path, "c41", source, {"inc": {"seq": [{"ok": 10}, {"ok": 11},
                                                                   {"ok": 12}]}})
    code, outcome = lashflow(cli_env, "run", str(program))
    assert code == 0 and outcome["result"] == [10, 11, 12]


def test_c53_is_one_batch_of_two(tmp_path: Path, cli_env: dict[str, str]) -> None:
    program = write_case(tmp_path, "c53", "finish await { a: tools.read({})?, b: [tools.read({}), 5] }",
                         {"read": {"seq": [{"ok": 1}, {"error": "e2"}]}})
    code, outcome = lashflow(cli_env, "run", str(program))
    assert code == 0 and same(outcome["result"], {"a": 1, "b": [{"ok": False, "error": "e2"}, 5]})
    _, shown = lashflow(cli_env, "show", outcome["run_id"])
    keys = [s["step"] for s in shown["steps"]]
    assert len(keys) == 2 and keys[0][:-2] == keys[1][:-2] and keys[0].endswith(":0")
