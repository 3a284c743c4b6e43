"""One command's invocation: what the root options chose and what the command learns as
it runs, carried in one object (typer's ``ctx.obj``) instead of module globals.

Renderers read it (times in UTC or local, the ``--db`` to repeat in printed commands, the
source a runtime error is shown against); ``run_async`` reads it for the Ctrl-C hint.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from shlex import quote
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

from ..errors import LashflowError, NoDatabase
from ..slotted import Slotted

if TYPE_CHECKING:  # the lean entry (``lean``) builds an invocation without typer
    import typer

    from ..durable.events import Event


class Invocation(Slotted):
    """Per-command state. ``utc``: ``--utc``; ``as_json``: the command's ``--json``;
    ``db_suffix``: `` --db URL`` when the database is not the default one (a command
    pasted into another shell must reach the same database); ``run_source``: the file a
    ``run`` started from and its text (its runtime errors get a caret); ``first_run``: the
    first run this command drove (what the Ctrl-C hint names)."""

    __slots__ = ("utc", "as_json", "db_suffix", "run_source", "first_run")

    def __init__(self, utc: bool = False, as_json: bool = False, db_suffix: str = "",
                 run_source: tuple[str, str] | None = None,
                 first_run: str | None = None) -> None:
        self.utc = utc
        self.as_json = as_json
        self.db_suffix = db_suffix
        self.run_source = run_source
        self.first_run = first_run

    @classmethod
    def of(cls, ctx: typer.Context, as_json: bool = False) -> "Invocation":
        """The invocation the root callback made (a fresh one if a command runs alone)."""
        root = ctx.find_root()
        if not isinstance(root.obj, cls):
            root.obj = cls()
        invocation: Invocation = root.obj
        invocation.as_json = as_json
        return invocation

    def when(self, moment: float | None) -> str:
        """ISO 8601 with the time zone's offset (local time; UTC with ``--utc`` or
        ``LASHFLOW_UTC=1``)."""
        if moment is None:
            return "-"
        zone = timezone.utc if self.utc or os.environ.get("LASHFLOW_UTC") == "1" else None
        return datetime.fromtimestamp(moment, zone).astimezone(zone).isoformat(timespec="seconds")

    def note_run(self, event: Event) -> None:
        """An engine listener: remember the first run this command touches."""
        if self.first_run is None and event.get("run_id"):
            self.first_run = event["run_id"]

    @asynccontextmanager
    async def engine(self, db: str | None, tools: Sequence[str] = (), *,
                     absent: Callable[[NoDatabase], LashflowError] | None = None,
                     **options: Any) -> AsyncIterator[Any]:
        """An open ``Engine`` over the public API (imported late: ``--help`` stays fast).
        Commands that only read, or act on runs that must exist, pass ``create=False``;
        ``absent`` turns "no database here" into the error the command would give anyway
        (an unknown run, an unknown key), which then names where lashflow looked."""
        from ..durable.engine import Engine

        self.db_suffix = db_option(db)
        try:
            async with Engine(db=db, modules=list(tools), **options) as eng:
                eng.listeners.append(self.note_run)
                yield eng
        except NoDatabase as missing:
            if absent is None:
                raise
            raise absent(missing) from None


def db_option(db: str | None) -> str:
    """`` --db URL`` for a database other than the default one (a password never shows)."""
    from ..store import DEFAULT_DB, resolve_db_url

    url = resolve_db_url(db)
    if url == DEFAULT_DB:
        return ""
    parts = urlsplit(url)
    if parts.password:  # never print a password: the reader fills it in
        url = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@",
                                                                    ":PASSWORD@")))
    return f" --db {quote(url)}"
