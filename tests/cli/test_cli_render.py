"""Terminal rendering: rich tables when stdout is a terminal (forced here with rich's own
``TTY_COMPATIBLE=1``), plain lines otherwise, and the live status fed by engine events."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable

from lashflow.cli.live import LiveStatus
from lashflow.cli.render import preview, seconds

Lf = Callable[..., Any]
TERMINAL = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": "160"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    return ANSI.sub("", text)


def test_show_is_a_timeline_table_on_a_terminal(lf: Lf, example: Any) -> None:
    file, data = example("retry")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    out = plain(lf("show", run_id, env=TERMINAL).out)
    header = next(line for line in out.splitlines() if line.startswith("#  step"))
    assert re.split(r"\s{2,}", header.strip()) == ["#", "step", "kind", "tool", "state",
                                                   "tries", "took", "at", "outcome"]
    legacy = next(line for line in out.splitlines() if "tools.legacy_rates" in line)
    cells = re.split(r"\s{2,}", legacy.strip())
    assert cells[4:6] == ["exhausted", "4"] and cells[6].endswith("ms")
    assert cells[7].startswith("+") and cells[8].startswith("legacy rates service refused")
    assert out.splitlines()[0].startswith(f"✔ finished  run {run_id}  process convert")


def test_waiting_table_and_numbered_commands(lf: Lf, example: Any) -> None:
    file, data = example("fulfill")
    parked = lf("run", file, "--input", data, "--json").json
    out = plain(lf("waiting", env=TERMINAL).out)
    assert "waits on" in out and parked["run_id"] in out
    assert "completion key for tools.request_approval" in out
    [command] = [line for line in out.splitlines() if line.strip().startswith("#1")]
    # never wrapped; with --db, the test's database not being the default one
    assert command.strip().startswith(f"#1  {parked['waiting'][0]['resolve']} --db ")


def test_list_table(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    lf("run", file, "--input", data, "--run-id", "t-1")
    out = plain(lf("list", env=TERMINAL).out)
    assert "┃" in out and "t-1" in out and "restock" in out and "1 run(s)" in out


def test_run_on_a_terminal_pretty_prints_the_result(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    out = plain(lf("run", file, "--input", data, env=TERMINAL).out)
    first, *rest = out.splitlines()
    assert first.startswith("✔ finished  run run_") and " in " in first
    assert rest[0] == "{" and '  "reservation": {' in rest


def test_json_wins_over_a_terminal(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    ran = lf("run", file, "--input", data, "--json", env=TERMINAL)
    assert ran.json["status"] == "finished" and "\x1b" not in ran.out


def test_live_status_follows_engine_events() -> None:
    live = LiveStatus(enabled=False, label="run x.lash")
    live.on_event({"type": "tools", "run_id": "r", "tools": ["tools.a", "tools.a", "tools.b"]})
    text = live.text()
    assert text.startswith("run x.lash driving · 0 step(s) recorded · in flight: ")
    assert "tools.a x2 (" in text and "tools.b (" in text
    live.on_event({"type": "step", "run_id": "r", "step": "s:1:0", "kind": "tool",
                   "tool": "tools.a", "status": "started"})  # an attempt start: still flying
    assert "tools.a x2" in live.text()
    for tool in ("tools.a", "tools.a", "tools.b"):
        live.on_event({"type": "step", "run_id": "r", "step": "s:1", "kind": "tool",
                       "tool": tool, "status": "done"})
    live.on_event({"type": "step", "run_id": "child", "step": "t:1", "kind": "sleep",
                   "tool": None, "status": "pending"})
    live.set_phase("sleeping until later", until=time.time() + 5)
    text = live.text()
    assert "in flight" not in text and "3 step(s) recorded" in text and "2 runs" in text
    assert "last: sleep pending" in text and " left" in text
    live.on_event({"type": "run", "run_id": "r", "status": "finished"})
    assert "elapsed" in live.text()


def test_live_status_is_off_without_a_terminal_or_with_json() -> None:
    assert LiveStatus.for_command(as_json=True).enabled is False
    with LiveStatus.for_command(as_json=False) as live:  # pytest's stderr: not a terminal
        assert live.enabled is False and live._live is None


def test_small_formatters() -> None:
    assert seconds(None) == "-" and seconds(0.0004) == "0.4 ms" and seconds(0.25) == "250 ms"
    assert seconds(2.5) == "2.50 s" and seconds(125) == "2m 05s" and seconds(7300) == "2h 01m"
    long = {"text": "word " * 500}
    cell = preview(long, 60)
    assert len(cell) <= 60 and cell.endswith("…")
    assert preview("a\nb\n  c") == "a b c"
    assert preview(None) == ""


def test_plain_output_has_no_escape_codes(lf: Lf, example: Any, tmp_path: Path) -> None:
    file, data = example("retry")
    ran = lf("run", file, "--input", data)
    run_id = ran.out.split()[1]
    for args in (["show", run_id], ["list"], ["waiting"]):
        assert "\x1b" not in lf(*args).out
