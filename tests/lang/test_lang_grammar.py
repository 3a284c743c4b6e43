"""The grammar file itself: conflict-free LALR(1) except the documented `sleep` operand,
and loaded lazily so importing lashflow stays cheap."""

from __future__ import annotations

import subprocess
import sys

from lark import Lark

from lashflow.lang.parser import GRAMMAR_PATH, grammar_text
from lashflow.lang.tokenpass import ReplayLexer

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
