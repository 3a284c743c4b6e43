"""Server-Sent Events of runs: ``GET /v1/runs/{id}/events`` and ``GET /v1/events``.

Each event goes out as ``id:`` (the run's offset, or the feed cursor), ``event:`` (its
kind) and ``data:`` (one line of JSON). A client that reconnects sends the last id it
saw as ``Last-Event-ID`` (browsers do so on their own) or ``?after=``; the header wins,
since a browser reconnects to the URL it was first given. The events come from the
journal (``durable.live``), so a reconnect after the server or a worker was killed
misses nothing and repeats nothing. A comment every ``HEARTBEAT`` seconds keeps proxies
from closing a quiet stream.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ..errors import UsageError
from ..json_text import ascii_compact

HEARTBEAT_EVERY = 3  # idle ticks of the events (``durable.live.IDLE`` s) per keep-alive
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def resume_point(request: Request) -> str | None:
    """Where the client left off: ``Last-Event-ID``, else ``?after=``, else None."""
    given = request.headers.get("last-event-id")
    if given is None or not given.strip():
        given = request.query_params.get("after")
    return given.strip() if given is not None and given.strip() else None


def run_offset(text: str | None) -> int:
    if text is None:
        return 0
    if not text.isdigit() or len(text) > 18:
        raise UsageError(f"bad event id {text[:40]!r}: a run's events are numbered 1, 2, 3, "
                         "...; pass the last one seen")
    return int(text)


_FRAMES: "OrderedDict[tuple[str, int, str, float], bytes]" = OrderedDict()
_FRAMES_KEPT = 4096


def frame(event: Any, ident: str) -> bytes:
    """The event's SSE frame, encoded once however many subscribers get it (the last
    ``_FRAMES_KEPT`` frames are kept)."""
    key = (event.run_id, event.seq, ident, event.at)
    found = _FRAMES.get(key)
    if found is None:
        found = (f"id: {ident}\nevent: {event.kind}\n"
                 f"data: {ascii_compact(event.to_json())}\n\n").encode()
        _FRAMES[key] = found
        if len(_FRAMES) > _FRAMES_KEPT:
            _FRAMES.popitem(last=False)
    return found


async def _frames(events: AsyncIterator[Any], by_cursor: bool) -> AsyncIterator[bytes]:
    """No task per event: a thousand subscribers of one run are a thousand generators
    woken once per event."""
    yield b"retry: 1000\n\n"
    idle = 0
    try:
        async for event in events:
            if event is None:  # a quiet while
                idle += 1
                if idle % HEARTBEAT_EVERY == 0:
                    yield b": keep-alive\n\n"
                continue
            yield frame(event, event.cursor if by_cursor else str(event.seq))
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def stream(events: AsyncIterator[Any], *, by_cursor: bool = False) -> StreamingResponse:
    return StreamingResponse(_frames(events, by_cursor), media_type="text/event-stream",
                             headers=HEADERS)


async def run_stream(engine: Any, request: Request) -> StreamingResponse:
    """A run's events after the client's resume point (from the first one if none)."""
    after = run_offset(resume_point(request))
    return stream(await engine.subscribe(request.path_params["run_id"], after))


async def feed_stream(engine: Any, request: Request) -> StreamingResponse:
    """Events of every run (``?process=`` for one process's) after the client's resume
    point (from now on if none)."""
    process = request.query_params.get("process") or None
    return stream(await engine.subscribe_feed(resume_point(request), process), by_cursor=True)


__all__ = ["feed_stream", "frame", "resume_point", "run_offset", "run_stream", "stream"]
