"""The examples of docs/language.md are real: each ```lash block parses and links (the one
that shows an error fails with the error it claims)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lashflow.lang import Catalog, check

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
BLOCKS = re.findall(r"```lash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
CATALOG = Catalog.permissive(
    {"tools": ["quote", "request_approval", "charge", "fetch", "read"]}
)


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=[b.split("\n")[0][:40] for b in BLOCKS])
def test_example(block: str) -> None:
    claimed = re.search(r"# error: (.*)", block)
    diags = check(block, CATALOG)
    if claimed:
        assert [d.message for d in diags] == [claimed.group(1).strip()]
    else:
        assert diags == [], diags[0].render(block, "example.lash")
