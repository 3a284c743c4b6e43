"""The queues routes of the HTTP API (``/v1/queues``): presentation over
``engine.queues``, with their bodies and answers as pydantic models (they make the
OpenAPI document, and the tests check every answer against its model)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .errors import path_name

Handler = Callable[[Request], Awaitable[Response]]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class QueueLimits(_Body):
    concurrency: int | None = Field(None, description="Runs driven at once, all workers.")
    concurrency_per_key: int | None = Field(None, description="Runs of one key at once.")
    rate: str | None = Field(None, description='Starts per period, e.g. "20/s".')
    rate_per_key: str | None = Field(None, description="Starts of one key per period.")
    priority_levels: int | None = Field(None, description="Priorities 1 (first) to this.")
    fair: bool | None = Field(None, description="Weighted round robin across keys.")
    weights: dict[str, float] | None = Field(None, description="Key -> weight under fair.")

    def given(self) -> dict[str, Any]:
        """The fields the request named (null included: it clears a limit)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class CreateQueue(QueueLimits):
    """A new queue."""

    name: str


class UpdateQueue(QueueLimits):
    """Change the limits named (null clears one); the others stay."""


class QueueAnswer(_Answer):
    """A queue: its limits and what it holds now."""

    name: str
    concurrency: int | None
    concurrency_per_key: int | None
    rate: str | None
    rate_per_key: str | None
    priority_levels: int
    fair: bool
    paused: bool
    weights: dict[str, float]
    waiting: int
    running: int
    waiting_by_priority: dict[str, int]
    waiting_by_key: dict[str, int]
    running_by_key: dict[str, int]
    oldest_waiting_since: float | None
    rate_limited_until: float | None
    keys_rate_limited: int


class QueuesAnswer(_Answer):
    queues: list[QueueAnswer]


class QueueDeleted(_Answer):
    name: str
    deleted: bool


BODIES = (CreateQueue, UpdateQueue)
ANSWERS = (QueueAnswer, QueuesAnswer, QueueDeleted)


class QueueRoutes:
    """``body`` reads and validates a request body (the API's own)."""

    def __init__(self, engine: Any, body: Callable[..., Awaitable[Any]]) -> None:
        self.engine = engine
        self.body = body

    def routes(self) -> list[tuple[str, Handler, list[str]]]:
        return [
            ("/v1/queues", self.list, ["GET"]),
            ("/v1/queues", self.create, ["POST"]),
            ("/v1/queues/{name}", self.show, ["GET"]),
            ("/v1/queues/{name}", self.update, ["PATCH"]),
            ("/v1/queues/{name}", self.delete, ["DELETE"]),
            ("/v1/queues/{name}/pause", self.pause, ["POST"]),
            ("/v1/queues/{name}/resume", self.resume, ["POST"]),
        ]

    async def list(self, request: Request) -> Response:
        infos = await self.engine.queues.list()
        return JSONResponse({"queues": [info.to_json() for info in infos]})

    async def create(self, request: Request) -> Response:
        body: CreateQueue = await self.body(request, CreateQueue)
        options = {key: value for key, value in body.given().items()
                   if key != "name" and value is not None}
        info = await self.engine.queues.create(body.name, **options)
        return JSONResponse(info.to_json(), status_code=201)

    async def show(self, request: Request) -> Response:
        return JSONResponse((await self.engine.queues.get(_name(request))).to_json())

    async def update(self, request: Request) -> Response:
        body: UpdateQueue = await self.body(request, UpdateQueue)
        info = await self.engine.queues.update(_name(request), **body.given())
        return JSONResponse(info.to_json())

    async def delete(self, request: Request) -> Response:
        await self.engine.queues.delete(_name(request))
        return JSONResponse({"name": _name(request), "deleted": True})

    async def pause(self, request: Request) -> Response:
        return JSONResponse((await self.engine.queues.pause(_name(request))).to_json())

    async def resume(self, request: Request) -> Response:
        return JSONResponse((await self.engine.queues.resume(_name(request))).to_json())


def _name(request: Request) -> str:
    return path_name(request, "unknown_queue", "queue")


def openapi_paths(op: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The routes above in the OpenAPI document (``op`` builds one operation)."""
    name = ("name",)
    return {
        "/v1/queues": {
            "get": op("Every queue: limits, runs waiting and running", "QueuesAnswer"),
            "post": op("Make a queue", "QueueAnswer", body="CreateQueue", ok=201),
        },
        "/v1/queues/{name}": {
            "get": op("One queue: limits, depth by priority and key, running per key, "
                      "rate-limit state", "QueueAnswer", params=name),
            "patch": op("Change a queue's limits", "QueueAnswer", body="UpdateQueue",
                        params=name),
            "delete": op("Delete a queue (its runs stay)", "QueueDeleted", params=name),
        },
        "/v1/queues/{name}/pause": {"post": op("Pause a queue: none of its runs starts",
                                               "QueueAnswer", params=name)},
        "/v1/queues/{name}/resume": {"post": op("Resume a queue", "QueueAnswer",
                                                params=name)},
    }


__all__ = ["ANSWERS", "BODIES", "QueueRoutes", "openapi_paths"]
