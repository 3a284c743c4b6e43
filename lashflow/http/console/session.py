"""Console sessions and CSRF tokens, signed with a key derived from the management token.

Nothing is stored server side: a session cookie is ``<issued at>.<mac>`` and lives
``SESSION_SECONDS``; a form's CSRF token is a MAC of the session cookie, so a page from
another origin, which cannot read the cookie, cannot forge one. Deriving the key from the
token means every ``lashflow serve`` sharing a token accepts the same sessions, and a
new token signs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SESSION_COOKIE = "lashflow_console"
LOGIN_COOKIE = "lashflow_login"  # the login form's own CSRF nonce, before any session
SESSION_SECONDS = 12 * 3600


class Signer:
    def __init__(self, token: str) -> None:
        self._key = hmac.new(token.encode(), b"lashflow console v1", hashlib.sha256).digest()
        self._token = token

    def _mac(self, purpose: str, value: str) -> str:
        message = f"{purpose}:{value}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def token_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token.encode())

    def new_session(self, now: float | None = None) -> str:
        issued = f"{int(now if now is not None else time.time())}"
        return f"{issued}.{self._mac('session', issued)}"

    def session_valid(self, cookie: str | None, now: float | None = None) -> bool:
        if not cookie or "." not in cookie:
            return False
        issued, mac = cookie.split(".", 1)
        if not issued.isdigit() or not hmac.compare_digest(mac, self._mac("session", issued)):
            return False
        return (now if now is not None else time.time()) - int(issued) < SESSION_SECONDS

    def csrf(self, cookie: str) -> str:
        return self._mac("csrf", cookie)[:40]

    def csrf_valid(self, cookie: str | None, offered: str | None) -> bool:
        return bool(cookie and offered) and hmac.compare_digest(
            str(offered).encode(), self.csrf(str(cookie)).encode())

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(18)


__all__ = ["LOGIN_COOKIE", "SESSION_COOKIE", "SESSION_SECONDS", "Signer"]
