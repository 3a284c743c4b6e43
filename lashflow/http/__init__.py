"""``lashflow serve``: completion webhooks and the runs API over HTTP (Starlette)."""

from __future__ import annotations

from .app import DEFAULT_BODY_LIMIT, ServeConfig, create_app

__all__ = ["DEFAULT_BODY_LIMIT", "ServeConfig", "create_app"]
