"""A run's stored source and input are checked against the hashes taken when it was
created: edited in the database, they are not run from."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool

CALLS: list[int] = []

FLOW = """
process p(n: int) {
  a = await tools.wait_here({ n: n })?
  b = await tools.count({ n: n })?
  finish b
}
"""


@tool
async def wait_here(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


@tool
async def count(n: int) -> int:
    CALLS.append(n)
    return n


@pytest.mark.parametrize("edit", [
    "UPDATE sources SET text = replace(text, 'finish b', 'finish 0')",
    "UPDATE runs SET input = replace(input, '7', '9')",
])
async def test_an_edited_source_or_input_is_not_run(tmp_path: Path, edit: str) -> None:
    CALLS.clear()
    db = tmp_path / "t.db"
    async with Engine(db=f"sqlite:///{db}", tools=[wait_here, count]) as engine:
        parked = await engine.run(FLOW, input={"n": 7}, run_id="r")
        key = parked.waiting[0].key
        await engine.complete(key, ToolResult.ok(True), resume=False)
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute(edit).rowcount == 1
    conn.close()
    async with Engine(db=f"sqlite:///{db}", tools=[wait_here, count]) as engine:
        outcome = await engine.resume("r")
    assert outcome.status is RunStatus.NEEDS_ATTENTION
    assert outcome.error is not None and outcome.error.code == "journal_corrupt"
    assert "does not match its hash (edited in the database?)" in outcome.error.message
    assert CALLS == []  # nothing ran from the edited run


STEPS = """
process s(n: int) {
  a = await tools.count({ n: 1 })?
  b = await tools.count({ n: 2 })?
  c = await tools.wait_here({ n: n })?
  d = await tools.count({ n: 3 })?
  finish d
}
"""


@pytest.mark.parametrize("edit", [
    "UPDATE steps SET status = 'started' WHERE seq = 1",
])
async def test_an_edited_step_row_is_corruption_not_run_again(
        tmp_path: Path, edit: str) -> None:
    """A step row set back from done to started would have made the call run again; the
    journal is refused instead. (A deleted row is not detected: a crash while a batch
    runs leaves gaps in the step numbers too, so a gap proves nothing.)"""
    CALLS.clear()
    db = tmp_path / "s.db"
    async with Engine(db=f"sqlite:///{db}", tools=[wait_here, count]) as engine:
        parked = await engine.run(STEPS, input={"n": 7}, run_id="r")
        assert CALLS == [1, 2]
        await engine.complete(parked.waiting[0].key, ToolResult.ok(True), resume=False)
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute(edit).rowcount == 1
    conn.close()
    async with Engine(db=f"sqlite:///{db}", tools=[wait_here, count]) as engine:
        outcome = await engine.resume("r")
    assert outcome.status is RunStatus.NEEDS_ATTENTION
    assert outcome.error is not None and outcome.error.code == "journal_corrupt"
    assert CALLS == [1, 2]  # nothing ran again


async def test_a_fan_out_member_missing_is_run_again(tmp_path: Path) -> None:
    """Inside a fan-out a missing member is what a crash mid-batch leaves: it runs."""
    CALLS.clear()
    source = ("process f(n: int) {\n  xs = await [tools.count({ n: i })? for i in range(3)]\n"
              "  w = await tools.wait_here({ n: n })?\n  finish xs\n}\n")
    db = tmp_path / "f.db"
    async with Engine(db=f"sqlite:///{db}", tools=[wait_here, count]) as engine:
        parked = await engine.run(source, input={"n": 7}, run_id="r")
        await engine.complete(parked.waiting[0].key, ToolResult.ok(True), resume=False)
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute("DELETE FROM steps WHERE step_key LIKE '%:1:1'").rowcount == 1
    conn.close()
    CALLS.clear()
    async with Engine(db=f"sqlite:///{db}", tools=[wait_here, count]) as engine:
        outcome = await engine.resume("r")
    assert outcome.status is RunStatus.FINISHED and outcome.result == [0, 1, 2]
    assert CALLS == [1]
