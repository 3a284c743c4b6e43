"""An engine that fails to start leaves nothing running: the process can exit.

Before the fix, ``Engine.__aenter__`` opened the store, then failed on a plugin or a
tool module and never closed it: aiosqlite's connection thread kept the interpreter
alive at exit, so the process hung. Each case runs in a subprocess that must exit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CASES = {
    "two_projectors": (
        "from lashflow import runtime_plugin_stack, ToolOutputBudgetPluginFactory, "
        "ToolOutputBudgetConfig\n"
        "plugins = runtime_plugin_stack().push(ToolOutputBudgetPluginFactory("
        "ToolOutputBudgetConfig(limit=1)))\n"
        "engine = Engine(db=DB, plugins=plugins)\n",
        "plugin_error"),
    "missing_module": ("engine = Engine(db=DB, modules=['no_such_module_here'])\n", "usage_error"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_failed_start_closes_the_store_and_the_process_exits(tmp_path: Path, case: str) -> None:
    setup, code = CASES[case]
    script = textwrap.dedent("""
        import asyncio, sys
        from lashflow import Engine, LashflowError
        DB = sys.argv[1]

        async def main():
        {setup}
            try:
                async with engine:
                    print("started")
            except LashflowError as exc:
                print("refused", exc.code)

        asyncio.run(main())
    """).replace("{setup}", textwrap.indent(setup, "    "))
    try:
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "x.db")],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit: the store's connection thread was left open")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", code]
    assert (tmp_path / "x.db").exists()  # the store had opened before the failure
