"""Completion keys: signed, self-describing names for one pending call.

A key is ``lfk_`` + base64url(payload) + ``.`` + base64url(HMAC-SHA256(secret, payload)),
where the payload is the compact JSON ``[run_id, step_key]``. Deriving it again for the
same call gives the same key (every attempt, retry and replay), so a tool never has to
store it. Without the per-database secret nobody can produce a valid MAC, and the MAC
of one key says nothing about another run's key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from lashflow.json_text import ascii_compact, loads

__all__ = ["CompletionKey", "KeyRing", "derive_key", "new_secret", "verify_key"]

PREFIX = "lfk_"
MIN_SECRET_BYTES = 32
MAX_KEY_CHARS = 8192
_DOMAIN = b"lashflow.completion_key.v1\x00"


class CompletionKey(str):
    """A completion key; a plain ``str`` starting with ``lfk_``."""

    __slots__ = ()

    def __new__(cls, value: str) -> "CompletionKey":
        if not value.startswith(PREFIX):
            raise ValueError("a completion key starts with 'lfk_'")
        return super().__new__(cls, value)


def new_secret() -> bytes:
    """A fresh 256-bit secret (the store creates one per database, once)."""
    return secrets.token_bytes(MIN_SECRET_BYTES)


def _check_secret(secret: bytes) -> None:
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < MIN_SECRET_BYTES:
        raise ValueError("the completion-key secret must be at least 256 bits of bytes")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(bytes(secret), _DOMAIN + payload, hashlib.sha256).digest()


def derive_key(secret: bytes, run_id: str, step_key: str) -> CompletionKey:
    """The one key of call ``step_key`` in run ``run_id``."""
    _check_secret(secret)
    payload = ascii_compact([run_id, step_key]).encode("ascii")
    return CompletionKey(f"{PREFIX}{_b64(payload)}.{_b64(_mac(secret, payload))}")


def verify_key(secret: bytes, key: object) -> tuple[str, str] | None:
    """``(run_id, step_key)`` for a genuine key, None for anything else.

    Forged, truncated, re-encoded or foreign keys all get the same None. The final
    comparison is over the whole key with ``hmac.compare_digest``.
    """
    _check_secret(secret)
    if not isinstance(key, str) or not key.startswith(PREFIX) or len(key) > MAX_KEY_CHARS:
        return None
    body, dot, _mac_text = key[len(PREFIX):].partition(".")
    if not dot:
        return None
    try:
        ids = loads(_unb64(body).decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not (isinstance(ids, list) and len(ids) == 2 and all(isinstance(i, str) for i in ids)):
        return None
    expected = derive_key(secret, ids[0], ids[1])
    if not hmac.compare_digest(expected.encode("utf-8"), key.encode("utf-8", "surrogatepass")):
        return None
    return ids[0], ids[1]


class KeyRing:
    """Mints and checks keys under one secret (what a ``ToolContext`` is handed)."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes | None = None) -> None:
        secret = new_secret() if secret is None else bytes(secret)
        _check_secret(secret)
        self._secret = secret

    def key_for(self, run_id: str, step_key: str) -> CompletionKey:
        return derive_key(self._secret, run_id, step_key)

    def verify(self, key: object) -> tuple[str, str] | None:
        return verify_key(self._secret, key)
