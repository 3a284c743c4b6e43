"""The ASGI application of ``lashflow serve``: completion webhooks and the runs API.

Every route is presentation over the engine's public and read API (ADR 0013). The
webhook route is authorised by the completion key itself (a capability URL); every
other ``/v1`` route needs the management token as a bearer token.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import LashflowError
from ..json_input import read_json
from ..json_kinds import MAX_INPUT_DEPTH
from ..tools import ToolResult
from ..tools.validation import condensed
from .connections import DEFAULT_HEAD_TIMEOUT, DEFAULT_MAX_CONNECTIONS
from .credentials import check_token, client_of
from .errors import HttpError, error_response
from .headers import AnswerHeaders
from .jobs import Jobs, job_json
from .models import BulkBody, CancelBody, CompletionBody, RunPauseBody, SignalBody, StartRun
from .openapi import openapi_document
from .queues import QueueRoutes
from .ratelimits import RateLimitRoutes
from .schedules import ScheduleRoutes
from .sse import feed_stream, run_stream
from .throttle import Throttle

log = logging.getLogger("lashflow.http")

DEFAULT_BODY_LIMIT = 1024 * 1024


@dataclass(slots=True)
class ServeConfig:
    """``token``: the management bearer token; ``processes``: the only directory runs
    may be started from; ``body_limit``: the largest request body accepted (bytes);
    ``drive``: move a run on here at once after a delivery (the server runs a worker);
    ``console``: ``full`` (the web console at ``/``), ``inbox`` (only its inbox, and no
    management API: for the people who approve) or ``off``. ``head_timeout``: seconds a
    client has to send a request's head (line and headers) before the server answers 408
    and closes; ``max_connections``: connections open at once (503 beyond);
    ``trusted_proxies``: the addresses (comma-separated, ``*`` for any) of reverse proxies
    whose ``X-Forwarded-For`` names the client; None: the header is ignored, so a client
    cannot pose as another (and escape its backoff for wrong tokens) by sending one."""

    token: str
    processes: Path | None = None
    body_limit: int = DEFAULT_BODY_LIMIT
    drive: bool = True
    console: str = "full"
    head_timeout: float = DEFAULT_HEAD_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    trusted_proxies: str | None = None


Handler = Callable[[Request], Awaitable[Response]]


def create_app(engine: Any, config: ServeConfig) -> Starlette:
    """The application over an open ``Engine`` (the caller opens and closes it)."""
    check_token(config.token)
    throttle = Throttle(engine.clock.now)
    api = _Api(engine, config, throttle)
    managed = [
        ("/v1/runs", api.list_runs, ["GET"]),
        ("/v1/runs", api.start_run, ["POST"]),
        ("/v1/runs/bulk", api.start_bulk, ["POST"]),
        ("/v1/jobs/{job_id}", api.job, ["GET"]),
        ("/v1/runs/{run_id}", api.get_run, ["GET"]),
        ("/v1/runs/{run_id}/steps", api.get_steps, ["GET"]),
        ("/v1/runs/{run_id}/events", api.run_events, ["GET"]),
        ("/v1/events", api.feed, ["GET"]),
        ("/v1/runs/{run_id}/steps/{step}/output", api.get_output, ["GET"]),
        ("/v1/runs/{run_id}/signals/{name}", api.signal, ["POST"]),
        ("/v1/runs/{run_id}/cancel", api.cancel, ["POST"]),
        ("/v1/runs/{run_id}/retry", api.retry, ["POST"]),
        ("/v1/runs/{run_id}/pause", api.pause, ["POST"]),
        ("/v1/runs/{run_id}/unpause", api.unpause, ["POST"]),
        ("/v1/waiting", api.waiting, ["GET"]),
        ("/metrics", api.metrics, ["GET"]),
        *ScheduleRoutes(engine, api.body, api._process_file).routes(),
        *QueueRoutes(engine, api.body).routes(),
        *RateLimitRoutes(engine, api.body).routes(),
    ]
    routes: list[Any] = [
        Route("/v1/completions/{key}", _guarded(api.complete), methods=["POST"]),
        Route("/v1/completions/{key}", _guarded(api.completion_state), methods=["GET"]),
        Route("/healthz", _guarded(api.health), methods=["GET"]),
    ]
    if config.console != "inbox":
        routes += [Route("/openapi.json", _guarded(api.openapi), methods=["GET"]),
                   *(Route(path, _guarded(api.authorised(handler)), methods=methods)
                     for path, handler, methods in managed)]
    if config.console != "off":
        from .console import Console, ConsoleConfig, Sessions

        console = ConsoleConfig(config.token, inbox_only=config.console == "inbox")
        routes += Console(engine, console, throttle, Sessions(engine.store),
                          api.jobs).routes()
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_exception},
                    middleware=[Middleware(AnswerHeaders)])
    app.state.jobs = api.jobs  # their owner: `serve` cancels and awaits them when it stops
    return app


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "bad_request")
    return error_response(code, str(exc.detail))


def _guarded(handler: Handler) -> Handler:
    """Every refusal as ``{"error": {...}}``; a bug as a 500 with no details leaked."""
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except HttpError as exc:
            return error_response(exc.code, exc.message, exc.headers,
                                  {"path": exc.path} if exc.path else None)
        except LashflowError as exc:
            return error_response(exc.code, exc.message, where=_where(exc))
        except Exception:  # noqa: BLE001 - a bug: logged here, one line to the client
            log.exception("internal error on %s %s", request.method, request.url.path)
            return error_response("internal_error", "lashflow failed on this request; the "
                                  "server log has the details")
    return run


class _Api:
    def __init__(self, engine: Any, config: ServeConfig, throttle: Throttle) -> None:
        self.engine = engine
        self.config = config
        self.throttle = throttle
        self._token = config.token.encode()
        self.jobs = Jobs(engine)

    # -- plumbing ------------------------------------------------------------------------
    def authorised(self, handler: Handler) -> Handler:
        """The bearer token checked; a client that got it wrong too often waits first."""
        async def check(request: Request) -> Response:
            offered = request.headers.get("authorization")
            client = client_of(request)
            if offered is not None:
                wait = self.throttle.wait_left(client)
                if wait:
                    raise HttpError("too_many_attempts", "too many wrong tokens from this "
                                    f"address: try again in {wait} s", **{"Retry-After": str(wait)})
            scheme, _, given = (offered or "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                    given.strip().encode(), self._token):
                if offered is not None:
                    self.throttle.missed(client)
                raise HttpError("unauthorized", "this route needs the management token: "
                                "Authorization: Bearer <token>", **{"WWW-Authenticate": "Bearer"})
            self.throttle.passed(client)
            return await handler(request)
        return check

    async def body(self, request: Request, model: type[BaseModel], *,
                   empty_ok: bool = False) -> Any:
        """The JSON body as ``model``, read up to the limit (413 beyond it)."""
        limit = self.config.body_limit
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HttpError("body_too_large", f"the body is over the limit of {limit} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError("body_too_large", f"the body is over the limit of {limit} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip() and empty_ok:
            return model()
        # one level more than a run input may have: the body wraps the input (or result)
        data = read_json(raw, "the body", max_depth=MAX_INPUT_DEPTH + 1)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise HttpError("input_invalid", condensed(exc).replace("\n", "; ")) from None

    # -- webhooks --------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        telemetry = self.engine.telemetry
        if telemetry is None or telemetry.tracing is None:
            return await self._complete(request)
        # the sender's trace goes on: its `traceparent` is this span's parent, and the
        # drive the delivery starts here is this span's child
        with telemetry.tracing.request(request.headers, "lashflow.completion"):
            return await self._complete(request)

    async def _complete(self, request: Request) -> Response:
        key = request.path_params["key"]
        body: CompletionBody = await self.body(request, CompletionBody)
        result = (ToolResult.err(body.error) if "error" in body.model_fields_set
                  else ToolResult.ok(body.result))
        delivery = await self.engine.deliver(key, result, resume=self.config.drive,
                                             background=True)
        return JSONResponse({"run_id": delivery.run_id, "status": delivery.status.value,
                             "duplicate": delivery.duplicate})

    async def completion_state(self, request: Request) -> Response:
        info = await self.engine.completion(request.path_params["key"])
        if info is None:
            raise HttpError("unknown_completion_key", "unknown completion key")
        return JSONResponse(info.to_json())

    # -- runs ------------------------------------------------------------------------------
    async def list_runs(self, request: Request) -> Response:
        q = request.query_params
        try:
            limit = int(q.get("limit", "50"))
        except ValueError:
            raise HttpError("usage_error", "limit must be a number") from None
        statuses = [s for s in q.get("status", "").split(",") if s]
        page = await self.engine.runs(status=statuses, process=q.get("process"),
                                      parent=q.get("parent"), since=_moment(q.get("since")),
                                      until=_moment(q.get("until")), limit=limit,
                                      cursor=q.get("cursor"), queue=q.get("queue"),
                                      key=q.get("key"))
        return JSONResponse(page.to_json())

    async def start_run(self, request: Request) -> Response:
        body: StartRun = await self.body(request, StartRun)
        path = self._process_file(body.file)
        if all(option is None for option in (body.queue, body.key, body.priority,
                                             body.dedup_id, body.debounce, body.singleton)):
            run_id = (await self.engine.start(path, body.process, body.input,
                                              body.run_id)).run_id
        else:  # a run of a queue waits there for a worker, as `lashflow submit --queue`
            run_id = (await self.engine.create(
                path, body.process, body.input, body.run_id, queue=body.queue, key=body.key,
                priority=body.priority, dedup_id=body.dedup_id, debounce=body.debounce,
                debounce_keep=body.debounce_keep, singleton=body.singleton)).run_id
        outcome = await self.engine.get(run_id)
        return JSONResponse({"run_id": run_id, "status": outcome.status.value},
                            status_code=202)

    def _process_file(self, name: str) -> Path:
        """A file inside the processes directory, never any other path."""
        root = self.config.processes
        if root is None:
            raise HttpError("usage_error", "this server starts no runs: it was started "
                            "without --processes DIR")
        if "\x00" in name:  # no file is named so; the file system would raise
            raise HttpError("input_invalid", "$.file: a file name holds no NUL", path="$.file")
        base = root.resolve()
        try:
            path = (base / name).resolve()
            usable = path.is_relative_to(base) and path.suffix == ".lash" and path.is_file()
        except (OSError, ValueError):  # a name the file system refuses
            usable = False
        if not usable:
            raise HttpError("unknown_process_file",
                            f"no process file {name!r} in the server's processes directory")
        return path

    async def get_run(self, request: Request) -> Response:
        detail = await self.engine.run_detail(request.path_params["run_id"])
        data = detail.to_json()
        data.pop("steps", None)
        return JSONResponse(data)

    async def get_steps(self, request: Request) -> Response:
        detail = await self.engine.run_detail(request.path_params["run_id"])
        if detail.journal_error is not None:
            raise HttpError(detail.journal_error.code, detail.journal_error.message)
        return JSONResponse({"steps": [step.to_json() for step in detail.steps]})

    async def run_events(self, request: Request) -> Response:
        return await run_stream(self.engine, request)

    async def feed(self, request: Request) -> Response:
        return await feed_stream(self.engine, request)

    async def get_output(self, request: Request) -> Response:
        run_id, wanted = request.path_params["run_id"], request.path_params["step"]
        for step in await self.engine.steps(run_id):
            if step.step_key == wanted:
                return JSONResponse({"run_id": run_id, "step": step.step_key,
                                     "kind": step.kind, "tool": step.tool,
                                     "status": step.status, "outcome": step.outcome})
        raise HttpError("unknown_step", f"run {run_id} has no step {wanted!r}")

    async def signal(self, request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params["name"]
        body: SignalBody = await self.body(request, SignalBody, empty_ok=True)
        status = await self.engine.signal(run_id, name, body.payload, resume=False)
        if self.config.drive:
            await self.engine.drive_soon(run_id)
        return JSONResponse({"run_id": run_id, "signal": name, "status": status.value})

    async def cancel(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body: CancelBody = await self.body(request, CancelBody, empty_ok=True)
        before = (await self.engine.get(run_id)).status
        status = await self.engine.cancel(run_id, body.reason)
        return JSONResponse({"run_id": run_id, "status": status.value,
                             "already_settled": before.settled})

    async def retry(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        outcome = await self.engine.retry(run_id, wait=not self.config.drive)
        return JSONResponse({"run_id": run_id, "status": outcome.status.value},
                            status_code=202)

    async def pause(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body: RunPauseBody = await self.body(request, RunPauseBody, empty_ok=True)
        status = await self.engine.pause(run_id, body.reason,
                                         by=body.by or f"api ({client_of(request)})")
        return JSONResponse({"run_id": run_id, "status": status.value})

    async def unpause(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        status = await self.engine.unpause(run_id)
        if self.config.drive:
            await self.engine.drive_soon(run_id)
        return JSONResponse({"run_id": run_id, "status": status.value})

    async def start_bulk(self, request: Request) -> Response:
        body: BulkBody = await self.body(request, BulkBody)
        by = body.by or f"api ({client_of(request)})"
        job_id, report = self.jobs.start(body.action, body.where, dry_run=body.dry_run,
                                         reason=body.reason, by=by, to=body.to)
        return JSONResponse(job_json(job_id, report), status_code=202)

    async def job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return JSONResponse(job_json(job_id, self.jobs.get(job_id)))

    async def waiting(self, request: Request) -> Response:
        waits = await self.engine.waiting()
        return JSONResponse({"waiting": [dict(w.to_json(), run_id=r) for r, w in waits]})

    # -- open routes ----------------------------------------------------------------------
    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def metrics(self, request: Request) -> Response:
        return Response(await self.engine.metrics_text(),
                        media_type="text/plain; version=0.0.4; charset=utf-8")


def _where(exc: LashflowError) -> dict[str, str]:
    """The JSON path and the hint of a refusal, when it has them (as the CLI's ``--json``)."""
    hint = getattr(exc, "hint", None) or exc.details.get("hint")
    found = {"path": exc.details.get("path"), "hint": hint}
    return {key: str(value) for key, value in found.items() if value}


def _moment(text: str | None) -> float | None:
    """``since``/``until``: epoch seconds or ISO 8601."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise HttpError("usage_error", f"{text!r} is neither epoch seconds nor ISO 8601") from None


__all__ = ["DEFAULT_BODY_LIMIT", "ServeConfig", "create_app"]
