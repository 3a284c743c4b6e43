"""Two limits uvicorn's HTTP protocol lacks, for ``lashflow serve`` facing slow clients.

uvicorn closes a keep-alive connection idle between requests, but a connection that
never finishes its first request head (an idle one, or one that sent half a request
line: "slowloris") stays open for good, and nothing caps how many connections are open.
Here every request head must be complete within ``head_timeout`` seconds of the
connection opening (or of its first byte, for the next request on a kept-alive
connection), else the server answers 408 and closes; and a connection beyond
``max_connections`` open at once is answered 503 and closed at once, before anything is
read from it. Built on uvicorn's public protocol class and the parser's callbacks
(``on_message_begin``, ``on_headers_complete``), passed to uvicorn as ``http=``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

DEFAULT_HEAD_TIMEOUT = 5.0
DEFAULT_MAX_CONNECTIONS = 1000


def _answer(status: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


_TOO_SLOW = _answer("408 Request Timeout", "the request head did not arrive in time\n")
_TOO_MANY = _answer("503 Service Unavailable", "too many open connections; try again\n")


class _GuardedHttp(HttpToolsProtocol):
    head_timeout = DEFAULT_HEAD_TIMEOUT
    max_connections = DEFAULT_MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    # uvicorn hands a Transport, its base class declares BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(_TOO_MANY)
            transport.close()
            return
        self._await_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._await_head()  # the next request on a kept-alive connection

    def on_headers_complete(self) -> None:
        self._head_arrived()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.write(_TOO_SLOW)
            self.transport.close()


def guarded_protocol(head_timeout: float = DEFAULT_HEAD_TIMEOUT,
                     max_connections: int = DEFAULT_MAX_CONNECTIONS) -> type[asyncio.Protocol]:
    """The protocol class to hand uvicorn (``uvicorn.Config(http=...)``)."""
    return type("GuardedHttp", (_GuardedHttp,), {"head_timeout": head_timeout,
                                                 "max_connections": max_connections})


__all__ = ["DEFAULT_HEAD_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "guarded_protocol"]
