"""Bulk actions over HTTP: ``POST /v1/runs/bulk`` starts one as a job and answers at
once; ``GET /v1/jobs/{id}`` reads its progress (ADR 0032).

Jobs live in the serving process (the last ``KEEP`` of them): a job's report is the
engine's ``BulkReport``, updated after every page of runs. A server restarted mid-job
loses the job, not the work done: every bulk action is safe to start again (a run it
already changed no longer matches, or is skipped).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from typing import Any

from ..errors import NotFound

KEEP = 100


class UnknownJob(NotFound):
    code = "unknown_job"


class Jobs:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._jobs: OrderedDict[str, tuple[Any, asyncio.Task[Any]]] = OrderedDict()

    def start(self, action: str, where: str, *, dry_run: bool = False,
              reason: str | None = None, by: str | None = None,
              to: int | None = None) -> tuple[str, Any]:
        """Start the action (a bad action or expression is refused here, before any
        work); the job's id and its live report."""
        bulk = self.engine.bulk_actions
        report, query = bulk.plan(action, where, dry_run)
        task = asyncio.get_running_loop().create_task(
            bulk.run(report, query, reason=reason, by=by, to=to))
        task.add_done_callback(_retrieved)
        job_id = f"job_{secrets.token_hex(8)}"
        self._jobs[job_id] = (report, task)
        over = len(self._jobs) - KEEP  # forget the oldest finished ones, never a running one
        for old in [j for j, (_, t) in self._jobs.items() if t.done()][:max(0, over)]:
            del self._jobs[old]
        return job_id, report

    def get(self, job_id: str) -> Any:
        found = self._jobs.get(job_id)
        if found is None:
            raise UnknownJob(f"no job {job_id!r} on this server (jobs are kept in the "
                             f"serving process, the last {KEEP})")
        return found[0]

    async def close(self) -> None:
        """Cancel the jobs under way and wait for them to end (each owns its writes)."""
        tasks = [task for _, task in self._jobs.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _retrieved(task: asyncio.Task[Any]) -> None:
    """The report holds a failure (``state``, ``error``); nothing is left unretrieved."""
    if not task.cancelled():
        task.exception()


def job_json(job_id: str, report: Any) -> dict[str, Any]:
    return {"job_id": job_id, **report.to_json()}


__all__ = ["Jobs", "KEEP", "UnknownJob", "job_json"]
