"""The OpenAPI 3.1 document of the HTTP API, its schemas built from the models of the
request bodies (so the document cannot drift from what the server validates) and of the
answers (every route's answer is checked against its model in the tests)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from .. import __version__
from . import models, queues, ratelimits, schedules

_BODIES = (models.CompletionBody, models.StartRun, models.SignalBody, models.CancelBody,
           models.RunPauseBody, models.BulkBody, models.ErrorBody, *schedules.BODIES,
           *queues.BODIES, *ratelimits.BODIES)
_ANSWERS = (models.CompletionAnswer, models.CompletionInfo, models.RunPage,
            models.RunStatusAnswer, models.RunAnswer, models.StepsAnswer,
            models.StepOutputAnswer, models.SignalAnswer, models.CancelAnswer,
            models.WaitingAnswer, models.HealthAnswer, models.JobAnswer, models.RunEventData,
            *schedules.ANSWERS, *queues.ANSWERS, *ratelimits.ANSWERS)
_METRICS = {"text/plain": {"schema": {"type": "string", "description": "Prometheus text "
                                      "exposition format 0.0.4"}}}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _op(summary: str, answer: str, *, body: str | None = None, token: bool = True,
        params: tuple[str, ...] = (), query: tuple[str, ...] = (),
        ok: int = 200) -> dict[str, Any]:
    """One operation: ``answer`` names the model of its success answer (``metrics``: the
    Prometheus text)."""
    media = "text/event-stream" if answer == "RunEventData" else "application/json"
    content = _METRICS if answer == "metrics" else {media: {"schema": _ref(answer)}}
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {
            str(ok): {"description": "done", "content": content},
            "default": {"description": "refused", "content": {"application/json": {
                "schema": _ref("ErrorBody")}}},
        },
        "parameters": [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                       for p in params]
        + [{"name": q, "in": "query", "required": False, "schema": {"type": "string"}}
           for q in query],
    }
    if body is not None:
        operation["requestBody"] = {"required": body not in ("CancelBody", "SignalBody",
                                                             "PauseBody", "RunPauseBody"),
                                    "content": {"application/json": {"schema": _ref(body)}}}
    operation["security"] = [{"bearer": []}] if token else []
    return operation


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in _BODIES + _ANSWERS:
        schema = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    run = ("run_id",)
    return {
        "openapi": "3.1.0",
        "info": {"title": "lashflow", "version": __version__,
                 "description": "Completion webhooks and the runs API of `lashflow serve`."},
        "paths": {
            "/v1/completions/{key}": {
                "post": _op("Resolve a completion key (the key is the credential)",
                            "CompletionAnswer", body="CompletionBody", token=False,
                            params=("key",)),
                "get": _op("Whether a completion key is still open", "CompletionInfo",
                           token=False, params=("key",)),
            },
            "/v1/runs": {
                "get": _op("Runs, newest first, one page at a time", "RunPage",
                           query=("status", "process", "parent", "queue", "key", "since",
                                  "until", "limit", "cursor")),
                "post": _op("Start a run of a file in the processes directory",
                            "RunStatusAnswer", body="StartRun", ok=202),
            },
            "/v1/runs/bulk": {"post": _op(
                "Start a bulk action (cancel, retry, pause, unpause, gc, upgrade) over "
                "every run a query selects; answers the job at once", "JobAnswer",
                body="BulkBody", ok=202)},
            "/v1/jobs/{job_id}": {"get": _op("A bulk action's progress", "JobAnswer",
                                             params=("job_id",))},
            "/v1/runs/{run_id}": {"get": _op("One run: input, status, result or error, "
                                             "waits, children", "RunAnswer", params=run)},
            "/v1/runs/{run_id}/steps": {"get": _op("The run's journal", "StepsAnswer",
                                                   params=run)},
            "/v1/runs/{run_id}/steps/{step}/output": {
                "get": _op("A step's full, unbudgeted outcome", "StepOutputAnswer",
                           params=run + ("step",))},
            "/v1/runs/{run_id}/signals/{name}": {
                "post": _op("Signal a run", "SignalAnswer", body="SignalBody",
                            params=run + ("name",))},
            "/v1/runs/{run_id}/cancel": {"post": _op("Cancel a run", "CancelAnswer",
                                                     body="CancelBody", params=run)},
            "/v1/runs/{run_id}/retry": {"post": _op("Retry a stopped run", "RunStatusAnswer",
                                                    params=run, ok=202)},
            "/v1/runs/{run_id}/pause": {"post": _op(
                "Pause a run: no worker takes it until it is unpaused", "RunStatusAnswer",
                body="RunPauseBody", params=run)},
            "/v1/runs/{run_id}/unpause": {"post": _op(
                "Put a paused run back in the queue", "RunStatusAnswer", params=run)},
            "/v1/runs/{run_id}/events": {
                "get": _op("The run's events as Server-Sent Events, after Last-Event-ID "
                           "(or ?after=), then live", "RunEventData", params=run,
                           query=("after",))},
            "/v1/events": {
                "get": _op("Every run's (or ?process='s) events as Server-Sent Events, "
                           "after Last-Event-ID (a cursor; ?after=0: from the start), then "
                           "live", "RunEventData", query=("process", "after"))},
            "/v1/waiting": {"get": _op("Every open wait with the command that resolves it",
                                       "WaitingAnswer")},
            "/metrics": {"get": _op("Prometheus text: runs by status, open waits, steps, "
                                    "attempts, journal commits, lease takeovers, schedules' fire lag, "
                                    "missed ticks and skipped overlaps", "metrics")},
            "/healthz": {"get": _op("The server is up", "HealthAnswer", token=False)},
            **schedules.openapi_paths(_op),
            **queues.openapi_paths(_op),
            **ratelimits.openapi_paths(_op),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


__all__ = ["openapi_document"]
