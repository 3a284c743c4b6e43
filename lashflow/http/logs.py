"""Access logs that never hold a completion key.

The key in ``/v1/completions/<key>`` is a credential (whoever has it can resolve the
call), so the path segment after ``completions/`` is replaced before a record is
formatted, in every logger this server writes through.
"""

from __future__ import annotations

import logging
import re

_KEY_IN_PATH = re.compile(r"(/v1/completions/)[^/?\s\"]+")


def redact(text: str) -> str:
    return _KEY_IN_PATH.sub(r"\1<key>", text)


class RedactKeys(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) if isinstance(arg, str) else arg
                                for arg in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install(*names: str) -> None:
    """Add the filter to the named loggers (idempotent)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactKeys) for f in logger.filters):
            logger.addFilter(RedactKeys())


__all__ = ["RedactKeys", "install", "redact"]
