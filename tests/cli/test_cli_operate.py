"""The operator's controls through the CLI: retry, fork with --set, signals the process
does not take, cancel of a settled run and a cancel reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FLAKY_TOOLS = '''
from pathlib import Path
from lashflow import ToolResult, tool

@tool
async def flip(marker: str) -> ToolResult:
    """Fails until the marker file exists."""
    if not Path(marker).exists():
        return ToolResult.failure("not yet")
    return ToolResult.ok("flipped")

@tool
async def ask(q: str) -> bool:
    return False
'''

FLOW = '''
process p(marker: str) {
  ok = await tools.ask({q: "go?"})?
  r = await tools.flip({marker: marker})?
  finish { ok: ok, r: r }
}
'''


def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "ops_tools.py").write_text(FLAKY_TOOLS)
    flow = tmp_path / "flow.lash"
    flow.write_text(FLOW)
    return flow, tmp_path / "ops_tools.py"


def test_retry_and_fork_from_the_cli(lfx: Any, tmp_path: Path) -> None:
    flow, module = files(tmp_path)
    marker = tmp_path / "marker"
    data = '{"marker": "%s"}' % marker
    failed = lfx("run", flow, "--tools", module, "--input", data, "--run-id", "r1", "--json")
    assert failed.code == 1 and failed.json["status"] == "failed"
    marker.write_text("")
    retried = lfx("retry", "r1", "--tools", module, "--json")
    assert retried.code == 0, retried
    assert retried.json["result"] == {"ok": False, "r": "flipped"}
    shown = lfx("show", "r1", "--json").json
    flip = [s for s in shown["steps"] if s["tool"] == "tools.flip"][0]
    assert [a["status"] for a in flip["attempt_log"]] == ["failed", "ok"]
    again = lfx("retry", "r1", "--tools", module)
    assert again.code == 2 and "error[run_not_retryable]" in again.err
    # fork from the first step with ask's answer set by hand
    forked = lfx("fork", "r1", "--from", "1", "--set", f"{shown['steps'][0]['step']}=true",
                 "--run-id", "f1", "--tools", module, "--json")
    assert forked.code == 0, forked
    assert forked.json["result"] == {"ok": True, "r": "flipped"}
    assert lfx("show", "f1", "--json").json["run_id"] == "f1"
    bad = lfx("fork", "r1", "--from", "1", "--set", "nope=1", "--tools", module)
    assert bad.code == 2 and "error[unknown_step]" in bad.err


def test_signals_a_process_does_not_take_are_refused(lf: Any, tmp_path: Path) -> None:
    flow = tmp_path / "gate.lash"
    flow.write_text('process gate() {\n  d = wait_signal("decision")\n  finish d\n}\n')
    assert lf("run", flow, "--run-id", "g").code == 3
    typo = lf("signal", "g", "decisoin", "--payload", "1")
    assert typo.code == 2
    assert "error[unknown_signal]" in typo.err and "`decision`" in typo.err
    assert "did you mean `decision`?" in typo.err
    assert lf("signal", "g", "decision", "--payload", "1").code == 0


def test_cancel_of_a_settled_run_and_a_reason(lf: Any, tmp_path: Path) -> None:
    done = tmp_path / "done.lash"
    done.write_text("finish 1\n")
    assert lf("run", done, "--run-id", "d").code == 0
    ran = lf("cancel", "d")
    assert ran.code == 0 and "already finished; it is left as it is" in ran.out
    assert lf("show", "d", "--json").json["status"] == "finished"
    sleepy = tmp_path / "sleepy.lash"
    sleepy.write_text('sleep for "1h"\nfinish 1\n')
    assert lf("run", sleepy, "--run-id", "s").code == 3
    assert lf("cancel", "s", "--reason", "customer withdrew").code == 0
    shown = lf("show", "s", "--json").json
    assert shown["status"] == "cancelled"
    assert shown["error"]["message"].endswith("customer withdrew")


def test_gc_from_the_cli(lf: Any, tmp_path: Path) -> None:
    done = tmp_path / "done.lash"
    done.write_text("finish 1\n")
    for i in range(3):
        assert lf("run", done, "--run-id", f"d{i}").code == 0
    dry = lf("gc", "--older-than", "0s", "--dry-run", "--json")
    assert dry.code == 0 and dry.json["runs"] == 3 and dry.json["dry_run"] is True
    assert len(lf("list", "--json").json["runs"]) == 3
    kept = lf("gc", "--older-than", "30d")
    assert kept.code == 0 and "deleted 0 run(s)" in kept.out
    gone = lf("gc", "--older-than", "0s", "--status", "finished")
    assert gone.code == 0 and "deleted 3 run(s)" in gone.out
    assert lf("list", "--json").json["runs"] == []
    bad = lf("gc", "--older-than", "soon")
    assert bad.code == 2 and "error[usage_error]" in bad.err
    waiting = lf("gc", "--older-than", "1d", "--status", "waiting")
    assert waiting.code == 2 and "only settled runs" in waiting.err


def test_show_lists_signals_delivered_but_not_taken_yet(lfx: Any, tmp_path: Path) -> None:
    flow = tmp_path / "gate.lash"
    flow.write_text('process gate() {\n  wait_signal("go")\n  d = wait_signal("decision")\n'
                    '  sleep for "1h"\n  finish d\n}\n')  # parked on "go" until we say so
    parked = lfx("run", flow, "--run-id", "g", "--max-wait", "0", "--json")
    assert parked.code == 3
    assert lfx("show", "g", "--json").json.get("pending_signals") is None
    for answer in ("yes", "no"):
        assert lfx("signal", "g", "decision", "--payload", f'"{answer}"',
                   "--max-wait", "0").code == 0
    shown = lfx("show", "g")
    assert shown.out.count("signal not taken yet: decision") == 2
    assert lfx("show", "g", "--json").json["pending_signals"] == [
        {"name": "decision", "payload": "yes"}, {"name": "decision", "payload": "no"}]
    assert lfx("signal", "g", "go", "--max-wait", "0").code == 0  # takes "yes", sleeps an hour
    assert lfx("resume", "g", "--max-wait", "0").code == 3
    assert lfx("show", "g", "--json").json["pending_signals"] == [
        {"name": "decision", "payload": "no"}]


HANDLED_FLOW = '''
process h(marker: str) {
  first = await tools.ask({q: "handled?"})
  no = await tools.nope({})
  r = await tools.flip({marker: marker})?
  finish { no: no.ok, r: r }
}
'''

NOPE_TOOLS = FLAKY_TOOLS + '''
CALLS = []

@tool
async def nope() -> ToolResult:
    return ToolResult.err("no")
'''


def test_retry_restarts_where_the_run_stopped_with_from_and_dry_run(lf: Any,
                                                                    tmp_path: Path) -> None:
    """An earlier `err` the process handled is not where a retry restarts; --dry-run says
    what would run again; --from restarts at a row of `show`."""
    module = tmp_path / "nope_tools.py"
    module.write_text(NOPE_TOOLS)
    flow = tmp_path / "handled.lash"
    flow.write_text(HANDLED_FLOW)
    marker = tmp_path / "marker"
    data = '{"marker": "%s"}' % marker
    assert lf("run", flow, "--tools", module, "--input", data, "--run-id", "h").code == 1
    plan = lf("retry", "h", "--tools", module, "--dry-run")
    assert plan.code == 0 and "would run 1 recorded step(s) again" in plan.out
    assert "#3  tools.flip" in plan.out and "tools.nope" not in plan.out
    earlier = lf("retry", "h", "--tools", module, "--dry-run", "--from", "2", "--json").json
    assert [s["row"] for s in earlier["would_run_again"]] == [2, 3]
    assert lf("show", "h", "--json").json["status"] == "failed"  # the dry run changed nothing
    marker.write_text("")
    assert lf("retry", "h", "--tools", module).code == 0
    steps = lf("show", "h", "--json").json["steps"]
    assert [len(s["attempt_log"]) for s in steps] == [1, 1, 2]  # only flip ran again
    assert lf("retry", "h", "--tools", module, "--from", "9", "--dry-run").code == 2


def test_a_cancel_says_it_cancelled_and_a_repeated_result_is_no_error(lf: Any,
                                                                       tmp_path: Path) -> None:
    sleepy = tmp_path / "sleepy.lash"
    sleepy.write_text('sleep for "1h"\nfinish 1\n')
    assert lf("run", sleepy, "--run-id", "s").code == 3
    cancelled = lf("cancel", "s", "--reason", "customer withdrew")
    assert cancelled.code == 0 and cancelled.err == ""
    assert cancelled.out.strip() == "run s cancelled (customer withdrew)"
    asking = tmp_path / "asking.lash"
    asking.write_text(APPROVAL_FLOW)
    (tmp_path / "asking.py").write_text(APPROVAL_TOOLS)
    parked = lf("run", asking, "--run-id", "a", "--json")
    [wait] = parked.json["waiting"]
    first = lf("complete", wait["key"], "--result", '{"yes": 1}')
    assert first.code == 0 and first.out.startswith("delivered; run a is waiting")
    assert lf("waiting", "--json").json["waiting"][0]["state"] == "resolved"
    listed = lf("waiting").out
    assert "answered, the run has not resumed yet" in listed and "lashflow resume a" in listed
    assert "lashflow complete" not in listed
    again = lf("complete", wait["key"], "--result", '{"yes": 1}', "--json")
    assert again.code == 0 and again.json["duplicate"] is True
    other = lf("complete", wait["key"], "--result", '{"yes": 2}')
    assert other.code == 2 and "error[completion_already_resolved]" in other.err


APPROVAL_FLOW = 'process a() {\n  x = await tools.approval({})?\n  finish x\n}\n'
APPROVAL_TOOLS = '''
from lashflow import PendingCompletion, ToolCall, ToolResult, tool

@tool
async def approval(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())
'''


def test_fork_lineage_is_shown_and_copied_steps_say_so(lf: Any, tmp_path: Path) -> None:
    flow, module = files(tmp_path)
    marker = tmp_path / "marker"
    marker.write_text("")
    data = '{"marker": "%s"}' % marker
    assert lf("run", flow, "--tools", module, "--input", data, "--run-id", "o").code == 0
    assert lf("fork", "o", "--from", "2", "--set", "1=true", "--run-id", "w",
              "--tools", module).code == 0
    fork = lf("show", "w", "--json").json
    assert fork["forked_from"]["run_id"] == "o" and lf("show", "o", "--json").json["forks"] == ["w"]
    shown = lf("show", "w").out
    assert "forked from run o at step" in shown and "copied" in shown
    assert "+-" not in shown and "forks: w" in lf("show", "o").out
    assert "lashflow output" not in shown  # nothing was cut


LONG_TOOLS = '''
from lashflow import tool

@tool
async def logs() -> str:
    return "\\n".join(f"line {i}" for i in range(400)) + "\\nTHE END"
'''


def test_show_hints_the_real_output_command_only_when_it_cut(lf: Any, tmp_path: Path) -> None:
    (tmp_path / "long_tools.py").write_text(LONG_TOOLS)
    flow = tmp_path / "long.lash"
    flow.write_text("x = await tools.logs({})?\nfinish 1\n")
    assert lf("run", flow, "--tools", tmp_path / "long_tools.py", "--run-id", "t").code == 0
    shown = lf("show", "t").out
    [hint] = [line for line in shown.splitlines() if "lashflow output" in line]
    key = lf("show", "t", "--json").json["steps"][0]["step"]
    assert f"lashflow output t {key}" in hint and "STEP" not in hint
    short = tmp_path / "short.lash"
    short.write_text("finish 1\n")
    assert lf("run", short, "--run-id", "s").code == 0
    assert "lashflow output" not in lf("show", "s").out


def test_serve_takes_its_connection_limits(lf: Any) -> None:
    shown = lf("serve", "--help", env={"COLUMNS": "200"}).out
    for option in ("--head-timeout", "--max-connections", "--trust-proxy"):
        assert option in shown
    bad = lf("serve", "--max-connections", "0")
    assert bad.code == 2


def test_pause_and_unpause_from_the_cli(lfx: Any, tmp_path: Path) -> None:
    sleeper = tmp_path / "sleep.lash"
    sleeper.write_text('sleep for "1h"\nfinish 1\n')
    assert lfx("run", sleeper, "--run-id", "s").code == 3
    paused = lfx("pause", "s", "--reason", "vendor outage")
    assert paused.code == 0 and "paused by " in paused.out and "vendor outage" in paused.out
    listed = lfx("list", "--status", "paused", "--json").json
    [row] = listed["runs"]
    assert row["run_id"] == "s" and row["paused"]["reason"] == "vendor outage"
    assert "vendor outage" in lfx("show", "s").out
    resumed = lfx("resume", "s")
    assert resumed.code == 2 and "error[run_paused]" in resumed.err
    assert lfx("unpause", "s", "--json").json["status"] == "queued"
    again = lfx("unpause", "s")
    assert again.code == 2 and "error[run_not_paused]" in again.err
    assert lfx("resume", "s", "--json").json["status"] == "waiting"


def test_serve_hands_its_connection_limits_to_the_server(tmp_path: Path,
                                                         monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    import lashflow.http.server as server
    from lashflow.cli import app

    handed: dict[str, Any] = {}

    async def serving(**options: Any) -> None:  # the server itself is tested in tests/http
        handed.update(options)

    monkeypatch.setattr(server, "serve", serving)
    done = CliRunner().invoke(app, ["serve", "--head-timeout", "2.5", "--max-connections",
                                    "7", "--port", "0", "--db", str(tmp_path / "s.db")],
                              env={"LASHFLOW_API_TOKEN": "a-long-enough-token-for-the-test"})
    assert done.exit_code == 0, done.output
    config = handed["config"]
    assert (config.head_timeout, config.max_connections) == (2.5, 7)
    defaults = type(config)(config.token)
    assert (defaults.head_timeout, defaults.max_connections) != (2.5, 7)
