"""``backend_url``: a test of the durable layer that asks for it runs on SQLite and on
PostgreSQL (a fresh schema, dropped afterwards), end to end through the ``Engine``."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest

from pg_support import schema_url


@pytest.fixture(params=["sqlite", "postgres"])
async def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'journal.db'}"
        return
    async with schema_url("lashflow_durable") as url:
        yield url
