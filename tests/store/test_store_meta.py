"""Opening a store: secret, schema versions, concurrent openers, bad URLs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from lashflow.errors import DbError
from lashflow.store import RunQuery, RunRecord, open_store
from lashflow.store.base import SCHEMA_VERSION


async def test_secret_is_random_and_stable_across_reopen(backend: Any) -> None:
    async with backend.make() as store:
        secret = await store.secret()
        assert isinstance(secret, bytes) and len(secret) >= 32
        assert secret != bytes(len(secret))
    async with backend.make() as reopened:
        assert await reopened.secret() == secret


async def test_reopen_keeps_the_data(backend: Any) -> None:
    async with backend.make() as store:
        await store.create_run(RunRecord("r", "src", None, {"a": 1}, "in"))
    async with backend.make() as store:
        run = await store.get_run("r")
        assert run is not None and run.input == {"a": 1}


async def test_workers_opening_a_fresh_database_at_once_agree(backend: Any) -> None:
    stores = [backend.make() for _ in range(4)]
    await asyncio.gather(*[store.open() for store in stores])
    try:
        secrets = {await store.secret() for store in stores}
        assert len(secrets) == 1
    finally:
        for store in stores:
            await store.close()


async def test_a_newer_schema_version_is_refused(backend: Any) -> None:
    async with backend.make():
        pass
    await backend.set_schema_version(SCHEMA_VERSION + 1)
    store = backend.make()
    with pytest.raises(DbError) as info:
        await store.open()
    message = str(info.value)
    assert "\n" not in message and "newer" in message and str(SCHEMA_VERSION + 1) in message
    assert info.value.code == "db_error"


async def test_the_current_schema_version_opens(backend: Any) -> None:
    async with backend.make():
        pass
    await backend.set_schema_version(SCHEMA_VERSION)
    async with backend.make() as store:
        assert await store.list_runs() == []


async def test_a_bad_url_is_a_one_line_db_error(backend: Any, tmp_path: Path) -> None:
    urls = backend.bad_urls(tmp_path)
    assert len(urls) >= 5
    for url in urls:
        with pytest.raises(DbError) as info:
            store = open_store(url)
            await store.open()
        message = str(info.value)
        assert message and "\n" not in message, (url, message)
        assert "Traceback" not in message
        assert "hunter2" not in message  # never the password
        if backend.name == "postgres":  # no driver exception chained into the traceback
            error = info.value
            assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


async def test_a_version_1_file_is_brought_to_the_current_version_with_its_journal(
        backend: Any) -> None:
    """Version 2 only changed how SQLite may encode a lone first attempt (ADR 0010): a
    version-1 journal, with its attempt rows, opens and reads the same."""
    from lashflow.store import AttemptRecord, Commit, StepRecord

    async with backend.make() as store:
        await store.create_run(RunRecord("r", "src", None, {}, "in"))
        await store.commit(Commit("r", None, steps=[StepRecord("r", "k:0", "tool", status="done",
                                                               outcome=1)],
                                  attempts=[AttemptRecord("r", "k:0", 1, "ok")]))
    await backend.set_schema_version(1)
    async with backend.make() as store:
        steps, attempts = await store.load_journal("r")
        assert [s.outcome for s in steps] == [1]
        assert attempts == [AttemptRecord("r", "k:0", 1, "ok")]
    async with backend.make() as store:  # it was migrated: no migration runs again
        page = await store.query_runs(RunQuery())  # version 3's run list works on it
        assert [run.run_id for run in page.runs] == ["r"]
        # version 4's signals keyed by sender work on it too
        assert await store.add_signal("r", "x", 1, sender="p/s") == 1
        assert await store.add_signal("r", "x", 1, sender="p/s") == 1
        assert await store.versions() == []  # version 5's deployed versions too
        assert await store.list_schedules() == []  # and version 6's schedules
        # and version 7's event log
        assert [(e.seq, e.kind) for e in await store.run_events("r")] == [(1, "run"), (2, "step")]
        assert await store.list_queues() == []  # and version 8's queues
        # and version 9's queue order: nothing waits in any queue
        assert (await store.take_queued(0.0, 10, "w", 30.0)).claimed == []
        assert await store.rate_limits() == []  # and version 10's rate limits
        assert await store.take_rate("tool:m.t", (2.0, 1.0), 3, 100.0) is not None
        assert await store.slots_held(100.0) == {}
    assert SCHEMA_VERSION == 11
