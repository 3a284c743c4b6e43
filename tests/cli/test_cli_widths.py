"""Tables read well at any width (the info column gives way first, never the run id or
status), piped output stops quietly when the reader has enough, and `output` takes the
row number `show` prints."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lashflow import Engine
from lashflow.cli.render import Display, render_runs, render_show

LONG_ERROR = "the upstream service answered 503 " * 5


def rich_display(width: int) -> tuple[Display, io.StringIO]:
    display = Display(False)
    out = io.StringIO()
    display.rich = True
    display._console = Console(file=out, width=width, force_terminal=False, color_system=None)
    return display, out


@pytest.mark.parametrize("width", [60, 80, 120])
def test_list_and_show_at_every_width(tmp_path: Path, width: int) -> None:
    async def make() -> tuple[Any, Any]:
        async with Engine(db=f"sqlite:///{tmp_path / 'w.db'}") as engine:
            await engine.run(f'process long_process_name() {{ fail "{LONG_ERROR}" }}',
                             run_id="run_0123456789abcdef")
            await engine.run("finish 1", run_id="run_short")
            return (await engine.runs()).runs, await engine.run_detail("run_0123456789abcdef")

    runs, detail = asyncio.run(make())
    display, out = rich_display(width)
    render_runs(display, runs)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)
    row = next(line for line in lines if "run_0123456789abcdef" in line)
    assert "failed" in row
    assert "finished" in next(line for line in lines if "run_short" in line)
    if width >= 120:
        assert "error" in row  # the info column, given room
    display, out = rich_display(width)
    render_show(display, detail)
    shown = out.getvalue()
    assert "run_0123456789abcdef" in shown and "failed" in shown


def test_piped_list_stops_quietly(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'many.db'}"

    async def make() -> None:
        async with Engine(db=db) as engine:
            for i in range(1000):
                await engine.create("finish 1", run_id=f"run_{i:05d}_" + "x" * 60)

    asyncio.run(make())
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m lashflow list -n 1000 --db '{db}'"
                           " | head -1; echo \"exit=${PIPESTATUS[0]}\""],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[0].split()[:2] == ["RUN", "STATUS"]
    assert done.stdout.splitlines()[-1] == "exit=0"
    assert done.stderr == ""


def test_output_takes_the_row_number(lf: Any, tmp_path: Path) -> None:
    file = tmp_path / "p.lash"
    file.write_text('print("first")\nprint("second")\nfinish 1\n')
    assert lf("run", file, "--run-id", "p").code == 0
    assert lf("output", "p", "2").out == "second\n"
    missing = lf("output", "p", "3")
    assert missing.code == 2 and "error[unknown_step]" in missing.err


LONG_TOOL = '''
from lashflow import tool

@tool(name="request_manager_approval_for_a_large_refund")
async def approval(n: int) -> dict:
    return {"approved": True, "note": "fine " * 40}
'''


def _on_a_terminal(args: list[str], width: int, env: dict[str, str]) -> list[str]:
    """``lashflow ARGS`` on a pseudo-terminal ``width`` columns wide: its lines, plain."""
    import fcntl
    import os
    import pty
    import re
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    environment = dict(env, COLUMNS=str(width), LINES="50", TERM="xterm-256color")
    environment.pop("TTY_COMPATIBLE", None)
    proc = subprocess.Popen([sys.executable, "-m", "lashflow", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=environment, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed: the command exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode())
    return [line for line in text.replace("\r\n", "\n").split("\n")]


def _run_long(tmp_path: Path, cli_env: dict[str, str], run_id: str, source: str) -> None:
    """Run ``source`` (calling the long-named tool) to its end as ``run_id``."""
    (tmp_path / "long_tools.py").write_text(LONG_TOOL)
    flow = tmp_path / "long.lash"
    flow.write_text(source)
    ran = subprocess.run([sys.executable, "-m", "lashflow", "run", str(flow), "--tools",
                          str(tmp_path / "long_tools.py"), "--run-id", run_id],
                         env=cli_env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_show_on_a_terminal_never_wraps_its_fixed_columns(tmp_path: Path, width: int,
                                                         cli_env: dict[str, str]) -> None:
    """At 120 columns `kind`, `state` and `took` printed one letter per line: the
    outcome took the width. Now each step is one line; the outcome shrinks, then moves
    to a line of its own."""
    _run_long(tmp_path, cli_env, "wide",
              "a = await tools.request_manager_approval_for_a_large_refund({n: 1})?\n"
              "b = await tools.request_manager_approval_for_a_large_refund({n: 2})?\n"
              "finish 1\n")
    lines = _on_a_terminal(["show", "wide"], width, cli_env)
    # a command to paste stays whole on its line; everything else fits
    too_long = [line for line in lines if len(line) > width and "lashflow " not in line]
    assert too_long == []
    rows = [line for line in lines if line.lstrip().startswith(("1 ", "2 ")) and " tool " in line]
    assert len(rows) == 2, lines  # one line per step, kind and state on it
    for row in rows:
        assert " ok " in row and " ms" in row and "+" in row
    outcomes = [line for line in lines if '"approved":true' in line]
    assert len(outcomes) == 2
    beside = all(" tool " in line for line in outcomes)
    assert beside == (width >= 200)  # beside the fixed columns only when they leave room


@pytest.mark.parametrize("width", [60, 80, 120])
def test_watch_on_a_terminal_fits_and_ends_with_the_result(tmp_path: Path, width: int,
                                                           cli_env: dict[str, str]) -> None:
    """`lashflow watch` of a finished run: its live view replays the run's events and
    stops at the result; every line fits the terminal, one line per step."""
    _run_long(tmp_path, cli_env, "watched",
              "process p() {\n"
              "  a = await tools.request_manager_approval_for_a_large_refund({n: 1})?\n"
              "  yield {progress: 1}\n"
              "  b = await tools.request_manager_approval_for_a_large_refund({n: 2})?\n"
              "  finish 7\n}\n")
    # a live view redraws in place: each frame starts after a carriage return
    lines = "\n".join(_on_a_terminal(["watch", "watched"], width, cli_env)).replace(
        "\r", "\n").split("\n")
    assert [line for line in lines if len(line) > width] == []
    final = lines[max(i for i, line in enumerate(lines) if line.startswith("run watched")):]
    assert "finished" in final[0] and "2 steps" in final[0]
    rows = [line for line in final if line.lstrip().startswith(("1 ", "2 "))]
    assert len(rows) == 2 and all(" ok " in row for row in rows), final
    assert 'yield {"progress": 1}' in final and "result 7" in final
    piped = subprocess.run([sys.executable, "-m", "lashflow", "watch", "watched", "--json"],
                           env=cli_env, capture_output=True, text=True, timeout=120)
    kinds = [__import__("json").loads(line)["kind"] for line in piped.stdout.splitlines()]
    assert kinds == ["run", "step", "yield", "step", "run"] and piped.returncode == 0


WAITS = '''
process approve(n: int) {
  go = wait_signal("go_ahead_with_the_refund")
  finish go
}

process broken(n: int) {
  fail "the upstream payment service answered 503 and then timed out twice in a row"
}

process quick(n: int) {
  finish n
}
'''
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)")


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[str]]:
    """A database with a waiting, a failed and a finished run (made once: every width
    reads the same runs)."""
    folder = tmp_path_factory.mktemp("three_runs")
    env = dict(os.environ, LASHFLOW_DB=f"sqlite:///{folder / 'cli.db'}")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + \
        env.get("PYTHONPATH", "")
    flow = folder / "flows.lash"
    flow.write_text(WAITS)
    ids = []
    for process in ("approve", "broken", "quick"):
        ran = subprocess.run([sys.executable, "-m", "lashflow", "submit", str(flow), "-p",
                              process, "--input", '{"n": 1}', "--json"],
                             env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        ids.append(json.loads(ran.stdout)["run_id"])
    drove = subprocess.run([sys.executable, "-m", "lashflow", "recover"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert drove.returncode == 0, drove.stderr
    return env, ids


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_list_and_waiting_on_a_terminal(width: int,
                                        three_runs: tuple[dict[str, str], list[str]]) -> None:
    """At 80 columns `list` dropped the info column and cut the time. Now the run id,
    status and time are whole at every width, and the info is there too: beside them
    when it has room, else on the line below."""
    env, ids = three_runs
    lines = _on_a_terminal(["list"], width, env)
    assert [line for line in lines if len(line) > width] == []
    for run_id, status in zip(ids, ("waiting", "failed", "finished")):
        [row] = [line for line in lines if run_id in line]
        assert status in row
    assert len([line for line in lines if ISO_TIME.search(line)]) == 3  # whole times
    assert any("error[" in line for line in lines)  # the failed run's info
    assert any("go_ahead" in line for line in lines)  # what the waiting run waits on

    waiting = _on_a_terminal(["waiting"], width, env)
    assert any(ids[0] in line for line in waiting)  # the run id is never folded
    commands = [line for line in waiting if "lashflow signal" in line]
    assert len(commands) == 1 and ids[0] in commands[0]
    assert [line for line in waiting if len(line) > width and "lashflow " not in line] == []
