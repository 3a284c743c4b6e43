"""The schedule tests' database, on both backends: SQLite in ``tmp_path``, PostgreSQL at
``$LASHFLOW_TEST_POSTGRES_URL`` (or a throwaway server, ``pg_support``) in a fresh
schema dropped afterwards. An unreachable server fails the tests: none may be skipped."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest

from pg_support import database_url


@pytest.fixture(params=["sqlite", "postgres"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with database_url(request.param, tmp_path, "lashflow_sched") as url:
        yield url
