"""The console's pages and forms: presentation over the engine's public and read API.

Pages are rendered on the server by Jinja2 with autoescaping, so every value that comes
from a run (inputs, outputs, tool names, labels, error messages) reaches the browser as
text. The only script is ``static/console.js`` (live refresh); the Content-Security-Policy
allows nothing else. Every POST needs the session cookie and the form's CSRF token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ...errors import LashflowError, NotFound, UnknownStep, UsageError
from ...json_input import read_json
from ...json_text import pretty
from ...states import RUN_STATUSES, SETTLED, STOPPED, RunStatus
from ...tools import ToolResult
from ...durable.bulk import ACTIONS
from ..credentials import client_of
from ..jobs import Jobs
from .bulk import BulkPages
from ..sse import feed_stream, run_stream
from ..throttle import Throttle
from .gantt_svg import gantt_svg
from .queues import QueuePages
from .schedules import SchedulePages
from .session import LOGIN_COOKIE, SESSION_COOKIE, SESSION_SECONDS, Sessions, Signer

HERE = Path(__file__).resolve().parent
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "Cache-Control": "no-store"}
PAGE = 25


@dataclass(slots=True)
class ConsoleConfig:
    """``inbox_only``: serve the inbox and sign-in only (for people who approve)."""

    token: str
    inbox_only: bool = False


def _when(moment: float | None) -> str:
    if moment is None:
        return ""
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _pretty(value: Any) -> str:
    return pretty(value, sorted_lenient=True)


def _seconds(start: float | None, end: float | None) -> str:
    if start is None or end is None:
        return ""
    took = end - start
    return f"{took * 1000:.0f} ms" if took < 10 else f"{took:.1f} s"


class Console:
    def __init__(self, engine: Any, config: ConsoleConfig, throttle: Throttle,
                 sessions: Sessions, jobs: Jobs | None = None) -> None:
        self.engine = engine
        self.jobs = jobs if jobs is not None else Jobs(engine)
        self.config = config
        self.signer = Signer(config.token)
        self.throttle = throttle
        self.sessions = sessions
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(["html"]), trim_blocks=True,
                               lstrip_blocks=True)
        self.env.filters.update(when=_when, pretty=_pretty)
        self.env.globals.update(seconds=_seconds)

    # -- plumbing ----------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        full = [
            Route("/runs", self.page(self.runs)),
            Route("/runs/rows", self.page(self.run_rows)),
            Route("/runs/{run_id}", self.page(self.run)),
            Route("/runs/{run_id}/state", self.page(self.run_state)),
            Route("/runs/{run_id}/events", self.page(self.run_events)),
            Route("/events", self.page(self.feed)),
            Route("/runs/{run_id}/output/{step}", self.page(self.output)),
            Route("/runs/{run_id}/verify", self.page(self.verify)),
            Route("/runs/{run_id}/cancel", self.form(self.cancel), methods=["POST"]),
            Route("/runs/{run_id}/retry", self.form(self.retry), methods=["POST"]),
            Route("/runs/{run_id}/pause", self.form(self.pause), methods=["POST"]),
            Route("/runs/{run_id}/unpause", self.form(self.unpause), methods=["POST"]),
            Route("/runs/{run_id}/fork", self.form(self.fork), methods=["POST"]),
            Route("/runs/{run_id}/signal", self.form(self.signal), methods=["POST"]),
            *SchedulePages(self).routes(),
            *BulkPages(self, self.jobs).routes(),
            *QueuePages(self).routes(),
        ]
        return [
            Route("/", self.home),
            Route("/login", self.login_page),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.form(self.logout), methods=["POST"]),
            Route("/inbox", self.page(self.inbox)),
            Route("/inbox/state", self.page(self.inbox_state)),
            Route("/inbox/resolve", self.form(self.resolve), methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
            *([] if self.config.inbox_only else full),
        ]

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        cookie = request.cookies.get(SESSION_COOKIE, "")
        values.setdefault("csrf", self.signer.csrf(cookie) if cookie else "")
        values.setdefault("inbox_only", self.config.inbox_only)
        html = self.env.get_template(name).render(**values)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    async def signed_in(self, request: Request) -> bool:
        cookie = request.cookies.get(SESSION_COOKIE)
        return bool(cookie) and self.signer.session_valid(cookie,
                                                          await self.sessions.generation())

    def page(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
        async def guarded(request: Request) -> Response:
            if not await self.signed_in(request):
                return RedirectResponse("/login", status_code=303, headers=HEADERS)
            try:
                return await handler(request)
            except LashflowError as exc:
                return await self.message(request, exc.code, exc.message,
                                          404 if isinstance(exc, NotFound) else 400)
        return guarded

    def form(self, handler: Callable[[Request, Any], Awaitable[Response]]) -> Callable[..., Any]:
        """A POST: signed in, the form's CSRF token right, then ``handler(request, form)``."""
        async def guarded(request: Request) -> Response:
            if not await self.signed_in(request):
                return await self.message(request, "unauthorized", "sign in first", 401)
            form = await request.form()
            if not self.signer.csrf_valid(request.cookies.get(SESSION_COOKIE),
                                          str(form.get("csrf", ""))):
                return await self.message(request, "csrf_rejected", "this form is stale or did not "
                                    "come from the console; reload the page and try again",
                                    403)
            try:
                return await handler(request, form)
            except LashflowError as exc:
                return await self.message(request, exc.code, exc.message, 400)
        return guarded

    async def message(self, request: Request, code: str, text: str, status: int) -> Response:
        return self.render(request, "message.html", status, code=code, text=text,
                           signed_in=await self.signed_in(request))

    @staticmethod
    def back(path: str) -> Response:
        return RedirectResponse(path, status_code=303, headers=HEADERS)

    # -- signing in ----------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        target = "/inbox" if self.config.inbox_only else "/runs"
        return self.back(target if await self.signed_in(request) else "/login")

    async def login_page(self, request: Request, error: str = "", status: int = 200) -> Response:
        nonce = Signer.new_nonce()
        response = self.render(request, "login.html", status, error=error, signed_in=False,
                               login_csrf=self.signer.csrf(f"login:{nonce}"))
        response.set_cookie(LOGIN_COOKIE, nonce, max_age=600, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def login(self, request: Request) -> Response:
        form = await request.form()
        nonce = request.cookies.get(LOGIN_COOKIE)
        if not nonce or not self.signer.csrf_valid(f"login:{nonce}", str(form.get("csrf", ""))):
            return await self.login_page(request, "the sign-in form expired; try again", 403)
        client = client_of(request)
        wait = self.throttle.wait_left(client)
        if wait:
            return await self.login_page(request, "too many wrong tokens from this address: "
                                         f"try again in {wait} s", 429)
        if not self.signer.token_matches(str(form.get("token", ""))):
            self.throttle.missed(client)
            return await self.login_page(request, "that is not the management token", 401)
        self.throttle.passed(client)
        response = self.back("/")
        session = self.signer.new_session(await self.sessions.generation())
        response.set_cookie(SESSION_COOKIE, session, max_age=SESSION_SECONDS, httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        response.delete_cookie(LOGIN_COOKIE)
        return response

    async def logout(self, request: Request, form: Any) -> Response:
        await self.sessions.end_all()  # a copy of the cookie stops working too
        response = self.back("/login")
        response.delete_cookie(SESSION_COOKIE)
        return response

    # -- runs ----------------------------------------------------------------------------
    async def _page_of_runs(self, request: Request) -> tuple[Any, dict[str, str]]:
        q = request.query_params
        status = q.get("status", "")
        if status and status not in RUN_STATUSES:
            raise UsageError(f"unknown status {status!r}")
        process = q.get("process", "").strip()
        page = await self.engine.runs(status=[status] if status else None,
                                      process=process or None, limit=PAGE,
                                      cursor=q.get("cursor") or None)
        return page, {"status": status, "process": process}

    async def runs(self, request: Request) -> Response:
        page, filters = await self._page_of_runs(request)
        more = (urlencode({**{k: v for k, v in filters.items() if v},
                           "cursor": page.next_cursor}) if page.next_cursor else "")
        where = " and ".join(f"{key}={value}" for key, value in filters.items() if value)
        return self.render(request, "runs.html", page=page, filters=filters, more=more,
                           statuses=RUN_STATUSES, query=request.url.query, where=where,
                           actions=ACTIONS)

    async def run_rows(self, request: Request) -> Response:
        page, _ = await self._page_of_runs(request)
        return self.render(request, "run_rows.html", page=page)

    async def run(self, request: Request) -> Response:
        from ...lang.graph import GraphError, build_graph, site_states
        from .graph_svg import graph_svg

        run_id = request.path_params["run_id"]
        detail = await self.engine.run_detail(run_id)
        source = await self.engine.source_of(run_id)
        drawing = signals = None
        if source is not None:
            try:
                graph = build_graph(source, process=detail.summary.process)
                drawing = graph_svg(graph, await site_states(self.engine, run_id))
            except (GraphError, LashflowError):
                drawing = None
            signals = _declared_signals(source, detail.summary.process)
        settled = detail.status in SETTLED
        updated = detail.summary.updated_at
        gantt = gantt_svg(detail.steps, detail.summary.created_at,
                          updated if settled else max(updated, self.engine.clock.now()))
        return self.render(request, "run.html", run=detail, graph=drawing, gantt=gantt,
                           events_after=await self.engine.last_event(run_id),
                           signals=signals or [], settled=settled,
                           stopped=detail.status in STOPPED - {RunStatus.FINISHED})

    async def run_state(self, request: Request) -> Response:
        summary = (await self.engine.run_detail(request.path_params["run_id"])).summary
        return JSONResponse({"status": summary.status.value, "updated_at": summary.updated_at},
                            headers=HEADERS)

    async def run_events(self, request: Request) -> Response:
        """The run's events as the API streams them, for the page's live view."""
        return await run_stream(self.engine, request)

    async def feed(self, request: Request) -> Response:
        """Every run's events (``?process=``), for the runs page's live list."""
        return await feed_stream(self.engine, request)

    async def output(self, request: Request) -> Response:
        run_id, step = request.path_params["run_id"], request.path_params["step"]
        for view in await self.engine.steps(run_id):
            if view.step_key == step:
                return PlainTextResponse(_pretty(view.outcome), headers=HEADERS)
        raise UnknownStep(f"run {run_id} has no step {step}")

    async def verify(self, request: Request) -> Response:
        """The run replayed, read-only, against the latest deployed version of its
        process: would it move (compatible), and if not, where it stops matching."""
        [checked] = await self.engine.upgrade([request.path_params["run_id"]], dry_run=True)
        text = (f"{checked.verdict} against version {checked.to_version} of "
                f"{checked.process}: {checked.reason}")
        return PlainTextResponse(text, headers=HEADERS)

    async def cancel(self, request: Request, form: Any) -> Response:
        run_id = request.path_params["run_id"]
        await self.engine.cancel(run_id, str(form.get("reason", "")).strip() or None)
        return self.back(f"/runs/{run_id}")

    async def pause(self, request: Request, form: Any) -> Response:
        run_id = request.path_params["run_id"]
        await self.engine.pause(run_id, str(form.get("reason", "")).strip() or None,
                                by=f"console ({client_of(request)})")
        return self.back(f"/runs/{run_id}")

    async def unpause(self, request: Request, form: Any) -> Response:
        run_id = request.path_params["run_id"]
        await self.engine.unpause(run_id)
        await self.engine.drive_soon(run_id)
        return self.back(f"/runs/{run_id}")

    async def retry(self, request: Request, form: Any) -> Response:
        run_id = request.path_params["run_id"]
        await self.engine.retry(run_id, wait=False)
        return self.back(f"/runs/{run_id}")

    async def fork(self, request: Request, form: Any) -> Response:
        run_id = request.path_params["run_id"]
        overrides = _json_field(form, "set", {})
        if not isinstance(overrides, dict):
            raise UsageError("set: a JSON object of step key -> value")
        forked = await self.engine.fork(run_id, str(form.get("step", "")), set=overrides,
                                        wait=False)
        return self.back(f"/runs/{forked.run_id}")

    async def signal(self, request: Request, form: Any) -> Response:
        run_id = request.path_params["run_id"]
        await self.engine.signal(run_id, str(form.get("name", "")),
                                 _json_field(form, "payload", None), resume=False)
        await self.engine.drive_soon(run_id)
        return self.back(f"/runs/{run_id}")

    # -- the inbox ----------------------------------------------------------------------
    async def _open_keys(self) -> list[dict[str, Any]]:
        items = []
        details: dict[str, Any] = {}
        for run_id, wait in await self.engine.waiting():
            if wait.kind != "completion" or not wait.key:
                continue
            info = await self.engine.completion(wait.key)
            if info is None or info.state != "open":
                continue
            if run_id not in details:
                details[run_id] = await self.engine.run_detail(run_id)
            step = next((s for s in details[run_id].steps if s.step_key == wait.step), None)
            items.append({"run_id": run_id, "process": details[run_id].summary.process,
                          "tool": wait.tool, "key": wait.key, "step": wait.step,
                          "args": step.args if step is not None else None,
                          "asked_at": step.created_at if step is not None else None,
                          "deadline_at": info.deadline_at})
        items.sort(key=lambda item: item["asked_at"] or 0, reverse=True)
        return items

    async def inbox(self, request: Request) -> Response:
        return self.render(request, "inbox.html", items=await self._open_keys(),
                           resolved=request.query_params.get("resolved", ""))

    async def inbox_state(self, request: Request) -> Response:
        steps = sorted(f"{item['run_id']}/{item['step']}" for item in await self._open_keys())
        return JSONResponse({"open": steps}, headers=HEADERS)

    async def resolve(self, request: Request, form: Any) -> Response:
        key = str(form.get("key", ""))
        decision = str(form.get("decision", ""))
        if decision == "approve":
            result = ToolResult.ok({"approved": True})
        elif decision == "reject":
            reason = str(form.get("reason", "")).strip() or "rejected in the console"
            result = ToolResult.ok({"approved": False, "reason": reason})
        elif decision == "json":
            result = ToolResult.ok(_json_field(form, "result", None))
        else:
            raise UsageError("decision: approve, reject or json")
        delivery = await self.engine.deliver(key, result, background=True)
        return self.back(f"/inbox?{urlencode({'resolved': delivery.run_id})}")


def _json_field(form: Any, name: str, default: Any) -> Any:
    text = str(form.get(name, "")).strip()
    return read_json(text, name) if text else default


def _declared_signals(source: str, process: str | None) -> list[dict[str, str]]:
    """The signals the run's process declares: [{name, type}] for the signal forms."""
    from ...lang import parse

    try:
        module = parse(source)
    except LashflowError:
        return []
    decl = module.process(process) if process else None
    if decl is None:
        return []
    return [{"name": p.name, "type": source[p.type.span.start:p.type.span.end] or "any"}
            for p in decl.signals]


__all__ = ["Console", "ConsoleConfig"]
