"""Running ``lashflow serve``: an engine, its worker loop and uvicorn, stopped in order.

SIGTERM or Ctrl-C: uvicorn stops accepting and finishes the requests in flight, then
the worker loop drains (runs in flight go back to ``queued`` at their next effect, as
``lashflow worker`` does) and the engine closes its store.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Callable

import uvicorn

from ..durable.engine import Engine
from ..durable.events import Listener
from . import logs
from .app import ServeConfig, create_app
from .connections import guarded_protocol
from .credentials import check_token


async def serve(*, host: str, port: int, db: str | None, tools: list[str],
                config: ServeConfig, concurrency: int | None,
                announce: Callable[[str], None],
                listener: Listener | None = None) -> None:
    check_token(config.token)  # before a database is opened or made
    async with Engine(db=db, modules=tools, telemetry=True) as engine:
        if listener is not None:
            engine.listeners.append(listener)
        app = create_app(engine, config)
        server = uvicorn_server(app, host, port, config)
        # after uvicorn configured its loggers: no completion key reaches a log line
        logs.install("uvicorn.access", "uvicorn.error", "lashflow", "lashflow.http",
                     secrets=(config.token,))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # uvicorn takes these while it serves and hands them back here when it ends
            loop.add_signal_handler(sig, stop.set)
        work = (loop.create_task(engine.work(concurrency, stop=stop)) if config.drive
                else None)
        announcing = loop.create_task(_announce_when_up(server, announce))
        try:
            await server.serve()
        finally:
            announcing.cancel()
            await asyncio.gather(announcing, return_exceptions=True)
            await app.state.jobs.close()  # a bulk job under way stops before the store closes
            stop.set()
            if work is not None:
                await work
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


def uvicorn_server(app: Any, host: str, port: int, config: ServeConfig) -> uvicorn.Server:
    """uvicorn serving ``app`` with the limits of ``config``: a request head must arrive
    within ``head_timeout`` seconds, at most ``max_connections`` are open at once."""
    return uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, lifespan="off", log_level="info", server_header=False,
        http=guarded_protocol(config.head_timeout, config.max_connections),
        # uvicorn believes X-Forwarded-For from loopback by default: only from the
        # proxies the operator names, else a local client could pose as any other
        proxy_headers=config.trusted_proxies is not None,
        forwarded_allow_ips=config.trusted_proxies or ""))


async def _announce_when_up(server: uvicorn.Server, announce: Callable[[str], None]) -> None:
    while not server.started:
        await asyncio.sleep(0.01)
    for listener in server.servers:
        for sock in listener.sockets:
            host, port = sock.getsockname()[:2]
            announce(f"lashflow serve: listening on http://{host}:{port}")
            return


__all__ = ["serve", "uvicorn_server"]
