"""The rate-limit routes of the HTTP API (``/v1/ratelimits``): presentation over
``engine.rate_limits``, the same operations as ``lashflow ratelimit set|list|show|delete``
with the same checks and error codes, their bodies and answers as pydantic models (they
make the OpenAPI document)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .errors import path_name

Handler = Callable[[Request], Awaitable[Response]]


class SetRateLimit(BaseModel):
    """Define a named limit, or change its rate (slots already handed out stay)."""

    model_config = ConfigDict(extra="forbid")
    rate: str = Field(description='Calls per period across every worker, e.g. "10/s".')


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class RateLimitAnswer(_Answer):
    """A limit and its state: ``limited_until`` is when its next free slot begins (null:
    a call may start at once); ``tool`` names the tool of a tool's own rate."""

    name: str
    rate: str
    tool: str | None
    calls: int
    delayed: int
    limited_until: float | None


class RateLimitsAnswer(_Answer):
    rate_limits: list[RateLimitAnswer]
    global_slots_held: dict[str, int]


class RateLimitDeleted(_Answer):
    name: str
    deleted: bool


BODIES = (SetRateLimit,)
ANSWERS = (RateLimitAnswer, RateLimitsAnswer, RateLimitDeleted)


class RateLimitRoutes:
    """``body`` reads and validates a request body (the API's own)."""

    def __init__(self, engine: Any, body: Callable[..., Awaitable[Any]]) -> None:
        self.limits = engine.rate_limits
        self.body = body

    def routes(self) -> list[tuple[str, Handler, list[str]]]:
        return [
            ("/v1/ratelimits", self.list, ["GET"]),
            ("/v1/ratelimits/{name}", self.show, ["GET"]),
            ("/v1/ratelimits/{name}", self.set, ["PUT"]),
            ("/v1/ratelimits/{name}", self.delete, ["DELETE"]),
        ]

    async def list(self, request: Request) -> Response:
        infos = await self.limits.list()
        return JSONResponse({"rate_limits": [info.to_json() for info in infos],
                             "global_slots_held": await self.limits.slots()})

    async def show(self, request: Request) -> Response:
        return JSONResponse((await self.limits.get(_name(request))).to_json())

    async def set(self, request: Request) -> Response:
        body: SetRateLimit = await self.body(request, SetRateLimit)
        return JSONResponse((await self.limits.set(_name(request), body.rate)).to_json())

    async def delete(self, request: Request) -> Response:
        await self.limits.delete(_name(request))
        return JSONResponse({"name": _name(request), "deleted": True})


def _name(request: Request) -> str:
    return path_name(request, "unknown_rate_limit", "rate limit")


def openapi_paths(op: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The routes above in the OpenAPI document (``op`` builds one operation)."""
    name = ("name",)
    return {
        "/v1/ratelimits": {
            "get": op("Every rate limit (named ones and tools' own rates) and the global "
                      "concurrency slots held per tool", "RateLimitsAnswer"),
        },
        "/v1/ratelimits/{name}": {
            "get": op("One rate limit: rate, calls, calls that waited, limited until",
                      "RateLimitAnswer", params=name),
            "put": op("Define a named rate limit or change its rate", "RateLimitAnswer",
                      body="SetRateLimit", params=name),
            "delete": op("Forget a named rate limit (its tools' calls wait until it is "
                         "set again)", "RateLimitDeleted", params=name),
        },
    }


__all__ = ["ANSWERS", "BODIES", "RateLimitRoutes", "openapi_paths"]
