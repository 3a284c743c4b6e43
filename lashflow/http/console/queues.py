"""The console's queues page: every queue with its limits, runs waiting and running, the
oldest waiting run and its rate state, and the forms that pause and resume one
(CSRF-checked like every console form); below them every rate limit of tools (named
ones and tools' own rates) with its calls and until when it holds calls back, and the
global concurrency slots each tool holds now."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


class QueuePages:
    """``console``: the console's ``page``/``form`` guards, ``render`` and ``back``."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.queues = console.engine.queues

    def routes(self) -> list[Route]:
        console = self.console
        return [
            Route("/queues", console.page(self.list)),
            Route("/queues/{name}/pause", console.form(self.pause), methods=["POST"]),
            Route("/queues/{name}/resume", console.form(self.resume), methods=["POST"]),
        ]

    async def list(self, request: Request) -> Response:
        from ...durable.queues import format_rate

        infos = await self.queues.list()
        limits = self.console.engine.rate_limits
        return self.console.render(request, "queues.html", queues=infos, rate=format_rate,
                                   limits=await limits.list(), slots=await limits.slots(),
                                   done=request.query_params.get("done", ""))

    async def pause(self, request: Request, form: Any) -> Response:
        name = request.path_params["name"]
        await self.queues.pause(name)
        return self.console.back("/queues?" + urlencode({"done": f"{name} paused"}))

    async def resume(self, request: Request, form: Any) -> Response:
        name = request.path_params["name"]
        await self.queues.resume(name)
        return self.console.back("/queues?" + urlencode({"done": f"{name} resumed"}))


__all__ = ["QueuePages"]
