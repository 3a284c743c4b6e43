"""Fixtures of the worker tests: a database per test on both backends, worker processes.

PostgreSQL is the server at ``$LASHFLOW_TEST_POSTGRES_URL`` or, when that is unset, a
throwaway one (``pg_support``); each test gets a fresh schema, named in
the URL's ``search_path`` and dropped afterwards. An unreachable server fails the test:
the project allows no skipped tests. SQLite is one file in ``tmp_path`` shared by all the
worker processes of the test.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import AsyncIterator, Iterator

import asyncpg
import pytest

from lashflow.store import open_store
from pg_support import postgres_base_url, shown_url, with_query
from workers_support import Db, Fleet


@pytest.fixture(params=["postgres", "sqlite"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Db]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.db'}"
        # created (WAL switched on) before the workers start, as a deployment does: several
        # processes switching a brand-new file to WAL at once can see "database is locked"
        async with open_store(url):
            pass
        yield Db("sqlite", url)
        return
    base = postgres_base_url()
    try:
        admin = await asyncpg.connect(base, timeout=5)
    except Exception as exc:  # noqa: BLE001 - any failure to connect means the same
        pytest.fail(f"PostgreSQL is unreachable at {shown_url(base)}: {' '.join(str(exc).split())}. "
                    "The worker tests need it and may not be skipped: start a server or set "
                    "LASHFLOW_TEST_POSTGRES_URL=postgresql://user@host:port/db.", pytrace=False)
    schema = f"lashflow_test_{uuid.uuid4().hex[:16]}"
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        # a small pool per process: several workers and clients share the server's slots
        yield Db("postgres", with_query(base, search_path=schema, pool_size="5"),
                 with_query(base, search_path=schema))
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tools' side-effect log; this process's tools write there too."""
    path = tmp_path / "effects.log"
    monkeypatch.setenv("LASHFLOW_WORKERS_LOG", str(path))
    return path


@pytest.fixture
def fleet(tmp_path: Path, db: Db, log: Path) -> Iterator[Fleet]:
    workers = Fleet(tmp_path, db.url, log)
    try:
        yield workers
    finally:
        workers.stop()
