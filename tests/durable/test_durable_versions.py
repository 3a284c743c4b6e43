"""Deployed versions: numbered per process with a content hash and the tools' schemas;
runs started by process name run the latest; ``upgrade`` moves only compatible runs, one
atomic write each, keeping the version left; a killed upgrade leaves every run on exactly
one version."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from pydantic import BaseModel

from lashflow import Engine, ToolCall, ToolResult, tool

ROOT = Path(__file__).resolve().parents[2]


@tool
async def quote(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"total": 10})


class Price(BaseModel):
    total: float


class PriceText(BaseModel):
    total: str


@tool(name="quote")
async def quote_typed(sku: str) -> Price:
    return Price(total=10)


@tool(name="quote")
async def quote_text(sku: str) -> PriceText:
    return PriceText(total="10")


V1 = """process fulfill(sku: str) {
  q = tools.quote({ sku: sku })?
  ok = wait_signal("go")
  finish [q, ok]
}
"""
V2 = V1.replace("finish [q, ok]", "finish { q: q, ok: ok, version: 2 }")  # after the wait
V3 = V1.replace("{ sku: sku }", "{ sku: sku, rush: true }")  # changes a recorded step


async def test_versions_run_by_name_and_upgrade_only_where_compatible(tmp_path: Path) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'v.db'}", tools=[quote]) as engine:
        [first] = await engine.deploy(V1)
        assert (first.process, first.version, first.created) == ("fulfill", 1, True)
        assert first.content_hash and "tools.quote" in first.tools
        assert [d.created for d in await engine.deploy(V1)] == [False]  # same content
        run = await engine.run(None, "fulfill", {"sku": "a"})
        assert (await engine.get_record(run.run_id)).meta["version"] == 1

        [second] = await engine.deploy(V2)
        assert second.version == 2
        later = await engine.run(None, "fulfill", {"sku": "b"})  # new runs: the latest
        assert (await engine.get_record(later.run_id)).meta["version"] == 2
        assert (await engine.get_record(run.run_id)).meta["version"] == 1  # stays

        [dry] = await engine.upgrade([run.run_id], dry_run=True)
        assert (dry.verdict, dry.moved, dry.to_version) == ("compatible", False, 2)
        assert (await engine.get_record(run.run_id)).meta["version"] == 1

        await engine.deploy(V3)
        [refused] = await engine.upgrade([run.run_id])  # to 3: the recorded call changed
        assert (refused.verdict, refused.moved) == ("incompatible", False)
        assert "$.rush" in refused.reason
        record = await engine.get_record(run.run_id)
        assert record.meta["version"] == 1 and record.source_hash == first.source_hash

        [moved] = await engine.upgrade([run.run_id], to=2)
        assert (moved.verdict, moved.moved, moved.from_version) == ("compatible", True, 1)
        record = await engine.get_record(run.run_id)
        assert record.meta["version"] == 2 and record.source_hash == second.source_hash
        assert record.meta["previous_versions"][0]["version"] == 1  # to undo it

        await engine.signal(run.run_id, "go", True)
        finished = await engine.resume(run.run_id)
        assert finished.result == {"q": {"total": 10}, "ok": True, "version": 2}  # new code

        [undo_refused] = await engine.upgrade([run.run_id], to=1)
        assert undo_refused.reason == "it has settled" or undo_refused.verdict != "compatible"


async def test_a_tool_output_schema_change_makes_upgrade_refuse(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    async with Engine(db=db, tools=[quote_typed]) as engine:
        await engine.deploy(V1)
        run = await engine.run(None, "fulfill", {"sku": "a"})
    async with Engine(db=db, tools=[quote_text]) as engine:  # the tool's output type changed
        [deployed] = await engine.deploy(V1)
        assert deployed.version == 2  # same source, other tool schemas: a new version
        [refused] = await engine.upgrade([run.run_id])
        assert (refused.verdict, refused.moved) == ("incompatible", False)
        assert "output schema" in refused.reason and "$.total" in refused.reason


KILLER = """
import asyncio, sys
from lashflow import Engine

async def main():
    async with Engine(db=sys.argv[1], modules=[sys.argv[2]]) as engine:
        ids = [line.strip() for line in open(sys.argv[3])]
        print("ready", flush=True)
        await engine.upgrade(ids)
        print("done", flush=True)

asyncio.run(main())
"""


async def test_a_killed_upgrade_leaves_each_run_on_exactly_one_version(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'k.db'}"
    tools = tmp_path / "tools.py"
    tools.write_text(textwrap.dedent("""
        from lashflow import ToolCall, ToolResult, tool

        @tool
        async def quote(call: ToolCall) -> ToolResult:
            return ToolResult.ok({"total": 10})
    """))
    async with Engine(db=db, modules=[str(tools)]) as engine:
        [one] = await engine.deploy(V1)
        ids = [(await engine.run(None, "fulfill", {"sku": str(i)})).run_id for i in range(300)]
        [two] = await engine.deploy(V2)
    (tmp_path / "ids.txt").write_text("\n".join(ids))
    (tmp_path / "killer.py").write_text(KILLER)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(tmp_path / "killer.py"), db, str(tools),
                             str(tmp_path / "ids.txt")], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    # kill it once some runs moved and others have not
    async with Engine(db=db, modules=[str(tools)], create=False, readonly=True) as engine:
        while True:
            moved = sum([(await engine.get_record(i)).meta["version"] == 2 for i in ids[:50]])
            if moved or proc.poll() is not None:
                break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    by_hash = {one.source_hash: 1, two.source_hash: 2}
    async with Engine(db=db, modules=[str(tools)]) as engine:
        versions = []
        for run_id in ids:
            record = await engine.get_record(run_id)
            # the run's code and the version it says it is on agree, whatever the moment
            assert by_hash[record.source_hash] == record.meta["version"], record.meta
            versions.append(record.meta["version"])
        assert 2 in versions
        # the upgrade can simply be run again: it moves the rest, the moved ones stay
        again = await engine.upgrade(ids)
        assert all(u.moved or u.reason == "already on version 2" for u in again)
