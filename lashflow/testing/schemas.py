"""A PostgreSQL schema of its own for one test: made before, dropped with all it holds after.

The engine finds its tables through the URL's ``search_path``, so tests that share one
server never see each other's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def _url_with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k != "search_path"]
    return urlunsplit(parts._replace(query=urlencode(kept + [("search_path", schema)])))


async def _execute(url: str, statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(url, timeout=30)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@contextlib.contextmanager
def fresh_schema(server_url: str, prefix: str = "lashflow_env") -> Iterator[str]:
    """``server_url`` with a new, empty schema as its search path."""
    schema = f"{prefix}_{uuid.uuid4().hex[:16]}"
    asyncio.run(_execute(server_url, f"CREATE SCHEMA {schema}"))
    try:
        yield _url_with_search_path(server_url, schema)
    finally:
        asyncio.run(_execute(server_url, f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


__all__ = ["fresh_schema"]
