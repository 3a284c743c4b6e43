"""The PostgreSQL server the tests use, and URL helpers shared by the test packages.

``$LASHFLOW_TEST_POSTGRES_URL`` names a server to use (CI points it at the machine's).
When it is unset, the first test that needs PostgreSQL starts a throwaway server from
the ``pgserver`` package (a PostgreSQL build installed by pip, in the ``dev`` extra) in
a temporary folder, listening on a unix socket only; it is stopped and its folder
deleted when the test session ends. Each xdist worker starts its own.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any, AsyncIterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_THROWAWAY: list[Any] = []  # the pgserver handle, once started


def postgres_base_url() -> str:
    """The server's URL: the configured one, or a throwaway server's (started once)."""
    configured = os.environ.get("LASHFLOW_TEST_POSTGRES_URL")
    if configured:
        return configured
    if not _THROWAWAY:
        import pgserver

        folder = tempfile.mkdtemp(prefix="lashflow-pg-")
        _THROWAWAY.append(pgserver.get_server(folder, cleanup_mode="delete"))
    return str(_THROWAWAY[0].get_uri())


def stop_throwaway_server() -> None:
    """Stop the throwaway server, if one was started, and delete its folder."""
    while _THROWAWAY:
        _THROWAWAY.pop().cleanup()


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    return urlunsplit(parts._replace(query=urlencode(query + list(params.items()))))


def shown_url(url: str) -> str:
    """``url`` fit for a test log: the password masked."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


@contextlib.asynccontextmanager
async def schema_url(prefix: str = "lashflow_test") -> AsyncIterator[str]:
    """The test server's URL with a fresh schema as its ``search_path``; the schema is
    dropped with all it holds afterwards."""
    import asyncpg

    base = postgres_base_url()
    admin = await asyncpg.connect(base, timeout=30)
    schema = f"{prefix}_{uuid.uuid4().hex[:16]}"
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        yield with_query(base, search_path=schema)
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


@contextlib.asynccontextmanager
async def database_url(backend: str, folder: Path,
                       prefix: str = "lashflow_test") -> AsyncIterator[str]:
    """A fresh database on ``backend`` (a fixture's param): ``sqlite``, a file in
    ``folder``; ``postgres``, a schema of the test server (``schema_url``)."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'journal.db'}"
        return
    async with schema_url(prefix) as url:
        yield url
