"""Store faults on SQLite: a locked database, a database that refuses
writes in the middle of a run (read-only, disk full), corrupt journal rows, a newer
schema. In every case the answer is a clear ``db_error``-family error, nothing
committed is lost, and the run continues once the fault is gone.

What is real and what is simulated (the tests run as root, where ``chmod`` does not
stop writes, and a full disk cannot be made without privileges):

* the lock is real: another process holds ``BEGIN EXCLUSIVE`` on the file;
* "read-only" is ``PRAGMA query_only = 1`` set on the engine's own connection in the
  middle of a run: SQLite then refuses every write with SQLITE_READONLY, the error a
  read-only file gives;
* "disk full" is ``PRAGMA max_page_count`` set to the current size on that
  connection: the next write that needs a page fails with SQLITE_FULL ("database or
  disk is full"), the error a full disk gives;
* corruption is real: bytes written into the ``steps`` table with the sqlite3 module.
"""

from __future__ import annotations

import asyncio
import json
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from hardening_support import cli_env, run_cli
from lashflow import Engine, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import DbError
from lashflow.store.base import SCHEMA_VERSION, JournalCorrupt
from lashflow.store.check import check_store

CALLS: dict[str, int] = {}
GATE: dict[str, asyncio.Event] = {}


def _count(name: str) -> int:
    CALLS[name] = CALLS.get(name, 0) + 1
    return CALLS[name]


@tool
async def step(call: ToolCall) -> ToolResult:
    """Counts its calls; answers a 20 KB text so each outcome needs new pages."""
    n = _count(f"step:{call.input['i']}")
    return ToolResult.ok({"i": call.input["i"], "n": n, "pad": "x" * 20_000})


@tool
async def gated(call: ToolCall) -> ToolResult:
    """Waits until the test opens the gate (so a fault can be set up meanwhile)."""
    _count("gated")
    GATE["entered"].set()
    await GATE["open"].wait()
    return ToolResult.ok({"i": call.input["i"], "pad": "x" * 20_000})


@tool(idempotent=False)
async def charge(call: ToolCall) -> ToolResult:
    """Not idempotent: its start is committed before it runs."""
    _count("charge")
    return ToolResult.ok("charged")


FLOW = """
process p(n: int) {
  a = await tools.step({ i: 1 })?
  b = await tools.gated({ i: 2 })?
  c = await tools.charge({ i: 3 })?
  d = await tools.step({ i: 4 })?
  finish [a.i, b.i, c, d.i]
}
"""
TOOLS = [step, gated, charge]


def _reset() -> None:
    CALLS.clear()
    GATE["entered"] = asyncio.Event()
    GATE["open"] = asyncio.Event()


# --------------------------------------------------------------------------- the lock

LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
print("released", flush=True)
"""


def _lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process holding the write lock for ``seconds``."""
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(path), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


async def _fresh(db: Path) -> None:
    async with Engine(db=f"sqlite:///{db}", tools=TOOLS):
        pass  # creates the schema (WAL mode) before anyone locks it


async def test_a_locked_database_waits_the_busy_timeout_then_fails_clearly(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    await _fresh(db)
    locker = _lock(db, 60)
    try:
        engine = Engine(db=f"sqlite:///{db}", tools=TOOLS)
        engine.store.backend.busy_timeout = 0.5  # type: ignore[attr-defined]
        async with engine:  # opening reads only (WAL readers never wait for the writer)
            assert await engine.list() == []
            _reset()
            GATE["open"].set()
            started = time.perf_counter()
            with pytest.raises(DbError) as info:
                await engine.run(FLOW, input={"n": 1})  # the first write meets the lock
            waited = time.perf_counter() - started
    finally:
        _stop(locker)
    assert waited >= 0.4  # it waited out the busy timeout (a load can only lengthen it), then gave up
    assert info.value.code == "db_error"
    assert "database is locked" in info.value.message and str(db) in info.value.message


async def test_a_lock_released_within_the_busy_timeout_is_waited_out(tmp_path: Path) -> None:
    db = tmp_path / "briefly.db"
    await _fresh(db)
    locker = _lock(db, 0.5)
    try:
        started = time.perf_counter()
        _reset()
        GATE["open"].set()
        async with Engine(db=f"sqlite:///{db}", tools=TOOLS) as engine:
            outcome = await engine.run(FLOW, input={"n": 1})
        assert outcome.status is RunStatus.FINISHED
        assert time.perf_counter() - started >= 0.3
    finally:
        _stop(locker)


def test_a_locked_database_through_the_cli_is_one_line(tmp_path: Path) -> None:
    """`lashflow submit` while another process holds the write lock: after the busy
    timeout (5 s), exit 2 and `error[db_error]: ... database is locked`, no traceback.
    Reading (`lashflow list`) is not held up by the writer at all."""
    db = tmp_path / "cli.db"
    asyncio.run(_fresh(db))
    env = cli_env(f"sqlite:///{db}")
    flow = tmp_path / "tiny.lash"
    flow.write_text("process tiny(n: int) {\n  finish n\n}\n")
    locker = _lock(db, 60)
    try:
        assert run_cli(env, "list").returncode == 0
        started = time.perf_counter()
        listed = run_cli(env, "submit", str(flow), "--input", '{"n": 1}')
        waited = time.perf_counter() - started
    finally:
        _stop(locker)
    assert listed.returncode == 2
    assert listed.stderr.startswith("error[db_error]: ") and "database is locked" in listed.stderr
    assert "Traceback" not in listed.stderr and len(listed.stderr.strip().splitlines()) == 1
    assert waited >= 4.5


# --------------------------------------------------------------------------- write faults

FAULTS = {
    "read_only": ("PRAGMA query_only = 1", "PRAGMA query_only = 0", "readonly database"),
    "disk_full": ("PRAGMA max_page_count = {pages}", "PRAGMA max_page_count = 1073741823",
                  "database or disk is full"),
    "locked": (None, None, "database is locked"),
}


async def _set(engine: Engine, pragma: str) -> None:
    def apply(conn: sqlite3.Connection) -> None:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(pragma.format(pages=pages))
    await engine.store.backend._call(apply)  # type: ignore[attr-defined]


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_write_fault_mid_run_loses_nothing_and_resume_finishes(fault: str,
                                                                      tmp_path: Path) -> None:
    """The fault starts while ``gated`` (step 2) runs, so its outcome cannot be
    journaled: the run stops with a db_error, step 1 stays recorded, and once the fault
    is gone ``resume`` finishes it. Step 1 never runs twice; ``gated`` runs again
    (idempotent, its outcome was never committed); the non-idempotent ``charge`` runs
    exactly once."""
    _reset()
    db = tmp_path / f"{fault}.db"
    set_fault, clear_fault, message = FAULTS[fault]
    engine = Engine(db=f"sqlite:///{db}", tools=TOOLS)
    engine.store.backend.busy_timeout = 0.5  # type: ignore[attr-defined]
    locker = None
    async with engine:
        task = asyncio.create_task(engine.run(FLOW, input={"n": 1}, run_id="r"))
        await asyncio.wait_for(GATE["entered"].wait(), 10)
        if set_fault is None:
            locker = _lock(db, 60)
        else:
            await _set(engine, set_fault)
        GATE["open"].set()
        try:
            with pytest.raises(DbError) as info:
                await asyncio.wait_for(task, 30)
        finally:
            if locker is not None:
                _stop(locker)
        assert message in info.value.message
        if clear_fault is not None:
            await _set(engine, clear_fault)
        before = [(s.tool, s.status) for s in await engine.steps("r")]
        assert before == [("tools.step", "done")]  # committed before the fault: kept
        outcome = await engine.resume("r")
        assert outcome.status is RunStatus.FINISHED and outcome.result == [1, 2, "charged", 4]
        assert await check_store(engine.store) == []
    assert CALLS == {"step:1": 1, "gated": 2, "charge": 1, "step:4": 1}


async def test_a_fault_in_another_engine_is_recovered_after_its_lease(tmp_path: Path) -> None:
    """The faulting engine gives up (its process would exit); another engine takes the
    run over once the lease expires and finishes it."""
    _reset()
    db = f"sqlite:///{tmp_path / 'lease.db'}"
    first = Engine(db=db, tools=TOOLS, lease_ttl=0.5)
    async with first:
        task = asyncio.create_task(first.run(FLOW, input={"n": 1}, run_id="r"))
        await asyncio.wait_for(GATE["entered"].wait(), 10)
        await _set(first, "PRAGMA query_only = 1")
        GATE["open"].set()
        with pytest.raises(DbError):
            await asyncio.wait_for(task, 30)
    await asyncio.sleep(0.6)
    async with Engine(db=db, tools=TOOLS) as second:
        assert [o.run_id for o in await second.recover()] == ["r"]
        outcome = await second.get("r")
        assert outcome.status is RunStatus.FINISHED and outcome.result == [1, 2, "charged", 4]
        assert await check_store(second.store) == []
    assert CALLS == {"step:1": 1, "gated": 2, "charge": 1, "step:4": 1}


# --------------------------------------------------------------------------- corruption

PARKS = """
process p(n: int) {
  a = await tools.step({ i: 1 })?
  b = await tools.step({ i: 2 })?
  c = await tools.wait_here({ i: 3 })?
  finish [a.i, b.i, c]
}
"""


@tool
async def wait_here(call: ToolCall) -> ToolResult:
    from lashflow import PendingCompletion

    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


def _corrupt(db: Path, run_id: str, seq: int, sql: str, *params: Any) -> str:
    conn = sqlite3.connect(db)
    key = conn.execute("SELECT step_key FROM steps WHERE run_id = ? AND seq = ?",
                       (run_id, seq)).fetchone()[0]
    conn.execute(sql, (*params, run_id, key))
    conn.commit()
    conn.close()
    return key


CORRUPTIONS = {
    "garbage": ("UPDATE steps SET outcome = ? WHERE run_id = ? AND step_key = ?", "\x00garbage"),
    "truncated": ("UPDATE steps SET outcome = substr(outcome, 1, 40) WHERE run_id = ? AND "
                  "step_key = ?",),
    "null": ("UPDATE steps SET outcome = NULL WHERE run_id = ? AND step_key = ?",),
    "changed_value": ("UPDATE steps SET outcome = replace(outcome, '\"i\":1', '\"i\":7') "
                      "WHERE run_id = ? AND step_key = ?",),
    "wrong_shape": ("UPDATE steps SET outcome = ?, detail = '{}' WHERE run_id = ? AND "
                    "step_key = ?", "[1, 2]"),  # no checksum (an old row): the shape is checked
    "garbage_no_checksum": ("UPDATE steps SET outcome = ?, detail = '{}' WHERE run_id = ? AND "
                            "step_key = ?", "{\"status\": \"ok\", \"val"),
    "bad_detail": ("UPDATE steps SET detail = ? WHERE run_id = ? AND step_key = ?", "{\"crc\":"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
async def test_a_corrupt_journal_row_is_detected_and_never_replayed(kind: str,
                                                                    tmp_path: Path) -> None:
    _reset()
    db = tmp_path / f"{kind}.db"
    url = f"sqlite:///{db}"
    async with Engine(db=url, tools=[step, wait_here]) as engine:
        parked = await engine.run(PARKS, input={"n": 1}, run_id="r")
        assert parked.status is RunStatus.WAITING
        key = parked.waiting[0].key
    sql, *params = CORRUPTIONS[kind]
    step_key = _corrupt(db, "r", 1, sql, *params)
    calls_before = dict(CALLS)
    async with Engine(db=url, tools=[step, wait_here]) as engine:
        with pytest.raises(JournalCorrupt) as info:
            await engine.steps("r")
        assert info.value.code == "journal_corrupt"
        assert "run r" in info.value.message and step_key in info.value.message
        problems = await check_store(engine.store)
        assert [p.step_key for p in problems] == [step_key]  # the checker sees it too
        assert problems[0].rule in ("unreadable", "no_outcome")
        # delivering the key drives the run: it stops in needs_attention, replays nothing
        status = await engine.complete(key, ToolResult.ok("late"))
        assert status is RunStatus.NEEDS_ATTENTION
        record = await engine.get_record("r")
        assert record.error is not None and record.error["code"] == "journal_corrupt"
        assert step_key in record.error["message"]
        again = await engine.resume("r")
        assert again.status is RunStatus.NEEDS_ATTENTION
    assert CALLS == calls_before  # no tool ran again on the strength of a bad row
    if kind != "garbage":
        return  # the CLI's answer is the same for every kind: checked once

    shown = run_cli(cli_env(url), "show", "r")
    assert shown.returncode == 2
    assert shown.stdout.startswith("run r: needs_attention")  # the run's own row still reads
    assert shown.stderr.startswith("error[journal_corrupt]: run r: the journal row of step "
                                   f"{step_key} is corrupt")
    assert "Traceback" not in shown.stderr
    as_json = run_cli(cli_env(url), "show", "r", "--json")
    assert as_json.returncode == 2
    data = json.loads(as_json.stdout)
    assert data["status"] == "needs_attention" and data["steps"] == []
    assert data["journal_error"]["code"] == "journal_corrupt"
    listed = run_cli(cli_env(url), "list", "--json")  # the rest of the database still reads
    assert listed.returncode == 0, listed.stderr


async def test_a_missing_blob_is_corruption_too(tmp_path: Path) -> None:
    db = tmp_path / "blob.db"

    @tool
    async def big(call: ToolCall) -> ToolResult:
        return ToolResult.ok("y" * 100_000)  # > 64 KiB: stored once as a blob

    async with Engine(db=f"sqlite:///{db}", tools=[big, wait_here]) as engine:
        parked = await engine.run("a = await tools.big({})?\nb = await tools.wait_here({})?\n"
                                  "finish len(a)", run_id="r")
        assert parked.status is RunStatus.WAITING
    conn = sqlite3.connect(db)
    assert conn.execute("DELETE FROM blobs").rowcount == 1
    conn.commit()
    conn.close()
    async with Engine(db=f"sqlite:///{db}", tools=[big, wait_here]) as engine:
        with pytest.raises(JournalCorrupt) as info:
            await engine.steps("r")
        assert "blob" in info.value.message
        assert (await engine.resume("r")).status is RunStatus.NEEDS_ATTENTION


# --------------------------------------------------------------------------- schema


def test_a_database_from_a_newer_lashflow_is_refused_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    asyncio.run(_fresh(db))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    env = cli_env(f"sqlite:///{db}")
    for args in (["list"], ["worker", "--once"]):
        result = run_cli(env, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error[db_error]: database ")
        assert (f"schema version 99, newer than this lashflow supports ({SCHEMA_VERSION}); "
                "upgrade lashflow") in result.stderr
        assert "Traceback" not in result.stderr
    conn = sqlite3.connect(db)  # refused without touching it
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "99"
    conn.close()


FOREIGN_META = {
    "text version": "INSERT INTO meta VALUES ('schema_version', 'abc')",
    "short secret": "INSERT INTO meta VALUES ('schema_version', '{v}'), ('secret', x'0102')",
    "text secret": "INSERT INTO meta VALUES ('schema_version', '{v}'), ('secret', 'abc')",
}


@pytest.mark.parametrize("case", sorted(FOREIGN_META))
def test_another_applications_meta_table_is_a_db_error(case: str, tmp_path: Path) -> None:
    db = tmp_path / "theirs.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB)")
    conn.execute(FOREIGN_META[case].format(v=SCHEMA_VERSION))
    conn.commit()
    conn.close()
    flow = tmp_path / "tiny.lash"
    flow.write_text("process tiny(n: int) {\n  finish n\n}\n")
    for args in (["list"], ["run", str(flow), "--input", '{"n": 1}']):
        result = run_cli(cli_env(f"sqlite:///{db}"), *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error[db_error]: database ")
        assert "meta table lashflow did not write" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def _file_size_limit(limit: int) -> Callable[[], None]:
    """A child process whose files cannot grow past ``limit`` bytes: its writes beyond
    fail as on a full disk (EFBIG; the signal that would kill it is ignored)."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_disk_full_while_the_file_is_created_is_clear_and_the_file_usable_later(
        tmp_path: Path) -> None:
    """The disk fills while a new database's schema is written: SQLite rolls the
    transaction back itself; the answer names the disk (it used to be `cannot rollback -
    no transaction is active`), and once space returns the same file works."""
    db = tmp_path / "new.db"
    flow = tmp_path / "tiny.lash"
    flow.write_text("process tiny(n: int) {\n  finish n\n}\n")
    args = [sys.executable, "-m", "lashflow", "run", str(flow), "--input", '{"n": 1}']
    env = cli_env(f"sqlite:///{db}")
    full = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60,
                          preexec_fn=_file_size_limit(40_000))
    assert full.returncode == 2, full.stderr
    assert full.stderr.startswith("error[db_error]: ") and "disk may be full" in full.stderr
    assert "cannot rollback" not in full.stderr and "Traceback" not in full.stderr
    assert db.exists()  # half-created
    later = run_cli(env, "run", str(flow), "--input", '{"n": 1}')
    assert later.returncode == 0, later.stderr


def test_a_corrupt_run_row_is_one_clear_line_and_other_runs_still_show(tmp_path: Path) -> None:
    """Found here: a run row whose JSON did not decode made every command that lists
    runs die with internal_error (a raw JSONDecodeError)."""
    db = tmp_path / "rows.db"

    async def make() -> None:
        async with Engine(db=f"sqlite:///{db}") as engine:
            await engine.run("finish 1", run_id="good")
            await engine.run("finish 2", run_id="bad")

    asyncio.run(make())
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET result = '{oops' WHERE run_id = 'bad'")
    conn.commit()
    conn.close()
    env = cli_env(f"sqlite:///{db}")
    listed = run_cli(env, "list")  # a summary does not read the result: both list
    assert listed.returncode == 0 and "bad " in listed.stdout and "good " in listed.stdout
    result = run_cli(env, "show", "bad")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error[journal_corrupt]: run bad: its row in the runs "
                                    "table is corrupt")
    assert "Traceback" not in result.stderr
    assert run_cli(env, "show", "good").returncode == 0


@pytest.mark.parametrize("where", ["directory", "proc_mem", "long_name"])
def test_a_path_that_cannot_be_a_database_is_one_line_every_time(tmp_path: Path,
                                                                  where: str) -> None:
    """aiosqlite's connection thread used to die printing a second traceback ("Event loop
    is closed") after the one-line error, about one time in seven: ten tries, one line each."""
    (tmp_path / "a.lash").write_text("finish 1\n")
    (tmp_path / "adir").mkdir()
    db = {"directory": str(tmp_path / "adir"), "proc_mem": "/proc/self/mem",
          "long_name": str(tmp_path / ("y" * 5000))}[where]
    for _ in range(10):
        done = subprocess.run([sys.executable, "-m", "lashflow", "run", str(tmp_path / "a.lash"),
                               "--db", db], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error[db_error]: cannot open database"), \
            done.stderr[:500]


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_database_deleted_or_replaced_under_a_live_engine_is_noticed(
        tmp_path: Path, how: str) -> None:
    """Writes stop with a clear db_error instead of going into an unlinked file (after
    which a new run of the same id would have redone every step)."""
    db = tmp_path / "live.db"
    async with Engine(db=f"sqlite:///{db}", tools=TOOLS) as engine:
        await engine.run("finish 1", run_id="before")
        for suffix in ("", "-wal", "-shm"):
            path = Path(str(db) + suffix)
            if path.exists():
                path.unlink()
        if how == "replaced":
            sqlite3.connect(db).close()  # another file at the same path
        with pytest.raises(DbError) as info:
            await engine.run("finish 2", run_id="after")
    assert info.value.message == (f"database {db} was deleted or replaced while lashflow had "
                                  "it open; nothing more is written (restore it, or start again)")
