"""Exported runs: a versioned document with no completion key, replayed by
``lashflow.testing.Replayer`` with the classification ``verify`` gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lashflow import Engine, ToolCall, ToolResult, tool
from lashflow.errors import UsageError
from lashflow.testing import Replayer


@tool
async def lookup(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"sku": call.input["sku"], "stock": 3})


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending()


SOURCE = """
process restock(sku: str) {
  item = tools.lookup({ sku: sku })?
  ok = tools.approve({ sku: sku, stock: item.stock })?
  finish ok
}
"""


async def parked_export(tmp_path: Path) -> tuple[str, dict, list[str]]:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Engine(db=db, tools=[lookup, approve]) as engine:
        ids = []
        for sku in ("a", "b"):
            outcome = await engine.run(SOURCE, "restock", {"sku": sku})
            assert outcome.status.value == "waiting"
            assert outcome.waiting[0].key.startswith("lfk_")
            ids.append(outcome.run_id)
        return db, await engine.export(ids), ids


async def test_an_export_is_versioned_and_holds_no_completion_key(tmp_path: Path) -> None:
    _, document, ids = await parked_export(tmp_path)
    assert (document["format"], document["version"]) == ("lashflow-runs", 1)
    assert [run["run_id"] for run in document["runs"]] == ids
    run = document["runs"][0]
    assert run["source"] == SOURCE and run["input"] == {"sku": "a"}
    assert [step["kind"] for step in run["steps"]] == ["tool", "tool"]
    assert run["steps"][1]["status"] == "pending"
    assert "lfk_" not in json.dumps(document)


async def test_the_replayer_classifies_exported_runs_as_verify_does(tmp_path: Path) -> None:
    db, document, ids = await parked_export(tmp_path)
    fixture = tmp_path / "runs.json"
    fixture.write_text(json.dumps(document))
    same = Replayer(SOURCE).replay(fixture)
    assert [(v.run_id, v.verdict) for v in same] == [(ids[0], "compatible"), (ids[1], "compatible")]
    assert "waits for step" in same[0].reason

    edited = SOURCE.replace("stock: item.stock", "stock: item.stock, rush: true")
    verdicts = Replayer(edited, tools=[lookup, approve]).replay(document)
    assert [v.verdict for v in verdicts] == ["incompatible", "incompatible"]
    assert verdicts[0].paths == ["$.rush"] and verdicts[0].line == 4
    # the same, from the database (read-only), with the engine's own verification
    from_db = Replayer(edited, tools=[lookup, approve]).replay(ids, db=db)
    assert [v.to_json() for v in from_db] == [v.to_json() for v in verdicts]
    assert "lfk_" not in json.dumps([v.to_json() for v in from_db])  # no key in a verdict


def test_a_document_that_is_no_export_is_refused_with_one_clear_error(tmp_path: Path) -> None:
    for bad, why in [({"format": "other"}, "format"), ({"format": "lashflow-runs", "version": 9},
                                                       "version 9"),
                     ('{"format": "lashflow-runs", "version": 1, "runs": [{}]}', "run 1")]:
        with pytest.raises(UsageError, match=why) as caught:
            Replayer(SOURCE).replay(bad)
        assert caught.value.code == "bad_export"
