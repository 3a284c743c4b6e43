"""What the tests of the HTTP API's resource routes (queues, schedules, rate limits) and
of the console's pages share: an engine served through httpx's ASGI transport, the check
that each route answers its model in the OpenAPI document, and a console sign-in."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
from pydantic import TypeAdapter

from lashflow import Engine
from lashflow.http import ServeConfig, create_app

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
T0 = 1_800_000_000.0


@contextlib.asynccontextmanager
async def api_client(engine: Engine, processes: Path | None = None, *,
                     drive: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``engine``'s HTTP API (no socket: the ASGI app in this process)."""
    app = create_app(engine, ServeConfig(TOKEN, processes, drive=drive))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://lashflow") as client:
        yield client


async def answer_each_route(client: httpx.AsyncClient, prefix: str,
                            calls: list[tuple[str, str, str, Any]],
                            models: Any) -> dict[tuple[str, str], Any]:
    """Make each call (method, documented path, url, body) in order: together they must
    be every operation the OpenAPI document has under ``prefix``, each must answer the
    success status documented, with a body its model (in ``models``) accepts. The
    answers by (method, path)."""
    doc = (await client.get("/openapi.json", headers=AUTH)).json()
    answers = {(method.upper(), path): operation for path, operations in doc["paths"].items()
               for method, operation in operations.items() if path.startswith(prefix)}
    assert {(method, path) for method, path, _, _ in calls} == set(answers)
    seen = {}
    for method, path, url, body in calls:
        answer = await client.request(method, url, headers=AUTH, json=body)
        [(status, success)] = [(s, r) for s, r in answers[method, path]["responses"].items()
                               if s.startswith("2")]
        assert answer.status_code == int(status), (url, answer.text)
        name = success["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        TypeAdapter(getattr(models, name)).validate_python(answer.json())
        seen[method, path] = answer.json()
    return seen


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


@contextlib.asynccontextmanager
async def console_client(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``engine``'s console, signed in (its pages redirect to the sign-in
    before: checked here once for all)."""
    app = create_app(engine, ServeConfig(TOKEN))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://console") as client:
        assert (await client.get("/runs")).headers["location"] == "/login"
        login = await client.get("/login")
        await client.post("/login", data={"token": TOKEN, "csrf": csrf_of(login.text)})
        yield client
