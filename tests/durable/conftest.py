"""``backend_url``: a test of the durable layer that asks for it runs on SQLite and on
PostgreSQL (a fresh schema, dropped afterwards), end to end through the ``Engine``."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest

from pg_support import database_url


@pytest.fixture(params=["sqlite", "postgres"])
async def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with database_url(request.param, tmp_path, "lashflow_durable") as url:
        yield url
