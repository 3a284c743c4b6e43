"""Fixtures for the CLI tests: an in-process runner (typer's CliRunner) bound to the test's
own database, and a subprocess runner (`python -m lashflow`) for the real thing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from lashflow.cli import app

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = ROOT / "processes"


class Ran:
    """What one command did: exit code, stdout, stderr, and stdout as JSON if asked."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def json(self) -> Any:
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"Ran(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def lf(db_url: str) -> Callable[..., Ran]:
    """``lf("run", file, ...)``: the CLI in-process against this test's database."""
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Ran:
        environment = {"LASHFLOW_DB": db_url, "TTY_COMPATIBLE": "0", "COLUMNS": "160"}
        environment.update(env or {})
        result = runner.invoke(app, [str(a) for a in args], env=environment)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Ran(result.exit_code, result.stdout, result.stderr)

    return invoke


@pytest.fixture
def lfx(cli_env: dict[str, str]) -> Callable[..., Ran]:
    """``lfx("run", file, ...)``: ``python -m lashflow`` as a real subprocess."""

    def run(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Ran:
        environment = dict(cli_env, TTY_COMPATIBLE="0")
        environment.update(env or {})
        done = subprocess.run([sys.executable, "-m", "lashflow", *map(str, args)],
                              capture_output=True, text=True, env=environment, cwd=ROOT,
                              timeout=timeout)
        return Ran(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def example() -> Callable[[str], tuple[Path, str]]:
    """``example("fanout")``: an example's .lash path and its ``@input`` argument."""

    def paths(name: str) -> tuple[Path, str]:
        return PROCESSES / f"{name}.lash", f"@{PROCESSES / (name + '.input.json')}"

    return paths
