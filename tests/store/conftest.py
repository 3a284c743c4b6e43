"""The ``backend`` fixture: every store test runs against SQLite and PostgreSQL.

SQLite lives in ``tmp_path``. PostgreSQL is the server at ``$LASHFLOW_TEST_POSTGRES_URL``
or, when that is unset, a throwaway one (``pg_support``); each test gets a fresh schema (named in the store URL's ``search_path``) that is dropped
afterwards, so nothing leaks between tests. An unreachable server fails the tests: the
project allows no skipped tests.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from lashflow.store import Store, open_store
from pg_support import postgres_base_url, shown_url, with_query

_unreachable: list[str] = []  # the first connection error, so later tests fail fast


async def postgres_admin() -> asyncpg.Connection:
    """A raw connection to the test server, or a test failure that says how to fix it."""
    url = postgres_base_url()
    if not _unreachable:
        try:
            return await asyncpg.connect(url, timeout=5)
        except Exception as exc:  # noqa: BLE001 - any failure to connect means the same
            _unreachable.append(" ".join(str(exc).split()) or type(exc).__name__)
    required = " (LASHFLOW_REQUIRE_POSTGRES=1)" if os.environ.get("LASHFLOW_REQUIRE_POSTGRES") == "1" else ""
    pytest.fail(
        f"PostgreSQL is unreachable at {shown_url(url)}{required}: {_unreachable[0]}. The store tests run "
        "against both backends and may not be skipped: start a server or set "
        "LASHFLOW_TEST_POSTGRES_URL=postgresql://user@host:port/db to one where the user may "
        "create schemas.", pytrace=False)


class _Tables(dict):  # type: ignore[type-arg]
    """``{steps}`` -> the backend's name of the steps table."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def __missing__(self, table: str) -> str:
        return self.prefix + table


class Backend:
    """One database for one test, plus the raw access a test needs to tamper with it."""

    name: str
    url: str

    def make(self) -> Store:
        """A new, unopened store on this test's database (a second "process" on it)."""
        return open_store(self.url)

    async def set_schema_version(self, version: int) -> None:
        raise NotImplementedError

    async def count(self, table: str) -> int:
        """Rows in a store table, by its unprefixed name."""
        raise NotImplementedError

    def bad_urls(self, tmp_path: Path) -> list[str]:
        """URLs of this backend that cannot be opened, each for a different reason."""
        raise NotImplementedError

    async def hold_run_lock(self, run_id: str) -> Callable[[], Any]:
        """Hold what a commit to ``run_id`` must wait for (SQLite: the write lock; PostgreSQL:
        the run's row lock), as another process's transaction would; returns an async
        release."""
        raise NotImplementedError

    async def tamper(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run a hand edit as an operator (or a bad disk) would, outside lashflow. ``sql``
        names tables as ``{steps}``, ``{blobs}``... and takes ``?`` placeholders."""
        raise NotImplementedError


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"

    def _execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    async def set_schema_version(self, version: int) -> None:
        self._execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", str(version))

    async def count(self, table: str) -> int:
        return self._execute(f"SELECT COUNT(*) FROM {table}")[0][0]

    async def tamper(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self._execute(sql.format_map(_Tables("")), *params)

    async def hold_run_lock(self, run_id: str) -> Callable[[], Any]:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")

        async def release() -> None:
            conn.rollback()
            conn.close()
        return release

    def bad_urls(self, tmp_path: Path) -> list[str]:
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        return ["sqlite://some-host/journal.db", "sqlite:///", "sqlite:///x.db?synchronous=off",
                f"sqlite:///{blocker}/journal.db", "mysql://user@127.0.0.1/db"]


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, base_url: str, schema: str) -> None:
        self.base_url = base_url
        self.schema = schema
        self.url = with_query(base_url, search_path=schema)

    def url_with(self, **params: str) -> str:
        return with_query(self.url, **params)

    async def _connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.url, timeout=5)

    async def set_schema_version(self, version: int) -> None:
        conn = await self._connect()
        try:
            await conn.execute("UPDATE lashflow_meta SET value = $1 WHERE key = 'schema_version'",
                               str(version).encode())
        finally:
            await conn.close()

    async def count(self, table: str) -> int:
        conn = await self._connect()
        try:
            return await conn.fetchval(f"SELECT COUNT(*) FROM lashflow_{table}")
        finally:
            await conn.close()

    async def tamper(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        pieces = sql.format_map(_Tables("lashflow_")).split("?")
        numbered = pieces[0] + "".join(f"${n}{rest}" for n, rest in enumerate(pieces[1:], 1))
        conn = await self._connect()
        try:
            return [tuple(row) for row in await conn.fetch(numbered, *params)]
        finally:
            await conn.close()

    def bad_urls(self, tmp_path: Path) -> list[str]:
        parts = urlsplit(self.base_url)
        host = parts.hostname or "127.0.0.1"
        return [
            f"postgresql://postgres:hunter2@{host}:1/test",  # nothing listens there
            f"postgresql://postgres@{host}:notaport/test",
            urlunsplit(parts._replace(path="/lashflow_no_such_database")),
            urlunsplit(parts._replace(netloc=f"lashflow_no_such_user@{host}:{parts.port or 5432}")),
            with_query(self.base_url, search_path="lashflow_no_such_schema"),
            with_query(self.base_url, sslmode="bogus"),
            with_query(self.base_url, no_such_setting="1"),
            with_query(self.base_url, pool_size="0"),
        ]

    async def tables(self) -> list[str]:
        conn = await self._connect()
        try:
            rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1 "
                                    "ORDER BY tablename", self.schema)
            return [row[0] for row in rows]
        finally:
            await conn.close()

    async def hold_run_lock(self, run_id: str) -> Callable[[], Any]:
        """Lock the run row as a concurrent transaction would; returns an async release."""
        conn = await self._connect()
        transaction = conn.transaction()
        await transaction.start()
        await conn.fetch("SELECT 1 FROM lashflow_runs WHERE run_id = $1 FOR UPDATE", run_id)

        async def release() -> None:
            await transaction.rollback()
            await conn.close()
        return release


@contextlib.asynccontextmanager
async def fresh_schema() -> AsyncIterator[PostgresBackend]:
    """A new schema on the test server for one test, dropped with all it holds afterwards."""
    admin = await postgres_admin()
    schema = f"lashflow_test_{uuid.uuid4().hex[:16]}"
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        yield PostgresBackend(postgres_base_url(), schema)
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        yield SqliteBackend(tmp_path / "store.db")
        return
    async with fresh_schema() as postgres:
        yield postgres


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    async with backend.make() as opened:
        yield opened


@pytest.fixture
async def postgres_backend() -> AsyncIterator[PostgresBackend]:
    """PostgreSQL only, for what SQLite has no counterpart of (prefixes, row locks)."""
    async with fresh_schema() as postgres:
        yield postgres


@pytest.fixture
def count_transactions() -> Callable[[Store], list[int]]:
    """Test hook: count the group transactions a store writes, as the store reports each
    one (``on_commit``: whichever writes it, the loop's thread, the connection's thread or
    SQLite's writer process). The hook returns a one-item list: the count."""
    def install(store: Store) -> list[int]:
        counter = [0]
        told = store.on_commit

        def counting(seconds: float, writes: int) -> None:
            counter[0] += 1
            if told is not None:
                told(seconds, writes)
        store.on_commit = counting
        return counter
    return install
