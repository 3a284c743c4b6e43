"""The schedules routes of the HTTP API (``/v1/schedules``): presentation over
``engine.schedules``, with their bodies and answers as pydantic models (they make the
OpenAPI document, and the tests check every answer against its model)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .errors import path_name

Handler = Callable[[Request], Awaitable[Response]]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class ScheduleSpecFields(_Body):
    cron: str | None = Field(None, description="Five fields, or six with seconds first.")
    every: str | None = Field(None, description='An interval such as "30s", "5m", "1h".')
    tz: str | None = Field(None, description="The cron expression's IANA time zone (UTC).")
    jitter: str | None = Field(None, description="Up to this much random delay per tick.")
    overlap: str | None = Field(None, description="skip, buffer-one, buffer-all, "
                                                  "cancel-other or allow (default skip).")
    catchup_window: str | None = Field(None, description="How late a tick may still fire "
                                                         "(default 1m).")
    start: str | None = Field(None, description="RFC 3339: no tick before.")
    end: str | None = Field(None, description="RFC 3339: no tick at or after.")

    def options(self) -> dict[str, Any]:
        return {key: value for key, value in self.model_dump().items()
                if key in ScheduleSpecFields.model_fields and value is not None}


class CreateSchedule(ScheduleSpecFields):
    """A new schedule of a process file from the server's processes directory."""

    name: str
    file: str = Field(description="A .lash file, relative to the server's --processes dir.")
    process: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)


class UpdateSchedule(ScheduleSpecFields):
    """Change the spec (``cron`` replaces ``every`` and the reverse) or what it starts."""

    file: str | None = None
    process: str | None = None
    input: dict[str, Any] | None = None


class PauseBody(_Body):
    note: str | None = None


class BackfillBody(_Body):
    from_: str = Field(alias="from", description="RFC 3339: the first tick included.")
    to: str = Field(description="RFC 3339: ticks before this.")


class ScheduleRun(_Answer):
    run_id: str
    status: str
    created_at: float


class ScheduleAnswer(_Answer):
    """A schedule: its spec, next fire times (in its zone), counts and latest runs."""

    name: str
    spec: dict[str, Any]
    describe: str
    process: str | None
    file: str | None
    input: Any
    paused: bool
    note: str | None
    next_fires: list[str]
    last_run: str | None
    fired: int
    missed: int
    skipped: int
    buffered: int
    runs: list[ScheduleRun]


class SchedulesAnswer(_Answer):
    schedules: list[ScheduleAnswer]


class TriggerAnswer(_Answer):
    run_id: str
    schedule: str


class BackfillAnswer(_Answer):
    started: int
    buffered: int
    skipped: int


class DeletedAnswer(_Answer):
    name: str
    deleted: bool


BODIES = (CreateSchedule, UpdateSchedule, PauseBody, BackfillBody)
ANSWERS = (ScheduleAnswer, SchedulesAnswer, TriggerAnswer, BackfillAnswer, DeletedAnswer)


class ScheduleRoutes:
    """``body`` reads and validates a request body; ``process_file`` resolves a file name
    inside the processes directory (both the API's own)."""

    def __init__(self, engine: Any, body: Callable[..., Awaitable[Any]],
                 process_file: Callable[[str], Any]) -> None:
        self.engine = engine
        self.body = body
        self.process_file = process_file

    def routes(self) -> list[tuple[str, Handler, list[str]]]:
        return [
            ("/v1/schedules", self.list, ["GET"]),
            ("/v1/schedules", self.create, ["POST"]),
            ("/v1/schedules/{name}", self.show, ["GET"]),
            ("/v1/schedules/{name}", self.update, ["PATCH"]),
            ("/v1/schedules/{name}", self.delete, ["DELETE"]),
            ("/v1/schedules/{name}/pause", self.pause, ["POST"]),
            ("/v1/schedules/{name}/resume", self.resume, ["POST"]),
            ("/v1/schedules/{name}/trigger", self.trigger, ["POST"]),
            ("/v1/schedules/{name}/backfill", self.backfill, ["POST"]),
        ]

    async def list(self, request: Request) -> Response:
        infos = await self.engine.schedules.list()
        return JSONResponse({"schedules": [info.to_json() for info in infos]})

    async def create(self, request: Request) -> Response:
        body: CreateSchedule = await self.body(request, CreateSchedule)
        path = self.process_file(body.file)
        info = await self.engine.schedules.create(body.name, path, body.process,
                                                  input=body.input, **body.options())
        return JSONResponse(info.to_json(), status_code=201)

    async def show(self, request: Request) -> Response:
        return JSONResponse((await self.engine.schedules.get(_name(request))).to_json())

    async def update(self, request: Request) -> Response:
        body: UpdateSchedule = await self.body(request, UpdateSchedule)
        path = None if body.file is None else self.process_file(body.file)
        info = await self.engine.schedules.update(_name(request), path, body.process,
                                                  input=body.input, **body.options())
        return JSONResponse(info.to_json())

    async def delete(self, request: Request) -> Response:
        await self.engine.schedules.delete(_name(request))
        return JSONResponse({"name": _name(request), "deleted": True})

    async def pause(self, request: Request) -> Response:
        body: PauseBody = await self.body(request, PauseBody, empty_ok=True)
        return JSONResponse((await self.engine.schedules.pause(_name(request),
                                                               body.note)).to_json())

    async def resume(self, request: Request) -> Response:
        return JSONResponse((await self.engine.schedules.resume(_name(request))).to_json())

    async def trigger(self, request: Request) -> Response:
        run_id = await self.engine.schedules.trigger(_name(request))
        return JSONResponse({"run_id": run_id, "schedule": _name(request)}, status_code=202)

    async def backfill(self, request: Request) -> Response:
        body: BackfillBody = await self.body(request, BackfillBody)
        report = await self.engine.schedules.backfill(_name(request), body.from_, body.to)
        return JSONResponse({"started": report.started, "buffered": report.buffered,
                             "skipped": report.skipped}, status_code=202)


def _name(request: Request) -> str:
    return path_name(request, "unknown_schedule", "schedule")


def openapi_paths(op: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The routes above in the OpenAPI document (``op`` builds one operation)."""
    name = ("name",)
    return {
        "/v1/schedules": {
            "get": op("Every schedule", "SchedulesAnswer"),
            "post": op("Make a schedule of a file in the processes directory",
                       "ScheduleAnswer", body="CreateSchedule", ok=201),
        },
        "/v1/schedules/{name}": {
            "get": op("One schedule: next fire times, counts, latest runs", "ScheduleAnswer",
                      params=name),
            "patch": op("Change a schedule's spec or what it starts", "ScheduleAnswer",
                        body="UpdateSchedule", params=name),
            "delete": op("Delete a schedule (its runs stay)", "DeletedAnswer", params=name),
        },
        "/v1/schedules/{name}/pause": {"post": op("Pause a schedule", "ScheduleAnswer",
                                                  body="PauseBody", params=name)},
        "/v1/schedules/{name}/resume": {"post": op("Resume a schedule", "ScheduleAnswer",
                                                   params=name)},
        "/v1/schedules/{name}/trigger": {"post": op("Start a run now", "TriggerAnswer",
                                                    params=name, ok=202)},
        "/v1/schedules/{name}/backfill": {"post": op(
            "A run for every tick in a past range, under the overlap policy",
            "BackfillAnswer", body="BackfillBody", params=name, ok=202)},
    }


__all__ = ["ANSWERS", "BODIES", "ScheduleRoutes", "openapi_paths"]
