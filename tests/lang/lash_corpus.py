"""Every Lashlang program the repository holds: the ``.lash`` files, the ```lash blocks
of the docs that parse (one shows an error on purpose), and the conformance programs.
The formatter and the language server are proven over all of them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
from test_conformance_static import OK_PROGRAMS  # noqa: E402


def lash_files() -> list[Path]:
    return sorted(p for p in ROOT.glob("**/*.lash")
                  if not any(part.startswith(".") or part == "node_modules"
                             for part in p.relative_to(ROOT).parts))


def doc_blocks() -> list[tuple[str, str]]:
    """``(name, source)`` of every ```lash block in README.md and docs/."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"```lash\n(.*?)```", text, re.S)):
            found.append((f"{doc.name}#{i}", block))
    return found


def programs() -> list[tuple[str, str]]:
    """``(name, source)`` of every program above (the error example included)."""
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in lash_files()]
    out += doc_blocks()
    out += [(f"conformance {k}", v) for k, v in sorted(OK_PROGRAMS.items())]
    return out
