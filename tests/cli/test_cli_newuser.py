"""A new user's first five minutes, for real: a fresh checkout, a fresh virtualenv, and the
README's two commands typed literally.

The checkout is a copy of this working tree in a temporary folder (so nothing is written
into the repository: `pip install -e .` creates `lashflow.egg-info` and the first run
creates `.lashflow/lashflow.db` in the current directory). The venv installs lashflow
for real, dependencies included, from whatever index pip is configured with (a local
wheel cache on CI machines; about 10 s). The second command's `pytest` is bounded: it
collects the whole suite (every test module imports in the fresh environment) and runs
the walking-skeleton tests `tests/e2e`, instead of the full suite, which the main test
run already covers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST = "pip install -e . && lashflow run processes/fulfill.lash --input @processes/fulfill.input.json"
SECOND = "pip install -e '.[dev]' && pytest"
SKIP = shutil.ignore_patterns(".git", ".lashflow", "build", "*.egg-info", "__pycache__",
                              ".pytest_cache", ".hypothesis", ".benchmarks", "bench", ".venv*",
                              "*.db", "*.db-wal", "*.db-shm")


def shell(command: str, cwd: Path, env: dict[str, str], timeout: float = 300
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_readme_commands_in_a_fresh_venv(tmp_path: Path) -> None:
    assert FIRST in README and SECOND in README  # the commands below are the README's
    checkout = tmp_path / "lashflow"
    shutil.copytree(ROOT, checkout, ignore=SKIP)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LASHFLOW_DB", "VIRTUAL_ENV", "PYTHONHOME",
                        "TTY_COMPATIBLE", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(env_dir)

    first = shell(FIRST, checkout, env)
    assert first.returncode == 3, first.stdout + first.stderr  # waiting
    resolve = [line.strip() for line in first.stdout.splitlines()
               if line.strip().startswith("lashflow complete lfk_")]
    assert len(resolve) == 1, first.stdout
    assert (checkout / ".lashflow" / "lashflow.db").exists()
    where = shell("command -v lashflow", checkout, env).stdout.strip()
    assert where == str(env_dir / "bin" / "lashflow")  # the venv's console script

    # the README's step 2: approve with the printed command
    approve = shell(resolve[0].replace("'<json>'", "'{\"approved\": true}'"), checkout, env)
    assert approve.returncode == 0, approve.stdout + approve.stderr
    assert approve.stdout.splitlines()[0].endswith(" finished")
    assert '"charged":true' in approve.stdout

    install_dev = shell(SECOND.replace(" && pytest", ""), checkout, env)
    assert install_dev.returncode == 0, install_dev.stdout[-2000:] + install_dev.stderr[-2000:]
    collected = shell("pytest --collect-only -q -p no:cacheprovider", checkout, env)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    assert "tests/e2e/test_e2e_fulfill.py" in collected.stdout  # (-q -q: counts per file)
    assert "tests/cli/test_cli_commands.py" in collected.stdout
    e2e = shell("pytest tests/e2e -p no:cacheprovider", checkout, env)
    assert e2e.returncode == 0, e2e.stdout[-3000:] + e2e.stderr[-3000:]
    assert sys.executable not in where
