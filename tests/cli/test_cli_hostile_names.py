"""Names from a workflow or a user (run ids, signal names, labels) are data: a printed
resolve command pasted into a shell runs nothing else, and terminal escape sequences
are shown, never sent to the terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from lashflow.lang.graph import build_graph, to_mermaid

WAITS = 'process p() signals { go: any } {\n  x = wait_signal("go")\n  finish x\n}\n'


def test_a_pasted_resolve_command_runs_nothing_else(lf: Any, tmp_path: Path,
                                                    db_url: str) -> None:
    file = tmp_path / "waits.lash"
    file.write_text(WAITS)
    run_id = "r; touch pwned_by_id"
    ran = lf("run", file, "--run-id", run_id, "--json")
    assert ran.code == 3, ran
    [wait] = ran.json["waiting"]
    command = wait["resolve"].replace("<json>", '"ok"')
    assert command.startswith("lashflow signal ")
    pasted = f"{sys.executable} -m lashflow" + command[len("lashflow"):]
    done = subprocess.run(["bash", "-c", pasted], cwd=tmp_path, capture_output=True, text=True,
                          env={"LASHFLOW_DB": db_url, "PATH": "/usr/bin:/bin",
                               "LASHFLOW_CACHE_DIR": str(tmp_path / "cache")}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("pwned*"))
    shown = lf("show", run_id, "--json").json
    assert shown["status"] == "finished" and shown["result"] == "ok"


def test_escape_sequences_in_names_are_shown_not_sent(lf: Any, tmp_path: Path) -> None:
    file = tmp_path / "waits.lash"
    file.write_text(WAITS)
    run_id = "evil\x1b[2J\x1b[31mred"
    assert lf("run", file, "--run-id", run_id).code == 3
    for args in (["list"], ["show", run_id], ["waiting"], ["cancel", run_id]):
        ran = lf(*args)
        assert ran.code == 0, (args, ran)
        for stream in (ran.out, ran.err):
            assert "\x1b" not in stream and "\x07" not in stream, (args, stream)
        assert "\\x1b[2J" in ran.out, (args, ran.out)


def test_mermaid_labels_keep_no_raw_carriage_return() -> None:
    source = 'process p() signals { go: any } { x = wait_signal("g\ro")\n finish x }\n'
    text = to_mermaid(build_graph(source))
    assert "\r" not in text and "wait_signal" in text
