"""Tables read well at any width (the info column gives way first, never the run id or
status), piped output stops quietly when the reader has enough, and `output` takes the
row number `show` prints."""

from __future__ import annotations

import asyncio
import io
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
