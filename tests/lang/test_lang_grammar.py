"""The grammar file itself: conflict-free LALR(1) except the documented `sleep` operand,
and loaded lazily so importing lashflow stays cheap."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from lark import Lark

from lashflow.lang.parser import GRAMMAR_PATH, grammar_text
from lashflow.lang.tokenpass import ReplayLexer

ROOT = Path(__file__).resolve().parents[2]
SLEEP_RULE = "| KW_SLEEP (FOR | KW_UNTIL) expr       -> sleep"


def test_grammar_ships_with_the_package() -> None:
    assert GRAMMAR_PATH.is_file()
    assert GRAMMAR_PATH.parent.name == "grammar"


def test_only_the_sleep_operand_conflicts() -> None:
    text = grammar_text()
    assert SLEEP_RULE in text
    # strict mode raises on any shift/reduce or reduce/reduce conflict
    Lark(text.replace(SLEEP_RULE, ""), parser="lalr", lexer=ReplayLexer, strict=True)


def test_import_does_not_load_lark() -> None:
    code = "import sys, lashflow.lang; print('lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def _checkout_copy(dest: Path) -> Path:
    """The files a source checkout (or an sdist) has, copied without any symlink."""
    dest.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "grammar", dest / "grammar")
    shutil.copytree(ROOT / "lashflow", dest / "lashflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _grammar_seen(path_entry: Path, cwd: Path) -> dict[str, str]:
    """Where a fresh interpreter that imports lashflow from ``path_entry`` finds the
    grammar, and that it parses with it."""
    code = (f"import sys; sys.path.insert(0, {str(path_entry)!r}); import json, lashflow; "
            "from lashflow.lang import parse; from lashflow.lang.parser import GRAMMAR_PATH; "
            "parse('finish 1'); print(json.dumps({'package': lashflow.__file__, "
            "'grammar': str(GRAMMAR_PATH)}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_a_built_package_carries_the_grammar(tmp_path: Path) -> None:
    source = _checkout_copy(tmp_path / "source")
    built = tmp_path / "built"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(built)],
                   cwd=source, capture_output=True, check=True)
    shutil.rmtree(source)  # the package must not need its source tree
    seen = _grammar_seen(built, tmp_path)
    assert seen["package"] == str(built / "lashflow" / "__init__.py")
    assert seen["grammar"] == str(built / "lashflow" / "grammar" / "lashlang.lark")
    assert Path(seen["grammar"]).read_text(encoding="utf-8") == grammar_text()


def test_a_checkout_without_symlinks_reads_the_grammar_source(tmp_path: Path) -> None:
    source = _checkout_copy(tmp_path / "source")
    assert not [p for p in source.rglob("*") if p.is_symlink()]
    seen = _grammar_seen(source, tmp_path)
    assert seen["package"] == str(source / "lashflow" / "__init__.py")
    assert seen["grammar"] == str(source / "grammar" / "lashlang.lark")
