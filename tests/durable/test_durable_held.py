"""ADR 0009: a batch's outcomes are written with the run's next write, which always comes
before its next effect or with its end. Checked from outside: another connection reads
the journal at the moment each effect happens."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from lashflow import Engine, RunStatus, tool

FLOW = """
process main() {
  a = await tools.look({ n: 1 })?
  b = await tools.look({ n: 2 })?
  yield "between"
  c = await tools.look({ n: 3 })?
  total = 0
  for i in range(20000) { total = total + i }
  finish [a, b, c, total]
}
"""

SEEN: list[tuple[int, list[tuple[str, str]]]] = []
DB: list[Path] = []


def journal_outside() -> list[tuple[str, str]]:
    """What a reader in another connection sees: the steps, in order, by kind and status."""
    conn = sqlite3.connect(DB[0])
    try:
        return conn.execute("SELECT kind, status FROM steps ORDER BY seq").fetchall()
    finally:
        conn.close()


@tool
async def look(n: int) -> int:
    SEEN.append((n, journal_outside()))
    return n


def statuses(conn: sqlite3.Connection) -> list[Any]:
    return conn.execute("SELECT status FROM runs").fetchall()


async def test_each_effect_finds_the_previous_outcomes_durable(tmp_path: Path) -> None:
    SEEN.clear()
    DB[:] = [tmp_path / "held.db"]
    async with Engine(db=f"sqlite:///{DB[0]}", tools=[look]) as engine:
        outcome = await engine.run(FLOW)
    assert outcome.status is RunStatus.FINISHED
    assert outcome.result == [1, 2, 3, sum(range(20000))]
    # when call n runs, the n-1 calls before it (and the yield) are already on disk
    assert SEEN[0] == (1, [])
    assert SEEN[1] == (2, [("tool", "done")])
    assert SEEN[2] == (3, [("tool", "done"), ("tool", "done"), ("yield", "done")])
    # the last outcome was written with the end, in one transaction: the final journal
    assert journal_outside() == [("tool", "done")] * 2 + [("yield", "done"), ("tool", "done")]
    conn = sqlite3.connect(DB[0])
    try:
        assert statuses(conn) == [("finished",)]
    finally:
        conn.close()


async def test_a_failure_after_the_last_call_keeps_its_outcome(tmp_path: Path) -> None:
    """The run fails in pure code after its last call: the held outcome is written with
    the failure, so the journal still shows the call done (resume would not re-run it)."""
    SEEN.clear()
    DB[:] = [tmp_path / "fail.db"]
    source = 'process main() {\n  a = await tools.look({ n: 1 })?\n  fail "stop"\n}\n'
    async with Engine(db=f"sqlite:///{DB[0]}", tools=[look]) as engine:
        outcome = await engine.run(source)
    assert outcome.status is RunStatus.FAILED
    assert journal_outside() == [("tool", "done")]
