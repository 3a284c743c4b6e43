"""Journal fixtures: runs exported from a store replay against the current source, and an
edit that no longer fits them fails with the run, the step, the line and the paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow.testing import assert_replays, exported_runs

ROOT = Path(__file__).resolve().parents[2]
FULFILL = ROOT / "processes" / "fulfill.lash"
ORDER = {"order": {"id": "ord-9", "items": [{"sku": "lamp", "qty": 1, "price": 10.0}],
                   "total": 10.0}}


@pytest.fixture
def recorded(lashflow_env) -> dict:
    """Two runs as `lashflow export` writes them: one parked on its approval, one done."""
    waiting = lashflow_env.run(FULFILL, ORDER)
    done = lashflow_env.run(FULFILL, ORDER)
    lashflow_env.complete(done, "tools.request_approval", {"approved": True})
    return lashflow_env.export(waiting, done)


def test_recorded_runs_replay_against_the_source_they_ran(recorded: dict) -> None:
    assert exported_runs(recorded) == ["run-1", "run-2"]
    verdicts = assert_replays(FULFILL, recorded)
    assert [(v.run_id, v.verdict) for v in verdicts] == [("run-1", "compatible"),
                                                         ("run-2", "compatible")]


def test_an_edit_after_the_parked_step_keeps_the_parked_run(recorded: dict,
                                                           tmp_path: Path) -> None:
    edited = tmp_path / "fulfill.lash"
    edited.write_text(FULFILL.read_text().replace(
        "receipt = await tools.charge({ approval: approved })?",
        "receipt = await tools.charge({ approval: approved, note: \"edited\" })?"))
    assert_replays(edited, recorded, run="run-1")
    with pytest.raises(AssertionError) as caught:
        assert_replays(edited, recorded)
    lines = str(caught.value).splitlines()
    assert lines[0] == f"1 of 2 recorded run(s) no longer replay against {edited}:"
    assert lines[1].startswith("  run run-2 (fulfill, finished): incompatible at step ")
    assert lines[1].endswith(", line 7:19")
    assert "$.note" in lines[2]
    assert lines[3] == '    recorded: tools.charge {"approval": {"approved": true}}'


def test_a_run_the_export_does_not_hold(recorded: dict) -> None:
    with pytest.raises(AssertionError, match=r"the export holds no run 'run-9' \(it holds "
                                             r"run-1, run-2\)"):
        assert_replays(FULFILL, recorded, run="run-9")
