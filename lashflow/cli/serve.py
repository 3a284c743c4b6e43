"""``lashflow serve``: the HTTP service (console, webhooks, runs API) with its worker."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from .context import Invocation
from .exits import fail, freeze_startup_heap, run_async
from .options import DbOption, LogFormatOption, ToolsOption, run_log
from .output import stderr


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST",
                             help="The address to listen on (loopback unless you say so)."),
    port: int = typer.Option(8750, "--port", metavar="PORT", min=0, max=65535,
                             help="The port (0: any free one, printed at start)."),
    processes: Optional[Path] = typer.Option(None, "--processes", metavar="DIR",
                                             help="The directory runs may be started from "
                                                  "(POST /v1/runs); none: the API starts no runs."),
    token: Optional[str] = typer.Option(None, "--token", envvar="LASHFLOW_API_TOKEN",
                                        metavar="TOKEN", show_default=False,
                                        help="The management routes' bearer token (default "
                                             "$LASHFLOW_API_TOKEN, else one is generated and "
                                             "printed)."),
    body_limit: int = typer.Option(1024 * 1024, "--body-limit", metavar="BYTES", min=1,
                                   help="The largest request body accepted (413 beyond)."),
    inbox_only: bool = typer.Option(False, "--inbox-only",
                                    help="Serve only the console's inbox (and the webhooks): "
                                         "for the people who approve; no runs API."),
    no_worker: bool = typer.Option(False, "--no-worker",
                                   help="Serve only: runs move on in `lashflow worker` "
                                        "processes, not here."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", metavar="N",
                                              help="Runs driven at once by the worker."),
    head_timeout: Optional[float] = typer.Option(None, "--head-timeout", metavar="SECONDS",
                                                 min=0.1, show_default=False,
                                                 help="Close a connection whose request line "
                                                      "and headers are not all in within this "
                                                      "(408; default 5)."),
    max_connections: Optional[int] = typer.Option(None, "--max-connections", metavar="N",
                                                  min=1, show_default=False,
                                                  help="Connections open at once; a newer one "
                                                       "is answered 503 and closed (default "
                                                       "1000)."),
    trust_proxy: Optional[str] = typer.Option(None, "--trust-proxy", metavar="ADDRESSES",
                                              help="Reverse proxies (comma-separated "
                                                   "addresses, * for any) whose "
                                                   "X-Forwarded-For names the client; "
                                                   "without it the header is ignored."),
    log_format: str = LogFormatOption,
    tools: list[str] = ToolsOption,
    db: Optional[str] = DbOption,
) -> None:
    """Serve the web console at / (sign in with the token), completion webhooks (POST
    /v1/completions/KEY), the runs API under /v1, /metrics and /openapi.json, and run the
    worker loop (one line per run transition on stderr). SIGTERM: stop accepting, finish requests in
    flight, then runs in flight go back to `queued` at their next effect."""
    import secrets

    from ..http import ServeConfig
    from ..http.server import serve as run_server

    inv = Invocation.of(ctx)
    if processes is not None and not processes.is_dir():
        fail("usage_error", f"--processes {processes}: not a directory", False)
    secret = token or secrets.token_urlsafe(24)
    if token is None:
        stderr(f"lashflow serve: management token {secret} (set LASHFLOW_API_TOKEN to "
               "choose one)")
    config = ServeConfig(secret, processes, body_limit, drive=not no_worker,
                         console="inbox" if inbox_only else "full",
                         trusted_proxies=trust_proxy)
    if head_timeout is not None:
        config = replace(config, head_timeout=head_timeout)
    if max_connections is not None:
        config = replace(config, max_connections=max_connections)

    def up(line: str) -> None:
        stderr(line)
        freeze_startup_heap()

    async def go() -> int:
        await run_server(host=host, port=port, db=db, tools=tools, config=config,
                         concurrency=concurrency, announce=up,
                         listener=run_log(log_format, stderr))
        return 0

    raise typer.Exit(run_async(inv, go))

