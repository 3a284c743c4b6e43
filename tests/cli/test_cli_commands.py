"""Every command through typer's CliRunner: exit codes, plain output, and the documented
keys of each ``--json`` object."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest

from lashflow import __version__

Lf = Callable[..., Any]
OUTCOME_KEYS = {"run_id", "status", "result", "error", "waiting", "prints"}
WAIT_KEYS = {"kind", "step", "tool", "key", "until", "signal", "child_run_id", "resolve"}
STEP_KEYS = {"step", "kind", "tool", "status", "state", "attempts", "started_at", "finished_at",
             "duration", "preview", "attempt_log"}


def outcome(ran: Any, status: str, code: int) -> dict[str, Any]:
    assert ran.code == code, ran
    data = ran.json
    assert set(data) <= OUTCOME_KEYS and data["status"] == status
    for wait in data.get("waiting", []):
        assert set(wait) <= WAIT_KEYS and {"kind", "step", "resolve"} <= set(wait)
    return data


@pytest.fixture
def signal_flow(tmp_path: Path) -> Path:
    """Waits for a signal at once (no sleep), then echoes it."""
    file = tmp_path / "gate.lash"
    file.write_text('process gate(who: str) {\n  d = wait_signal("go")\n'
                    '  finish { who: who, said: d }\n}\n')
    return file


@pytest.fixture
def napper(tmp_path: Path) -> Path:
    file = tmp_path / "nap.lash"
    file.write_text('process nap(ms: int) {\n  sleep for ms\n  finish "rested"\n}\n')
    return file


def test_version_and_help(lf: Lf) -> None:
    assert lf("--version").out.strip() == f"lashflow {__version__}"
    ran = lf("--help")
    assert ran.code == 0
    for command in ("run", "check", "resume", "recover", "complete", "signal", "cancel", "list",
                    "show", "waiting", "output", "graph", "worker", "submit"):
        assert command in ran.out
    assert lf("run", "--help").code == 0


def test_run_finished(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    ran = lf("run", file, "--input", data)
    assert ran.code == 0, ran
    head, result = ran.out.strip().splitlines()
    assert head.startswith("run run_") and head.endswith(" finished")
    assert '"reservation":"rsv-south-lamp-5"' in result
    done = outcome(lf("run", file, "--input", data, "--json"), "finished", 0)
    assert done["result"]["unreachable"] == [{"warehouse": "east",
                                              "error": "warehouse east is offline"}]


def test_run_waiting_prints_the_resolving_command(lf: Lf, example: Any, db_url: str) -> None:
    file, data = example("fulfill")
    ran = lf("run", file, "--input", data)
    assert ran.code == 3
    lines = ran.out.splitlines()
    assert lines[0].endswith(" waiting")
    assert "waiting on completion key for tools.request_approval" in lines[1]
    assert lines[2].strip().startswith("lashflow complete lfk_")
    # the test's database is not the default one: the command names it, to paste anywhere
    assert lines[2].strip().endswith(f"--result '<json>' --resume --db {db_url}")
    data = outcome(lf("run", file, "--input", data, "--json"), "waiting", 3)
    [wait] = data["waiting"]
    assert wait["kind"] == "completion" and wait["key"] in wait["resolve"]


def test_run_failed(lf: Lf, tmp_path: Path) -> None:
    file = tmp_path / "f.lash"
    file.write_text('process f(x: int) {\n  fail { why: "no", x: x }\n}\n')
    ran = lf("run", file, "--input", '{"x": 3}')
    assert ran.code == 1 and ran.out.strip().endswith(" failed")
    assert ran.err.strip() == 'error[process_failed]: {"why":"no","x":3}'
    data = outcome(lf("run", file, "--input", '{"x": 3}', "--json"), "failed", 1)
    assert data["error"]["code"] == "process_failed"


def test_runtime_error_has_kind_and_place(lf: Lf, tmp_path: Path) -> None:
    file = tmp_path / "rt.lash"
    file.write_text('v = json_parse("3")\nfor i in v { print i }\n')
    ran = lf("run", file)
    assert ran.code == 1
    head, where, line, caret = ran.err.splitlines()
    assert head.startswith("error[runtime_error]: NonListIteration: ")
    assert where == f"--> {file}:2:1"
    assert (line, caret) == ("  | for i in v { print i }", "  | ^")
    shown = lf("show", lf("list", "--json").json["runs"][0]["run_id"])
    assert "error[runtime_error]: NonListIteration: " in shown.out + shown.err
    assert "(line 2, column 1)" in shown.out + shown.err  # no source at hand: the place only


def test_main_block_prints(lf: Lf, tmp_path: Path) -> None:
    file = tmp_path / "hello.lash"
    file.write_text('print "hello"\nprint [1, 2]\nfinish 42\n')
    ran = lf("run", file)
    assert ran.out.splitlines() == ["hello", "[1,2]", ran.out.splitlines()[2], "42"]
    data = outcome(lf("run", file, "--json"), "finished", 0)
    assert data["prints"] == ["hello", "[1,2]"] and data["result"] == 42


def test_detach_and_submit_then_recover(lf: Lf, example: Any) -> None:
    file, data = example("retry")
    queued = outcome(lf("run", file, "--input", data, "--detach", "--json"), "queued", 0)
    submitted = outcome(lf("submit", file, "--input", data, "--run-id", "sub-1", "--json"),
                        "queued", 0)
    assert submitted["run_id"] == "sub-1"
    recovered = lf("recover", "--json")
    assert recovered.code == 0
    runs = {o["run_id"]: o for o in recovered.json["recovered"]}
    assert set(runs) == {queued["run_id"], "sub-1"}
    assert all(o["status"] == "finished" for o in runs.values())
    assert lf("recover").out.strip() == "recovered 0 run(s)"


def test_worker_once(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    lf("submit", file, "--input", data, "--run-id", "w-1")
    ran = lf("worker", "--once", "--json")
    assert ran.code == 0
    [done] = ran.json["recovered"]
    assert done["run_id"] == "w-1" and done["status"] == "finished"
    plain = lf("worker", "--once")
    assert plain.code == 0 and plain.out == ""


def test_check(lf: Lf, example: Any) -> None:
    file, _ = example("thumbnails")
    ran = lf("check", file)
    assert ran.code == 0
    assert ran.out.strip() == f"{file}: ok (process resize(image, width); process thumbnails(images, width))"
    data = lf("check", file, "--json").json
    assert data["ok"] is True and data["status"] == "ok" and data["diagnostics"] == []
    assert [p["name"] for p in data["processes"]] == ["resize", "thumbnails"]


def test_complete_then_resume(lf: Lf, example: Any) -> None:
    file, data = example("fulfill")
    parked = lf("run", file, "--input", data, "--json").json
    key = parked["waiting"][0]["key"]
    delivered = lf("complete", key, "--result", '{"approved": true}', "--json")
    assert delivered.code == 0
    assert delivered.json == {"run_id": parked["run_id"], "status": "waiting", "delivered": True,
                              "duplicate": False}
    finished = outcome(lf("resume", parked["run_id"], "--json"), "finished", 0)
    assert finished["result"]["charged"] is True
    again = outcome(lf("resume", parked["run_id"], "--json"), "finished", 0)  # settled: unchanged
    assert again["result"] == finished["result"]


def test_complete_resume_plain_and_error(lf: Lf, example: Any) -> None:
    file, data = example("fulfill")
    key = lf("run", file, "--input", data, "--json").json["waiting"][0]["key"]
    ran = lf("complete", key, "--error", "manager said no", "--resume")
    assert ran.code == 1
    assert ran.out.strip().endswith(" failed")
    assert "manager said no" in ran.err


def test_complete_from_a_file(lf: Lf, example: Any, tmp_path: Path) -> None:
    file, data = example("fulfill")
    key = lf("run", file, "--input", data, "--json").json["waiting"][0]["key"]
    (tmp_path / "answer.json").write_text('{"approved": true}')
    done = lf("complete", key, "--result", f"@{tmp_path / 'answer.json'}", "--resume", "--json")
    outcome(done, "finished", 0)


def test_signal(lf: Lf, signal_flow: Path) -> None:
    parked = outcome(lf("run", signal_flow, "--input", '{"who": "ada"}', "--json"), "waiting", 3)
    [wait] = parked["waiting"]
    assert wait["kind"] == "signal" and wait["signal"] == "go"
    assert wait["resolve"] == f"lashflow signal {parked['run_id']} go --payload '<json>'"
    ran = lf("signal", parked["run_id"], "go", "--payload", '{"yes": 1}')
    assert ran.code == 0
    assert ran.out.splitlines()[:2] == ["signal go delivered", f"run {parked['run_id']} finished"]
    shown = lf("show", parked["run_id"], "--json").json
    assert shown["result"] == {"who": "ada", "said": {"yes": 1}}


def test_signal_json_and_early_signal(lf: Lf, signal_flow: Path) -> None:
    lf("submit", signal_flow, "--input", '{"who": "bo"}', "--run-id", "early")
    sent = lf("signal", "early", "go", "--json")  # before the run ever waited: kept
    assert sent.code == 0 and sent.json["status"] == "queued"
    done = lf("resume", "early", "--json")
    assert outcome(done, "finished", 0)["result"] == {"who": "bo", "said": None}


def test_cancel_parked_run(lf: Lf, signal_flow: Path) -> None:
    parked = lf("run", signal_flow, "--input", '{"who": "x"}', "--json").json
    ran = lf("cancel", parked["run_id"])
    assert ran.code == 0 and ran.out.splitlines()[0] == f"run {parked['run_id']} cancelled"
    data = lf("cancel", parked["run_id"], "--json").json  # again: still cancelled, exit 0
    assert data["status"] == "cancelled" and data["error"]["code"] == "cancelled"
    outcome(lf("resume", parked["run_id"], "--json"), "cancelled", 4)


def test_needs_attention_on_replay_mismatch(lf: Lf, example: Any, tmp_path: Path) -> None:
    file, data = example("fulfill")
    parked = lf("run", file, "--input", data, "--json").json
    edited = tmp_path / "fulfill.lash"
    edited.write_text(file.read_text().replace("tools.quote({ order: order })",
                                               "tools.quote({ order: order, rush: true })"))
    stuck = outcome(lf("resume", parked["run_id"], "--source", edited, "--json"),
                    "needs_attention", 5)
    assert stuck["error"]["code"] == "replay_mismatch"
    shown = lf("show", parked["run_id"])
    assert shown.out.startswith(f"run {parked['run_id']}: needs_attention")
    assert "error[replay_mismatch]" in shown.out and "differ at $.rush" in shown.out
    # under the code it was started with, the run simply continues
    outcome(lf("resume", parked["run_id"], "--json"), "waiting", 3)


def test_max_wait_drives_through_short_sleeps(lf: Lf, napper: Path) -> None:
    started = time.monotonic()
    outcome(lf("run", napper, "--input", '{"ms": 300}', "--json"), "finished", 0)
    assert time.monotonic() - started >= 0.3


def test_max_wait_zero_parks_on_the_sleep(lf: Lf, napper: Path) -> None:
    parked = outcome(lf("run", napper, "--input", '{"ms": 400}', "--max-wait", "0", "--json"),
                     "waiting", 3)
    [wait] = parked["waiting"]
    assert wait["kind"] == "sleep" and wait["until"] > time.time() - 1
    assert parked["run_id"] in wait["resolve"]
    plain = lf("waiting")
    assert "timer until" in plain.out
    time.sleep(max(0.0, wait["until"] - time.time()) + 0.05)  # the recorded timer is due
    outcome(lf("resume", parked["run_id"], "--max-wait", "0", "--json"), "finished", 0)


def test_list_with_filters(lf: Lf, example: Any, signal_flow: Path) -> None:
    file, data = example("fanout")
    for i in range(3):
        lf("run", file, "--input", data, "--run-id", f"fan-{i}")
    lf("run", signal_flow, "--input", '{"who": "w"}', "--run-id", "gate-1")
    everything = lf("list", "--json").json["runs"]
    # newest first
    assert [r["run_id"] for r in everything] == ["gate-1", "fan-2", "fan-1", "fan-0"]
    assert set(everything[0]) >= {"run_id", "status", "process", "created_at", "updated_at",
                                  "parent_run_id"}
    assert [r["run_id"] for r in lf("list", "--status", "waiting", "--json").json["runs"]] == [
        "gate-1"]
    first = lf("list", "--process", "restock", "-n", "2", "--json").json
    assert [r["run_id"] for r in first["runs"]] == ["fan-2", "fan-1"]
    rest = lf("list", "--process", "restock", "-n", "2", "--cursor", first["next_cursor"],
              "--json").json
    assert [r["run_id"] for r in rest["runs"]] == ["fan-0"] and rest["next_cursor"] is None
    both = lf("list", "--status", "waiting,finished", "-n", "3", "--json").json
    assert [r["run_id"] for r in both["runs"]] == ["gate-1", "fan-2", "fan-1"]
    plain = lf("list", "--status", "finished")
    header, *rows = plain.out.splitlines()
    assert plain.code == 0 and header.split()[:3] == ["RUN", "STATUS", "PROCESS"]
    assert len(rows) == 3
    assert all(" finished " in line and "restock" in line for line in rows)
    assert lf("list", "--status", "failed").out.strip() == "no runs with status failed"
    bad = lf("list", "--cursor", "not-a-cursor")
    assert bad.code == 2 and "bad cursor" in bad.err


def test_show(lf: Lf, example: Any) -> None:
    file, data = example("retry")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    ran = lf("show", run_id)
    assert ran.code == 0
    lines = ran.out.splitlines()
    assert lines[0] == f"run {run_id}: finished"
    fetch = next(line for line in lines if "tools.fetch_rates" in line)
    assert " ok " in fetch and " x3 " in fetch and '"USD":1.08' in fetch
    legacy = next(line for line in lines if "tools.legacy_rates" in line)
    assert " exhausted " in legacy and " x4 " in legacy and "refused the connection" in legacy
    assert any(line.startswith("result: ") for line in lines)
    shown = lf("show", run_id, "--json").json
    assert shown["status"] == "finished" and shown["process"] == "convert"
    steps = shown["steps"]
    assert all(STEP_KEYS <= set(s) <= STEP_KEYS | {"args", "wake_at"} for s in steps)
    assert [s["attempts"] for s in steps] == [3, 4]
    assert [a["status"] for a in steps[1]["attempt_log"]] == ["failed"] * 3 + ["exhausted"]
    assert steps[0]["duration"] >= 0.05 + 0.1 - 0.01  # two backoff delays


def test_waiting(lf: Lf, example: Any, signal_flow: Path) -> None:
    assert lf("waiting").out.startswith("nothing yet: no database at ")  # and none made
    file, data = example("fulfill")
    first = lf("run", file, "--input", data, "--json").json
    second = lf("run", signal_flow, "--input", '{"who": "w"}', "--json").json
    waits = lf("waiting", "--json").json["waiting"]
    assert [w["run_id"] for w in waits] == [first["run_id"], second["run_id"]]
    assert all({"run_id", "kind", "step", "resolve"} <= set(w) for w in waits)
    plain = lf("waiting").out
    assert first["waiting"][0]["resolve"] in plain.splitlines()[1]
    assert f"lashflow signal {second['run_id']} go --payload '<json>'" in plain


def test_output(lf: Lf, example: Any) -> None:
    file, data = example("retry")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    steps = lf("show", run_id, "--json").json["steps"]
    good = lf("output", run_id, steps[0]["step"])
    assert good.code == 0 and '"USD": 1.08' in good.out
    assert lf("output", run_id, steps[0]["step"], "--json").json["outcome"]["GBP"] == 0.85
    bad = lf("output", run_id, steps[1]["step"])
    assert bad.out.startswith("legacy rates service refused the connection")
    assert "ConnectionError" in bad.out  # the journaled traceback


def test_output_is_not_budgeted(lf: Lf, tmp_path: Path) -> None:
    (tmp_path / "big.lash").write_text("process big() {\n  finish await tools.big({})?\n}\n")
    (tmp_path / "big.py").write_text(
        "from lashflow import tool, ToolCall\n\n@tool\nasync def big(call: ToolCall) -> str:\n"
        "    return '\\n'.join(f'line {i}' for i in range(1000))\n")
    run_id = lf("run", tmp_path / "big.lash", "--json").json["run_id"]
    [step] = lf("show", run_id, "--json").json["steps"]
    assert "truncated" in step["preview"] and "lashflow output" in step["preview"]
    full = lf("output", run_id, step["step"]).out
    assert full.splitlines()[-1] == "line 999" and len(full.splitlines()) == 1000
    assert "truncated" in lf("show", run_id).out or "…" in lf("show", run_id).out
