"""The Pygments lexer is registered under the ``pygments.lexers`` entry point, so
pygmentize, Sphinx and MkDocs find it by name or by the ``.lash`` extension, and it
colours every program of the repository without an error token."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, String

from editor_support import ROOT
from lash_corpus import programs

from lashflow.lexer import LashlangLexer


def test_it_is_found_by_name_and_by_file_name() -> None:
    assert "lashlang" in {e.name for e in entry_points(group="pygments.lexers")}
    assert isinstance(get_lexer_by_name("lash"), LashlangLexer)
    assert isinstance(get_lexer_for_filename("orders.lash"), LashlangLexer)


def test_every_program_lexes_without_an_error_token() -> None:
    lexer = LashlangLexer()
    for name, source in programs():
        tokens = list(lexer.get_tokens(source))
        assert "".join(v for _, v in tokens) == source + ("" if source.endswith("\n") else "\n")
        assert not [v for t, v in tokens if t in Error], name


def test_what_each_word_becomes() -> None:
    source = ('# c\nprocess p(n: int) {\n  x = await tools.f({ a: r"\\d" + "a\\n" })?\n'
              '  sleep for "5s"\n  finish len([1, 2.5])\n}\n')
    got = [(t, v) for t, v in LashlangLexer().get_tokens(source) if v.strip()]
    assert (Comment.Single, "# c") in got
    assert (Name.Function, "p") in got and (Name.Function, "f") in got
    assert (Keyword, "await") in got and (Keyword, "finish") in got
    assert (String.Escape, "\\n") in got and (String, "\\d") in got
    assert (Number.Other, '"5s"') in got and (Number, "2.5") in got
    assert (Name.Builtin, "len") in got and (Keyword.Type, "int") in got


def test_pygmentize_highlights_a_file(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pygments", "-f", "html",
                           str(ROOT / "processes" / "approval.lash")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '<span class="k">await</span>' in done.stdout
