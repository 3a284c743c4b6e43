"""Shared fixtures: every test gets its own temporary database; nothing outside tmp."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The parse cache (lashflow.lang.cache) of this session and every process it starts: a
# temp folder, never the user's own cache.
_PARSE_CACHE = tempfile.mkdtemp(prefix="lashflow-parse-cache-")
os.environ["LASHFLOW_CACHE_DIR"] = _PARSE_CACHE


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'journal.db'}"


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for `lashflow` subprocesses: the repo importable, a private database."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["LASHFLOW_DB"] = f"sqlite:///{tmp_path / 'cli.db'}"
    env.pop("LASHFLOW_TEST_MARKER", None)
    return env


def lashflow_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "lashflow", *args]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A throwaway PostgreSQL server started for this session goes with it."""
    from pg_support import stop_throwaway_server

    stop_throwaway_server()
    shutil.rmtree(_PARSE_CACHE, ignore_errors=True)


_SLOW_MODULES = frozenset(["test_hardening_soak", "test_hardening_fuzz", "test_lang_fuzz"])
_SPAWNS = ("subprocess", "run_cli", "lashflow_cmd", "Fleet")  # names a spawning module holds


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by what they need, so `-m` can pick a fast loop: ``postgres`` (runs
    against PostgreSQL), ``subprocess`` (starts lashflow processes), ``slow`` (soaks and
    fuzzing)."""
    for item in items:
        module = getattr(item, "module", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        fixtures = getattr(item, "fixturenames", ())
        if "postgres" in params.values() or "postgres_backend" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if module is not None and any(name in vars(module) for name in _SPAWNS):
            item.add_marker(pytest.mark.subprocess)
        if module is not None and module.__name__.rpartition(".")[2] in _SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
