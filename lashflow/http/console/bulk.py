"""The console's bulk actions: the runs page selects runs by a query, the preview shows
how many match and how many the action applies to (a dry run), and only a confirmed
form starts the action, as a job whose page shows its progress (ADR 0032)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...durable.bulk import ACTIONS
from ...errors import UsageError
from ..credentials import client_of


class BulkPages:
    """``console``: the console's ``page``/``form`` guards, ``render`` and ``back``;
    ``jobs``: the server's bulk jobs (shared with ``/v1/jobs``)."""

    def __init__(self, console: Any, jobs: Any) -> None:
        self.console = console
        self.jobs = jobs

    def routes(self) -> list[Route]:
        console = self.console
        return [
            Route("/runs/bulk/preview", console.form(self.preview), methods=["POST"]),
            Route("/runs/bulk", console.form(self.start), methods=["POST"]),
            Route("/jobs/{job_id}", console.page(self.job)),
        ]

    @staticmethod
    def _fields(form: Any) -> tuple[str, str, str | None]:
        action = str(form.get("action", ""))
        if action not in ACTIONS:
            raise UsageError(f"choose an action: {', '.join(ACTIONS)}")
        reason = str(form.get("reason", "")).strip() or None
        return action, str(form.get("where", "")), reason

    async def preview(self, request: Request, form: Any) -> Response:
        """The count, changing nothing: what the confirm button would act on."""
        action, where, reason = self._fields(form)
        report = await self.console.engine.bulk(action, where, dry_run=True)
        return self.console.render(request, "bulk.html", report=report, action=action,
                                   where=where, reason=reason or "")

    async def start(self, request: Request, form: Any) -> Response:
        action, where, reason = self._fields(form)
        job_id, _ = self.jobs.start(action, where, reason=reason,
                                    by=f"console ({client_of(request)})")
        return self.console.back(f"/jobs/{quote(job_id)}")

    async def job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return self.console.render(request, "job.html", job_id=job_id,
                                   report=self.jobs.get(job_id))


__all__ = ["BulkPages"]
