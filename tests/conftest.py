"""Shared fixtures: every test gets its own temporary database; nothing outside tmp."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
