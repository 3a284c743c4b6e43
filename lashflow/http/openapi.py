"""The OpenAPI 3.1 document of the HTTP API, its schemas built from the pydantic models
of the request bodies (so the document cannot drift from what the server validates)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .. import __version__
from .models import CancelBody, CompletionBody, ErrorBody, SignalBody, StartRun

_MODELS = (CompletionBody, StartRun, SignalBody, CancelBody, ErrorBody)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _op(summary: str, *, body: str | None = None, token: bool = True,
        params: tuple[str, ...] = (), query: tuple[str, ...] = (),
        ok: int = 200) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {
            str(ok): {"description": "done", "content": {"application/json": {
                "schema": {"type": "object"}}}},
            "default": {"description": "refused", "content": {"application/json": {
                "schema": _ref("ErrorBody")}}},
        },
        "parameters": [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                       for p in params]
        + [{"name": q, "in": "query", "required": False, "schema": {"type": "string"}}
           for q in query],
    }
    if body is not None:
        operation["requestBody"] = {"required": body != "CancelBody" and body != "SignalBody",
                                    "content": {"application/json": {"schema": _ref(body)}}}
    operation["security"] = [{"bearer": []}] if token else []
    return operation


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in _MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
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
                            body="CompletionBody", token=False, params=("key",)),
                "get": _op("Whether a completion key is still open", token=False,
                           params=("key",)),
            },
            "/v1/runs": {
                "get": _op("Runs, newest first, one page at a time",
                           query=("status", "process", "parent", "since", "until", "limit",
                                  "cursor")),
                "post": _op("Start a run of a file in the processes directory",
                            body="StartRun", ok=202),
            },
            "/v1/runs/{run_id}": {"get": _op("One run: input, status, result or error, "
                                             "waits, children", params=run)},
            "/v1/runs/{run_id}/steps": {"get": _op("The run's journal", params=run)},
            "/v1/runs/{run_id}/steps/{step}/output": {
                "get": _op("A step's full, unbudgeted outcome", params=run + ("step",))},
            "/v1/runs/{run_id}/signals/{name}": {
                "post": _op("Signal a run", body="SignalBody", params=run + ("name",))},
            "/v1/runs/{run_id}/cancel": {"post": _op("Cancel a run", body="CancelBody",
                                                     params=run)},
            "/v1/runs/{run_id}/retry": {"post": _op("Retry a stopped run", params=run,
                                                    ok=202)},
            "/v1/waiting": {"get": _op("Every open wait with the command that resolves it")},
            "/metrics": {"get": _op("Prometheus text: runs by status, open waits, steps, "
                                    "attempts, journal commits, lease takeovers")},
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


__all__ = ["openapi_document"]
