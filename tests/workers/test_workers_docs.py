"""docs/scaling.md stays true: its links and anchors resolve, and its table of worker
options matches the `lashflow worker` command."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from lashflow.cli import app

DOCS = Path(__file__).resolve().parents[2] / "docs"


def slugs(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_scaling_links_resolve() -> None:
    text = (DOCS / "scaling.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([\w./-]+\.md)(?:#([\w-]+))?\)", text)
    assert links
    for target, anchor in links:
        assert (DOCS / target).exists(), target
        if anchor:
            assert anchor in slugs((DOCS / target).read_text(encoding="utf-8")), (target, anchor)


def test_scaling_lists_the_worker_options_with_their_defaults() -> None:
    text = (DOCS / "scaling.md").read_text(encoding="utf-8")
    command = typer.main.get_command(app).commands["worker"]
    params = {opt: param for param in command.params for opt in param.opts}
    rows = re.findall(r"^\s*\| `(--[\w-]+)[^`]*`[^|]*\|\s*([^|]*?)\s*\|", text, re.M)
    assert {option for option, _ in rows} >= {"--concurrency", "--poll", "--lease-ttl", "--tools",
                                              "--once"}
    for option, default in rows:
        assert option in params, option
        if default:
            assert float(default) == float(params[option].default), (option, default)
