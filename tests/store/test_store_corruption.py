"""One corruption test for both backends: a journal row edited by hand (or broken by a
bad disk) is reported the same way by SQLite and PostgreSQL, through the engine and
through ``lashflow show``, and never replayed as if it were true.

The database is edited outside lashflow with the backend's own driver, after the run
has parked on a completion key with two recorded steps before it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lashflow import Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import JournalCorrupt
from lashflow.store.check import check_store

ROOT = Path(__file__).resolve().parents[2]
CALLS: dict[str, int] = {}

PROCESS = """
process p(n: int) {
  a = await tools.small({ i: 1 })?
  b = await tools.big({ i: 2 })?
  c = await tools.park({ i: 3 })?
  finish [a.i, len(b), c]
}
"""


@tool
async def small(call: ToolCall) -> ToolResult:
    CALLS["small"] = CALLS.get("small", 0) + 1
    return ToolResult.ok({"i": call.input["i"]})


@tool
async def big(call: ToolCall) -> ToolResult:
    CALLS["big"] = CALLS.get("big", 0) + 1
    return ToolResult.ok("y" * 100_000)  # above the blob threshold: stored as a blob


@tool
async def park(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


TOOLS = [small, big, park]

# name -> (the step it breaks: its seq, the hand edit)
EDITS: dict[str, tuple[int, str]] = {
    "garbage": (1, "UPDATE {steps} SET outcome = 'x' || outcome WHERE run_id = ? AND seq = 1"),
    "truncated": (1, "UPDATE {steps} SET outcome = substr(outcome, 1, 12) "
                     "WHERE run_id = ? AND seq = 1"),
    "changed_value": (1, "UPDATE {steps} SET outcome = replace(outcome, '\"i\":1', '\"i\":7') "
                         "WHERE run_id = ? AND seq = 1"),
    "null_outcome": (1, "UPDATE {steps} SET outcome = NULL WHERE run_id = ? AND seq = 1"),
    "bad_detail": (1, "UPDATE {steps} SET detail = '{{\"crc\":' WHERE run_id = ? AND seq = 1"),
    "checksum_removed": (1, "UPDATE {steps} SET detail = replace(detail, '\"crc\":', '\"crx\":') "
                            "WHERE run_id = ? AND seq = 1"),
    "blob_edited": (2, "UPDATE {blobs} SET data = replace(data, 'yyy', 'yzy') WHERE hash IN "
                       "(SELECT blob FROM {steps} WHERE run_id = ? AND seq = 2)"),
    "blob_hash_changed": (2, "UPDATE {steps} SET blob = 'ab' || substr(blob, 3) "
                             "WHERE run_id = ? AND seq = 2"),
    "blob_missing": (2, "DELETE FROM {blobs} WHERE hash IN "
                        "(SELECT blob FROM {steps} WHERE run_id = ? AND seq = 2)"),
}


def _show(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LASHFLOW_DB=url)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "lashflow", "show", "r", *args],
                          capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)


@pytest.mark.parametrize("edit", sorted(EDITS))
async def test_a_hand_edited_journal_is_reported_alike_and_never_replayed(backend, edit: str
                                                                           ) -> None:
    CALLS.clear()
    async with Engine(db=backend.url, tools=TOOLS) as engine:
        parked = await engine.run(PROCESS, input={"n": 1}, run_id="r")
        assert parked.status is RunStatus.WAITING
        key = parked.waiting[0].key
    seq, sql = EDITS[edit]
    [(step_key,)] = await backend.tamper("SELECT step_key FROM {steps} WHERE run_id = ? AND "
                                         "seq = ?", "r", seq)
    await backend.tamper(sql, "r")
    before = dict(CALLS)

    async with Engine(db=backend.url, tools=TOOLS) as engine:
        with pytest.raises(JournalCorrupt) as info:
            await engine.steps("r")
        assert info.value.code == "journal_corrupt"
        assert info.value.message.startswith(f"run r: the journal row of step {step_key} is "
                                             "corrupt (")
        detail = await engine.run_detail("r")
        assert detail is not None and detail.steps == []
        assert detail.journal_error is not None and detail.journal_error.code == "journal_corrupt"
        problems = await check_store(engine.store)
        assert [p.step_key for p in problems] == [step_key]
        # delivering the key drives the run: it stops in needs_attention, replays nothing
        assert await engine.complete(key, ToolResult.ok("late")) is RunStatus.NEEDS_ATTENTION
        record = await engine.get_record("r")
        assert record.error is not None and record.error["code"] == "journal_corrupt"
        assert (await engine.resume("r")).status is RunStatus.NEEDS_ATTENTION
    assert CALLS == before  # no tool ran again on the strength of a bad row

    shown = _show(backend.url)
    assert shown.returncode == 2, shown.stderr
    assert shown.stdout.startswith("run r: needs_attention")
    assert shown.stderr.startswith(f"error[journal_corrupt]: run r: the journal row of step "
                                   f"{step_key} is corrupt")
    assert "Traceback" not in shown.stderr
