"""The hardening tests' replay check can fail: a finished run whose journal lost a step,
or whose stored result differs from what replaying its journal gives, is reported."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hardening_support import ENGINE_TOOLS, replay_problems
from lashflow import Engine, RunStatus

SOURCE = """
a = tools.echo({ i: 1 })?
b = tools.echo({ i: 2 })?
finish [a, b]
"""


async def finished(db: Path) -> None:
    async with Engine(db=str(db), tools=ENGINE_TOOLS) as engine:
        assert (await engine.run(SOURCE, run_id="r")).status is RunStatus.FINISHED
        assert await replay_problems(engine.store, "r") == []


async def problems_after(db: Path, sql: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    async with Engine(db=str(db), tools=ENGINE_TOOLS) as engine:
        return [p.rule for p in await replay_problems(engine.store, "r")]


async def test_a_lost_step_is_reported(tmp_path: Path) -> None:
    await finished(tmp_path / "j.db")
    assert await problems_after(tmp_path / "j.db",
                                "DELETE FROM steps WHERE run_id = 'r' AND seq = 2") \
        == ["missing_step"]


async def test_a_result_replay_does_not_give_is_reported(tmp_path: Path) -> None:
    await finished(tmp_path / "j.db")
    assert await problems_after(tmp_path / "j.db",
                                "UPDATE runs SET result = '[1, 3]' WHERE run_id = 'r'") \
        == ["result"]
