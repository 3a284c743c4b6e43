"""Every example of docs/testing-workflows.md runs as written: the page's Python blocks,
in order, make one test module, run by pytest against the repository's
``processes/fulfill.lash``; the failure message the page shows is the one printed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from plugin_support import inner

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "testing-workflows.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(encoding="utf-8"),
                      re.MULTILINE | re.DOTALL)


def test_the_page_runs_as_written(pytester: pytest.Pytester, warm: None) -> None:
    code = blocks("python")
    tests = [name for block in code for name in re.findall(r"^def (test_\w+)", block, re.M)]
    assert len(tests) >= 8
    shutil.copytree(ROOT / "processes", pytester.path / "processes")
    pytester.makepyfile(test_page="\n\n".join(code))
    result = inner(pytester, "-s", "-v")
    result.assert_outcomes(passed=len(tests))
    out = [line.rstrip() for line in result.outlines]
    (shown,) = blocks("text")
    expected = [line.rstrip() for line in shown.splitlines()]
    start = next(i for i, line in enumerate(out) if line.endswith(expected[0]))
    assert out[start + 1:start + len(expected)] == expected[1:]


def test_the_page_shows_the_source_it_tests() -> None:
    (lash,) = blocks("lash")
    assert lash == (ROOT / "processes" / "fulfill.lash").read_text(encoding="utf-8")
