"""What the editor tests share: the extension folder, and Node.js with the extension's
npm packages (``.ci/run`` installs them; a test skips without them only when
LASHFLOW_REQUIRE_NODE is unset)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"
sys.path.insert(0, str(ROOT / "tests" / "lang"))


def node_tools() -> str:
    """The ``node`` executable, with the extension's npm packages installed."""
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "node is not installed"
    elif not (VSCODE / "node_modules" / "vscode-textmate").is_dir():
        missing = "run `npm ci` in editors/vscode"
    if missing is not None:
        if os.environ.get("LASHFLOW_REQUIRE_NODE"):
            pytest.fail(f"LASHFLOW_REQUIRE_NODE is set but {missing}")
        pytest.skip(f"{missing} (CI sets LASHFLOW_REQUIRE_NODE, which fails instead)")
    assert node is not None
    return node
