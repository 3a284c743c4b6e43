"""Values that JSON text cannot carry are refused where they come in, with input_invalid
and their JSON path, before anything is written.

Found here: a lone surrogate in a run input, a signal payload or a completion result
crashed with internal_error (UnicodeEncodeError on the journal write), and a deeply
nested input crashed with RecursionError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import InputInvalid

ECHO = "process p(x: any) {\n  finish x\n}\n"
GATE = 'process g() {\n  d = wait_signal("go")\n  finish d\n}\n'


def _deep(levels: int) -> dict:
    value: dict = {"x": None}
    cursor = value
    for _ in range(levels):
        cursor["x"] = {"x": None}
        cursor = cursor["x"]
    return value


@pytest.mark.parametrize("given, message", [
    ({"x": "a\ud800b"}, "$.x: a lone surrogate (\\ud800) is not Unicode text"),
    ({"x": {"\udc00": 1}}, "$.x (a key): a lone surrogate (\\udc00) is not Unicode text"),
    ({"x": ["ok", "\udfff"]}, "$.x[1]: a lone surrogate (\\udfff) is not Unicode text"),
])
async def test_a_lone_surrogate_in_the_input_is_refused(db_url: str, given: dict,
                                                        message: str) -> None:
    async with Engine(db=db_url) as engine:
        with pytest.raises(InputInvalid) as info:
            await engine.run(ECHO, input=given, process="p")
        assert info.value.message == message
        assert (await engine.runs()).runs == []  # nothing was written


async def test_nesting_is_bounded_and_walked_without_recursion(db_url: str) -> None:
    async with Engine(db=db_url) as engine:
        with pytest.raises(InputInvalid) as info:
            await engine.run(ECHO, input={"x": _deep(5000)}, process="p")
        assert info.value.message.endswith(": nested deeper than 256 levels")
        fine = await engine.run(ECHO, input={"x": _deep(200)}, process="p")
        assert fine.status is RunStatus.FINISHED


async def test_signal_payloads_and_completion_results_are_checked_too(db_url: str) -> None:
    @tool
    async def park(call: ToolCall) -> ToolResult:
        await call.context.completion_key()
        return ToolResult.pending(PendingCompletion())

    async with Engine(db=db_url, tools=[park]) as engine:
        gated = await engine.run(GATE, process="g")
        with pytest.raises(InputInvalid):
            await engine.signal(gated.run_id, "go", {"note": "\ud800"})
        assert (await engine.signal(gated.run_id, "go", "fine")) is RunStatus.FINISHED
        parked = await engine.run("x = await tools.park({})?\nfinish x")
        key = parked.waiting[0].key
        with pytest.raises(InputInvalid):
            await engine.complete(key, ToolResult.ok("\udc80"))
        assert await engine.complete(key, ToolResult.ok("fine")) is RunStatus.FINISHED


def test_deep_json_on_the_command_line_is_input_invalid(tmp_path: Path,
                                                        cli_env: dict[str, str]) -> None:
    import subprocess
    import sys

    (tmp_path / "echo.lash").write_text(ECHO)
    (tmp_path / "deep.json").write_text('{"x": ' + "[" * 5000 + "]" * 5000 + "}")
    done = subprocess.run([sys.executable, "-m", "lashflow", "run", str(tmp_path / "echo.lash"),
                           "--input", f"@{tmp_path / 'deep.json'}"], env=cli_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error[input_invalid]: --input is nested too deep to read")


async def test_a_tool_output_with_a_lone_surrogate_is_a_failed_call(db_url: str) -> None:
    """Found here: the journal write of such an output crashed the engine mid-run."""
    @tool
    async def garbled(call: ToolCall) -> ToolResult:
        return ToolResult.ok({"text": "caf\udce9"})

    async with Engine(db=db_url, tools=[garbled]) as engine:
        kept = await engine.run("x = await tools.garbled({})\nfinish x")
        assert kept.status is RunStatus.FINISHED
        assert kept.result == {"ok": False, "error": "the tool's output is not JSON data: "
                               "$.text: a lone surrogate (\\udce9) is not Unicode text"}
        [step] = await engine.steps(kept.run_id)
        assert step.state == "failed"
        unwrapped = await engine.run("x = await tools.garbled({})?\nfinish x")
        assert unwrapped.status is RunStatus.FAILED
        assert "not Unicode text" in unwrapped.error.message


def test_the_store_never_writes_nan_or_infinity() -> None:
    """The safety net behind the doors: a NaN or an infinity that got past them is
    refused at the write, never stored as text no JSON reader takes."""
    from lashflow.store.rows import dumps

    for value in (float("nan"), {"x": [float("inf")]}, -float("inf")):
        with pytest.raises(InputInvalid) as info:
            dumps(value)
        assert "nothing was written" in info.value.message


async def test_a_nan_stored_by_an_older_version_reads_as_null(tmp_path: Path) -> None:
    """Rows an older version wrote with NaN kept every read of them failing (500 on
    HTTP, invalid JSON from show --json): they read as null now."""
    import json
    import sqlite3

    db = tmp_path / "old.db"
    async with Engine(db=f"sqlite:///{db}") as engine:
        await engine.run(ECHO, input={"x": 1}, process="p", run_id="old")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET result = '{\"v\": NaN, \"w\": [Infinity]}', "
                     "meta = '{\"note\": -Infinity}' WHERE run_id = 'old'")
    conn.close()
    async with Engine(db=f"sqlite:///{db}") as engine:
        outcome = await engine.get("old")
        detail = await engine.run_detail("old")
    assert outcome.result == {"v": None, "w": [None]}
    json.dumps(outcome.to_json(), allow_nan=False)
    json.dumps(detail.to_json(), allow_nan=False)
