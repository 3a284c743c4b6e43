"""Log lines that never hold a completion key or the management token.

The key in ``/v1/completions/<key>`` is a credential (whoever has it can resolve the
call), so the path segment after ``completions/`` is replaced before a record is
formatted, in every logger this server writes through. The token is only ever taken
from the ``Authorization`` header (never logged), but a client may still put it in a
query string (``?token=...``): the value of every query parameter named like a
credential is replaced, and so is the live token itself wherever it appears.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote

_KEY_IN_PATH = re.compile(r"(/v1/completions/)[^/?\s\"]+")
_CREDENTIAL_IN_QUERY = re.compile(
    r"([?&](?:[\w.-]*(?:token|key|secret|password|passwd|auth|session|signature|sig))=)"
    r"[^&\s\"#]*", re.IGNORECASE)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without keys, credential query values and ``secrets`` (each pattern only
    where a cheap look shows it may be: this runs on every access-log line)."""
    if "/v1/completions/" in text:
        text = _KEY_IN_PATH.sub(r"\1<key>", text)
    if "=" in text:
        text = _CREDENTIAL_IN_QUERY.sub(r"\1<redacted>", text)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "<redacted>")
    return text


class RedactKeys(logging.Filter):
    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.secrets = _spellings(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg, self.secrets) if isinstance(arg, str) else arg
                                for arg in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg, self.secrets)
        return True


def install(*names: str, secrets: tuple[str, ...] = ()) -> None:
    """Add the filter to the named loggers (once each; a later call's ``secrets`` are
    added to the filter already there)."""
    for name in names:
        logger = logging.getLogger(name)
        present = next((f for f in logger.filters if isinstance(f, RedactKeys)), None)
        if present is None:
            logger.addFilter(RedactKeys(secrets))
        else:
            present.secrets = tuple(dict.fromkeys(present.secrets + _spellings(secrets)))


def _spellings(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """Each secret as given and as a URL carries it (percent-encoded)."""
    return tuple(dict.fromkeys(form for s in secrets if s for form in (s, quote(s, safe=""))))


__all__ = ["RedactKeys", "install", "redact"]
