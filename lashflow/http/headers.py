"""Headers every answer of ``lashflow serve`` carries, whatever route made it.

``Cache-Control: no-store``: answers hold open completion keys (``/v1/waiting``), run
inputs and results, metrics: no browser or proxy may keep a copy. The console's static
files (CSS, script, icon) hold no data and may be cached. ``X-Content-Type-Options:
nosniff``: a browser takes each answer as the type it is declared, never as a guessed
one (a JSON body holding markup is never run as a page). A plain ASGI wrapper, so the
webhook's path pays one list append.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

NOSNIFF = (b"x-content-type-options", b"nosniff")
NO_STORE = (b"cache-control", b"no-store")
STATIC = "/static/"


class AnswerHeaders:
    """ASGI middleware adding ``nosniff`` to every answer and ``no-store`` to every
    answer but the static files'; a header the route already set is left as it is."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [NOSNIFF] if scope["path"].startswith(STATIC) else [NOSNIFF, NO_STORE]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers += [header for header in extra if header[0] not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


__all__ = ["AnswerHeaders"]
