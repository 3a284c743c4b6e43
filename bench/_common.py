"""What several benches share: a PostgreSQL schema of their own for one run (made,
used through ``search_path``, dropped after), percentiles of timings, and the CPU of
SQLite's writer process."""

from __future__ import annotations

import asyncio
import os
import uuid
from contextlib import contextmanager
from typing import Any, Iterator


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _schema(url: str, statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@contextmanager
def pg_schemas(url: str, prefix: str) -> Iterator["SchemaMaker"]:
    """``make()`` gives the URL of a new schema named ``prefix_...`` each call; all are
    dropped when the block ends, whatever happened in it."""
    maker = SchemaMaker(url, prefix)
    try:
        yield maker
    finally:
        for schema in maker.made:
            asyncio.run(_schema(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


class SchemaMaker:
    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.prefix = prefix
        self.made: list[str] = []

    def make(self) -> str:
        schema = f"{self.prefix}_{uuid.uuid4().hex[:12]}"
        asyncio.run(_schema(self.url, f"CREATE SCHEMA {schema}"))
        self.made.append(schema)
        sep = "&" if "?" in self.url else "?"
        return f"{self.url}{sep}search_path={schema}"


def writer_cpu(store: Any) -> float:
    """CPU seconds SQLite's writer process (ADR 0050) of ``store`` has used so far, from
    /proc; 0 while it has none. Its work is the run's: add it to the process's own."""
    pid = getattr(store, "writer_pid", None)
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
