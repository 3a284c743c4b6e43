"""Statuses read back as the enum members (one lookup per row, ADR 0042), whether they
were written as members or as the text a caller typed; a status in a row that is none of
them is a corrupt row, named in one line, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from lashflow.errors import JournalCorrupt
from lashflow.states import AttemptStatus, RunStatus, StepStatus
from lashflow.store import (AttemptRecord, Commit, RunChange, RunQuery, RunRecord, StepRecord,
                            Store)


def _run(run_id: str, status: Any) -> RunRecord:
    """``status`` a member or, as a caller may hand it, its text."""
    return RunRecord(run_id, "src", "main", {}, "in", status)


async def test_statuses_read_back_as_members(store: Store) -> None:
    await store.create_run(_run("members", RunStatus.QUEUED))
    await store.create_run(_run("texts", "queued"))
    claimed = await store.claim_run("members", "me", 30.0, 1.0)
    assert claimed is not None
    await store.commit(Commit("members", claimed.run.generation, steps=[
        StepRecord("members", "s:1", "tool", "t.a", None, StepStatus.DONE, {"status": "ok"})],
        attempts=[AttemptRecord("members", "s:1", 1, AttemptStatus.OK, started_at=1.0,
                                finished_at=2.0)],
        run=RunChange(RunStatus.WAITING, updated_at=2.0)))
    for run_id in ("members", "texts"):
        run = await store.get_run(run_id)
        assert run is not None and type(run.status) is RunStatus
    run = await store.get_run("members")
    assert run is not None and run.status is RunStatus.WAITING
    steps, attempts = await store.load_journal("members")
    assert [type(s.status) for s in steps] == [StepStatus]
    assert [a.status for a in attempts] == [AttemptStatus.OK]
    assert type(attempts[0].status) is AttemptStatus
    page = await store.query_runs(RunQuery())
    assert {type(summary.status) for summary in page.runs} == {RunStatus}


async def test_a_run_status_that_is_no_status_is_a_corrupt_row(store: Store, backend: Any) -> None:
    await store.create_run(_run("edited", RunStatus.QUEUED))
    await backend.tamper("UPDATE {runs} SET status = 'finshed' WHERE run_id = ?", "edited")
    with pytest.raises(JournalCorrupt) as caught:
        await store.get_run("edited")
    assert "run edited: its status 'finshed' in the runs table is not a run status" \
        in caught.value.message
