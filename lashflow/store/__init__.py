"""The journal: one ``Store`` interface, SQLite (default) and PostgreSQL backends."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, urlparse

from ..errors import DbError, Fenced
from .base import (
    AttemptRecord, Claimed, Commit, JournalEntry, JournalPage, RunChange, RunDetail, RunPage,
    RateLimitRow, RateTake, Reopening, RunQuery, RunRecord, RunSummary, ScheduleRow, StepRecord,
    Store, StoreStats,
)
from .leases import may_claim

DEFAULT_DB = os.path.join(".lashflow", "lashflow.db")

__all__ = [
    "AttemptRecord", "Claimed", "Commit", "Fenced", "JournalEntry", "JournalPage", "RateLimitRow",
    "RateTake", "RunChange",
    "RunDetail", "RunPage", "Reopening", "RunQuery", "RunRecord", "RunSummary", "ScheduleRow", "StepRecord", "Store", "StoreStats", "may_claim", "open_store",
    "resolve_db_url",
]


def resolve_db_url(db: str | None) -> str:
    """``db`` argument, else ``$LASHFLOW_DB``, else ``.lashflow/lashflow.db`` here."""
    return db or os.environ.get("LASHFLOW_DB") or DEFAULT_DB


def open_store(db: str | None = None, *, create: bool = True, readonly: bool = False) -> Store:
    """Build (not open) the store for a URL or a plain SQLite path. ``create=False``:
    opening it raises ``NoDatabase`` where there is no lashflow database yet, and makes
    none (no file, no folder, no schema): what read-only commands use. ``readonly``
    (or ``?mode=ro`` on a SQLite URL): the database itself refuses every write (SQLite
    opened ``mode=ro``; PostgreSQL sessions ``default_transaction_read_only``)."""
    store = _store_for(resolve_db_url(db))
    store.create = create
    store.readonly = readonly or store.readonly
    return store


def _store_for(url: str) -> Store:
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore  # imported lazily: keeps `import lashflow` light

        return PostgresStore(url)
    if url.startswith("sqlite:"):
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise DbError(f"bad database URL {url!r}: use sqlite:///relative.db or sqlite:////abs/path.db")
        path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
        if not path:
            raise DbError(f"bad database URL {url!r}: it names no file")
        options = {k.lower(): v[-1] for k, v in parse_qs(parsed.query).items()}
        synchronous = options.get("synchronous", "full").upper()
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise DbError(f"bad database URL {url!r}: synchronous must be full or normal")
        if options.get("mode", "rw") not in ("ro", "rw"):
            raise DbError(f"bad database URL {url!r}: mode must be ro or rw")
        from .sqlite import SqliteStore

        store = SqliteStore(path, synchronous=synchronous)
        store.readonly = options.get("mode") == "ro"
        return store
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise DbError(f"bad database URL {url!r}: unsupported scheme {scheme!r} "
                      "(use sqlite:///file.db or postgresql://user@host:port/db)")
    from .sqlite import SqliteStore

    return SqliteStore(url)
