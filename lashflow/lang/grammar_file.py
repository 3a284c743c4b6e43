"""Where the grammar is, without importing the parser (or Lark): the parse cache keys
its entries on the grammar file's stamp."""

from __future__ import annotations

from pathlib import Path


def _grammar_path() -> Path:
    """``grammar/lashlang.lark`` is the one source. An installed package carries a copy
    made when it was built (``setup.py`` puts it at ``lashflow/grammar/``); a checkout,
    installed in place or not, reads the source itself (no symlink needed)."""
    here = Path(__file__).resolve().parent
    packaged = here.parent / "grammar" / "lashlang.lark"
    return packaged if packaged.is_file() else here.parent.parent / "grammar" / "lashlang.lark"


GRAMMAR_PATH = _grammar_path()


def grammar_text() -> str:
    return GRAMMAR_PATH.read_text(encoding="utf-8")


__all__ = ["GRAMMAR_PATH", "grammar_text"]
