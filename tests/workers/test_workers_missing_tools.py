"""A worker that lacks a tool a run needs leaves the run to the others and says so in
``lashflow show``; a worker that has the tool runs it (and the note goes away)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from lashflow.store import open_store
from workers_support import (
    FIVE, TOOLS, Db, Fleet, child_env, create_runs, executions, read_log, wait_all, wait_for,
)


def show(db: Db, log: Path, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "lashflow", "show", run_id, "--db", db.url,
                           *extra], env=child_env(log), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done


async def test_a_worker_without_the_tools_leaves_the_run(db: Db, fleet: Fleet, log: Path,
                                                         tmp_path: Path) -> None:
    # submitted from a machine whose tool file the workers do not have
    elsewhere = tmp_path / "elsewhere" / "tools.py"
    elsewhere.parent.mkdir()
    shutil.copy(TOOLS, elsewhere)
    [run_id] = await create_runs(db.url, FIVE, [{"ms": 0}], "needs", tools=elsewhere)
    elsewhere.unlink()
    bare = fleet.start(poll=0.2, tools=False)
    async with open_store(db.url) as store:
        async def noted() -> bool:
            run = await store.get_run(run_id)
            return run is not None and "note" in run.meta
        await wait_for(noted, fleet, 60, "the bare worker's note")
        shown = json.loads(show(db, log, run_id, "--json").stdout)
        assert shown["status"] == "queued"
        assert shown["note"].startswith("worker ") and "cannot run it" in shown["note"]
        assert "step" in shown["note"]  # the tool it lacks
        assert "note: worker " in show(db, log, run_id).stdout
        able = fleet.start(poll=0.2)
        await wait_all(store, fleet, 1, "finished", timeout=60)
    assert set(fleet.stop().values()) == {0}
    assert "note" not in json.loads(show(db, log, run_id, "--json").stdout)
    calls = executions(read_log(log))
    assert len(calls) == 5 and {found[0].pid for found in calls.values()} == {able.pid}
    assert all(len(found) == 1 for found in calls.values())
    assert f"run {run_id}" not in fleet.output(bare)[0]
