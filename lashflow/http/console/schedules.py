"""The console's schedules page: every schedule with its next fire time, counts and
last run, and the forms that pause, resume and trigger one (CSRF-checked like every
console form)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


class SchedulePages:
    """``console``: the console's ``page``/``form`` guards, ``render`` and ``back``."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.schedules = console.engine.schedules

    def routes(self) -> list[Route]:
        console = self.console
        return [
            Route("/schedules", console.page(self.list)),
            Route("/schedules/{name}/pause", console.form(self.pause), methods=["POST"]),
            Route("/schedules/{name}/resume", console.form(self.resume), methods=["POST"]),
            Route("/schedules/{name}/trigger", console.form(self.trigger), methods=["POST"]),
        ]

    async def list(self, request: Request) -> Response:
        infos = await self.schedules.list()
        return self.console.render(request, "schedules.html", schedules=infos,
                                   done=request.query_params.get("done", ""),
                                   started=request.query_params.get("run", ""))

    async def pause(self, request: Request, form: Any) -> Response:
        name = request.path_params["name"]
        await self.schedules.pause(name, str(form.get("note", "")).strip() or None)
        return self.console.back("/schedules?" + urlencode({"done": f"{name} paused"}))

    async def resume(self, request: Request, form: Any) -> Response:
        name = request.path_params["name"]
        await self.schedules.resume(name)
        return self.console.back("/schedules?" + urlencode({"done": f"{name} resumed"}))

    async def trigger(self, request: Request, form: Any) -> Response:
        name = request.path_params["name"]
        run_id = await self.schedules.trigger(name)
        return self.console.back("/schedules?" + urlencode({"done": f"{name} triggered",
                                                            "run": run_id}))


__all__ = ["SchedulePages"]
