"""Commands that only read (or act on runs that must already exist) never create a
database: no file, no folder, no tables, no PostgreSQL schema; they say where they looked.

Found here: `lashflow list`, `show`, `waiting` and `complete` of an unknown key against a
path with no database created the folder, the file and every table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg

from pg_support import postgres_base_url, with_query

ROOT = Path(__file__).resolve().parents[2]


def _lashflow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("LASHFLOW_DB", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "lashflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


READS = [("list",), ("waiting",), ("show", "r1"), ("output", "r1", "1"),
         ("complete", "lfk_unknown", "--result", "1"), ("signal", "r1", "go"),
         ("cancel", "r1")]


def test_no_sqlite_file_or_folder_is_made(tmp_path: Path) -> None:
    for args in READS:
        done = _lashflow(tmp_path, *args, "--db", "sqlite:///state/none.db")
        assert "Traceback" not in done.stderr
        where = str(tmp_path / "state" / "none.db")
        if args[0] in ("list", "waiting"):
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith(f"nothing yet: no database at {where}")
        else:  # the error the command gives anyway, saying where lashflow looked
            code = "unknown_completion_key" if args[0] == "complete" else "unknown_run"
            assert done.returncode == 2, (args, done.stderr)
            assert done.stderr.startswith(f"error[{code}]: "), (args, done.stderr)
            assert f"(no database at {where}: nothing has run with it yet" in done.stderr
    default = _lashflow(tmp_path, "list")  # the default database, not there yet either
    assert default.returncode == 0 and "nothing yet" in default.stdout
    assert list(tmp_path.iterdir()) == []  # nothing was made
    listed = _lashflow(tmp_path, "list", "--json", "--db", "none.db")
    assert json.loads(listed.stdout)["runs"] == []
    assert list(tmp_path.iterdir()) == []


def test_an_existing_database_is_read_as_before(tmp_path: Path) -> None:
    (tmp_path / "one.lash").write_text("finish 1\n")
    assert _lashflow(tmp_path, "run", "one.lash", "--run-id", "r1").returncode == 0
    shown = _lashflow(tmp_path, "list")
    assert shown.returncode == 0 and "r1" in shown.stdout


async def test_no_postgres_schema_or_table_is_made(tmp_path: Path) -> None:
    schema = f"lashflow_ro_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_base_url(), timeout=10)
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        url = with_query(postgres_base_url(), search_path=schema)
        for args in READS:
            done = _lashflow(tmp_path, *args, "--db", url)
            assert "no lashflow tables at" in done.stdout + done.stderr, (args, done.stderr)
        tables = await admin.fetchval(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema)
        assert tables == 0
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()
