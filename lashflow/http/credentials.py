"""The management token: how strong it must be, and who is offering one.

Whoever holds the token drives every run (start, cancel, retry, read every input and
result), so ``lashflow serve`` refuses one a person could guess: fewer than
``MIN_TOKEN_CHARS`` characters, or fewer than ``MIN_DISTINCT_CHARS`` different ones
(``aaaaaaaaaaaaaaaa``). The generated one (no ``--token``) has 192 random bits.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from ..errors import UsageError

MIN_TOKEN_CHARS = 16
MIN_DISTINCT_CHARS = 8
TOKEN_HINT = ("leave out --token and $LASHFLOW_API_TOKEN to have one generated, or make one: "
              "python -c \"import secrets; print(secrets.token_urlsafe(24))\"")


def check_token(token: str) -> None:
    """Refuse a management token too weak to stand guessing (``weak_token``)."""
    if len(token) < MIN_TOKEN_CHARS or len(set(token)) < MIN_DISTINCT_CHARS:
        raise UsageError(f"the management token is too weak: it needs at least "
                         f"{MIN_TOKEN_CHARS} characters, {MIN_DISTINCT_CHARS} of them "
                         "different", code="weak_token", hint=TOKEN_HINT)


def client_of(connection: HTTPConnection) -> str:
    """The address a request came from: whom a wrong token is counted against (behind a
    reverse proxy on this host, uvicorn takes it from ``X-Forwarded-For``)."""
    client = connection.client
    return client.host if client is not None else "unknown"


__all__ = ["MIN_DISTINCT_CHARS", "MIN_TOKEN_CHARS", "check_token", "client_of"]
