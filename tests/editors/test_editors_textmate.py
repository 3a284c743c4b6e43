"""The TextMate grammar (editors/vscode/syntaxes), tokenized as VS Code does it (npm's
vscode-textmate over vscode-oniguruma), gives every keyword, string (all eight forms,
escapes, raw strings), comment, number and duration of every example .lash file its
scope. The oracle is lashflow's own tokenizer: where it finds a string, the grammar must
colour exactly that text as a string."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from editor_support import VSCODE, node_tools
from lash_corpus import programs

from lashflow.lang import LangError
from lashflow.lang.format import comments_of
from lashflow.lang.tokens import tokenize

EVERY_FORM = '''# every literal form
// the other comment
a = "a\\n" + 'it\\'s' + """two
lines \\" here""" + \'\'\'x\'\'\'
b = r"C:\\new" + r'\\d+' + r"""raw
\\n""" + R\'\'\'x\'\'\'
n = [3, 2.5, 3., 0]
process nap(ms: int) {
  sleep for "5s"
  sleep for '250ms'
  sleep for "2m"
  sleep until "2030-01-01T00:00:00Z"
  if ms > 1 and not false { finish null } else { fail "no" }
}
'''
KEYWORDS = {"if", "else", "for", "in", "while", "break", "continue", "finish", "fail", "yield",
            "wake", "await", "sleep", "until", "print", "cancel", "let", "start", "process",
            "type", "signals", "and", "or", "not"}
DURATION = re.compile(r"\d+(?:\.\d*)?\s*(?:ms|s|m|h)\Z")


def tokenized(paths: list[Path]) -> dict[str, list[Any]]:
    node = node_tools()
    done = subprocess.run([node, str(VSCODE / "test" / "tokenize.js"), *map(str, paths)],
                          capture_output=True, text=True, timeout=300, cwd=VSCODE)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def scopes_by_offset(source: str, tokens: list[Any]) -> list[list[str]]:
    """The scopes of each character of ``source`` (newlines get none)."""
    lines = source.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    out: list[list[str]] = [[] for _ in source]
    for line, start, end, _text, scopes in tokens:  # an empty line has a token past its end
        for i in range(starts[line] + start, starts[line] + min(end, len(lines[line]))):
            out[i] = scopes
    return out


def check_file(source: str, tokens: list[Any]) -> int:
    """Every literal, comment and keyword that lashflow's tokenizer finds has the scope
    it should; returns how many were checked."""
    at = scopes_by_offset(source, tokens)

    def scopes(i: int) -> str:
        return " ".join(at[i])

    raw = tokenize(source)
    checked = 0
    for comment in comments_of(source, raw):
        for i in range(comment.start, comment.end):
            assert "comment.line" in scopes(i), (comment.text, scopes(i))
        checked += 1
    for k, tok in enumerate(raw):
        text = source[tok.start_pos:tok.end_pos]
        if tok.kind == "STRING":
            duration = DURATION.match(str(tok.value)) and text[0] in "\"'" \
                and raw[k - 1].kind == "for"
            for i in range(tok.start_pos, tok.end_pos):
                assert "string.quoted" in scopes(i) or source[i] == "\n", (text, i, scopes(i))
            if duration:
                assert "constant.numeric.duration" in scopes(tok.start_pos + 1), text
            elif text[0] in "rR":
                assert ".raw." in scopes(tok.start_pos + 2), text
                assert all("escape" not in scopes(i) for i in range(tok.start_pos, tok.end_pos))
            else:
                i = tok.start_pos + 1
                while i < tok.end_pos - 1:
                    if source[i] == "\\":
                        assert "constant.character.escape" in scopes(i), (text, i)
                        assert "constant.character.escape" in scopes(i + 1), (text, i)
                        i += 2
                        continue
                    i += 1
            checked += 1
        elif tok.kind == "NUMBER":
            assert all("constant.numeric" in scopes(i) for i in range(tok.start_pos, tok.end_pos)), text
            checked += 1
        elif text in KEYWORDS and raw[k + 1].kind != ":" and (k == 0 or raw[k - 1].kind != "."):
            assert re.search(r"keyword|storage\.(type|modifier)", scopes(tok.start_pos)), (
                text, scopes(tok.start_pos))
            checked += 1
    return checked


def test_every_example_and_every_literal_form(tmp_path: Path) -> None:
    files: list[tuple[Path, str]] = []
    (tmp_path / "forms.lash").write_text(EVERY_FORM)
    files.append((tmp_path / "forms.lash", EVERY_FORM))
    for n, (name, source) in enumerate(programs()):
        try:
            tokenize(source)
        except LangError:
            continue
        path = tmp_path / f"p{n}.lash"
        path.write_text(source)
        files.append((path, source))
    result = tokenized([p for p, _ in files])
    total = 0
    for path, source in files:
        total += check_file(source, result[str(path)])
    assert len(files) > 40 and total > 400


def test_the_forms_file_has_each_scope(tmp_path: Path) -> None:
    path = tmp_path / "forms.lash"
    path.write_text(EVERY_FORM)
    tokens = tokenized([path])[str(path)]
    seen = {scope for *_, scopes in tokens for scope in scopes}
    for scope in ["comment.line.number-sign.lashlang", "comment.line.double-slash.lashlang",
                  "string.quoted.double.lashlang", "string.quoted.single.lashlang",
                  "string.quoted.triple.lashlang", "string.quoted.double.raw.lashlang",
                  "string.quoted.single.raw.lashlang", "string.quoted.triple.raw.lashlang",
                  "constant.character.escape.lashlang", "constant.numeric.lashlang",
                  "constant.numeric.duration.lashlang", "keyword.control.lashlang",
                  "storage.type.process.lashlang", "entity.name.function.process.lashlang",
                  "keyword.operator.logical.lashlang", "constant.language.lashlang"]:
        assert scope in seen, scope
    # the multi-line string's second line is still a string, and its escape an escape
    second = [t for t in tokens if t[0] == 3]
    assert all("string.quoted.triple.lashlang" in t[4] for t in second
               if t[3] and t[2] <= len('lines \\" here"""'))


@pytest.mark.parametrize("snippet, scope", [
    ("x = 1 # note", "comment.line.number-sign.lashlang"),
    ('s = "a\\"b"', "constant.character.escape.lashlang"),
])
def test_a_line_alone(tmp_path: Path, snippet: str, scope: str) -> None:
    path = tmp_path / "one.lash"
    path.write_text(snippet + "\n")
    tokens = tokenized([path])[str(path)]
    assert any(scope in t[4] for t in tokens)
