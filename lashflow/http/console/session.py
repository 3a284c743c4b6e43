"""Console sessions and CSRF tokens, signed with a key derived from the management token.

A session cookie is ``<issued at>.<generation>.<mac>`` and lives ``SESSION_SECONDS``; a
form's CSRF token is a MAC of the session cookie, so a page from another origin, which
cannot read the cookie, cannot forge one. Deriving the key from the token means every
``lashflow serve`` sharing a token accepts the same sessions, and a new token signs
everyone out.

Signing out must end the session on the server too, not only in the browser (a copied
cookie would keep working until it expires). The database keeps one session
*generation* (``Sessions``: a ``Store`` setting, so every server on the database sees it
and it survives restarts); a cookie is valid only while the generation it was issued in
is current, and signing out starts a new one: every console session on that database
ends, in every browser. One small read per console request; no table of sessions.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any

SESSION_COOKIE = "lashflow_console"
LOGIN_COOKIE = "lashflow_login"  # the login form's own CSRF nonce, before any session
SESSION_SECONDS = 12 * 3600
GENERATION_SETTING = "console_session_generation"
FIRST_GENERATION = "0"  # until the first sign-out on a database


class Sessions:
    """The current session generation of a database (``Store.setting``)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def generation(self) -> str:
        return await self._store.setting(GENERATION_SETTING) or FIRST_GENERATION

    async def end_all(self) -> None:
        """Sign every console session out: cookies issued before now stop working."""
        await self._store.put_setting(GENERATION_SETTING, secrets.token_hex(8))


class Signer:
    def __init__(self, token: str) -> None:
        self._key = hmac.new(token.encode(), b"lashflow console v1", hashlib.sha256).digest()
        self._token = token

    def _mac(self, purpose: str, value: str) -> str:
        message = f"{purpose}:{value}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def token_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token.encode())

    def new_session(self, generation: str, now: float | None = None) -> str:
        issued = f"{int(now if now is not None else time.time())}.{generation}"
        return f"{issued}.{self._mac('session', issued)}"

    def session_valid(self, cookie: str | None, generation: str,
                      now: float | None = None) -> bool:
        if not cookie or cookie.count(".") != 2:
            return False
        issued_at, cookie_generation, mac = cookie.split(".")
        issued = f"{issued_at}.{cookie_generation}"
        if not issued_at.isdigit() or not hmac.compare_digest(
                mac.encode(), self._mac("session", issued).encode()):
            return False
        if not hmac.compare_digest(cookie_generation.encode(), generation.encode()):
            return False
        return (now if now is not None else time.time()) - int(issued_at) < SESSION_SECONDS

    def csrf(self, cookie: str) -> str:
        return self._mac("csrf", cookie)[:40]

    def csrf_valid(self, cookie: str | None, offered: str | None) -> bool:
        return bool(cookie and offered) and hmac.compare_digest(
            str(offered).encode(), self.csrf(str(cookie)).encode())

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(18)


__all__ = ["LOGIN_COOKIE", "SESSION_COOKIE", "SESSION_SECONDS", "Sessions", "Signer"]
