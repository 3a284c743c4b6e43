"""The pytest example of docs/changing-workflows.md runs as printed: recorded runs are
exported beside it, the example passes on the workflow they were recorded under and
fails, naming the step's JSON path, on an incompatible edit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from lashflow import Engine

ROOT = Path(__file__).resolve().parents[2]


def block(text: str, marker: str) -> str:
    """The fenced block whose first line is ``# marker``."""
    for found in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        if found.startswith(f"# {marker}\n"):
            return found
    raise AssertionError(f"no block {marker}")


def pytest_in(folder: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "test_shop_runs.py"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


async def test_the_replayer_example_runs_as_printed(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "changing-workflows.md").read_text(encoding="utf-8")
    for name in ("shop.lash", "shop.py", "test_shop_runs.py"):
        (tmp_path / name).write_text(block(text, name), encoding="utf-8")
    async with Engine(db=f"sqlite:///{tmp_path / 'runs.db'}",
                      modules=[str(tmp_path / "shop.py")]) as engine:
        ids = [(await engine.run(tmp_path / "shop.lash", "restock", {"sku": sku})).run_id
               for sku in ("a", "b")]
        (tmp_path / "runs.json").write_text(json.dumps(await engine.export(ids)))

    passed = pytest_in(tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "1 passed" in passed.stdout

    workflow = tmp_path / "shop.lash"
    workflow.write_text(workflow.read_text().replace("stock: item.stock", "stock: item.stock + 1"))
    failed = pytest_in(tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "differ at $.stock" in failed.stdout and "(line 4)" in failed.stdout
