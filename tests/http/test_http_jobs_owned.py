"""A bulk job is owned by the service's ``Jobs``: closing it cancels the jobs under way
and returns only once each has ended, so none outlives the engine it writes through."""

from __future__ import annotations

from pathlib import Path

from lashflow import Engine
from lashflow.http.jobs import Jobs


async def test_closing_the_jobs_ends_every_job_before_it_returns(tmp_path: Path) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'jobs.db'}") as engine:
        jobs = Jobs(engine)
        job_id, report = jobs.start("pause", "status=waiting", reason="owned")
        task = jobs._jobs[job_id][1]
        assert not task.done()  # started, not yet run: the loop has not had a turn
        await jobs.close()
        assert task.done()  # cancelled and awaited, not merely asked to stop
