"""A Pygments lexer for Lashlang, registered as the ``pygments.lexers`` entry point
``lashlang`` (aliases ``lash``, ``lashlang``; files ``*.lash``), so ``pygmentize``,
Sphinx and MkDocs highlight ```` ```lash ```` blocks once lashflow is installed.

It colours words, not meaning: the keywords that are only keywords at the start of a
statement (``finish``, ``while``...) are coloured wherever they stand.
"""

from __future__ import annotations

from typing import Any

from pygments.lexer import RegexLexer, bygroups, include, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Text, Whitespace)

__all__ = ["LashlangLexer"]

BUILTINS = ("len", "empty", "keys", "values", "trim", "to_string", "to_int", "to_float",
            "json_parse", "contains", "starts_with", "ends_with", "split", "join", "find",
            "grep_text", "slice", "push", "range", "ceil_div", "floor_div", "format",
            "validate", "wait_signal", "signal_run")
KEYWORDS = ("if", "else", "for", "in", "while", "break", "continue", "finish", "fail", "yield",
            "wake", "print", "cancel", "await", "start", "sleep", "until", "let", "signals")
TYPES = ("str", "string", "int", "integer", "float", "number", "bool", "boolean", "dict",
         "object", "any", "list", "enum", "Process", "TriggerHandle", "Type")
DURATION = r"\d+(?:\.\d*)?\s*(?:ms|s|m|h)"


def _string(quote: str, raw: bool) -> list:
    body: list[tuple[Any, ...]] = [(quote, String, "#pop")]
    if not raw:
        body.insert(0, (r"\\.", String.Escape))
    stop = "".join(sorted({"\\", quote[0]})) if not raw else quote[0]
    body.append((rf"[^{stop.replace(chr(92), chr(92) * 2)}]+", String))
    body.append((r".", String))
    return body


class LashlangLexer(RegexLexer):
    name = "Lashlang"
    aliases = ["lashlang", "lash"]
    filenames = ["*.lash"]
    mimetypes = ["text/x-lashlang"]
    url = "https://pypi.org/project/lashflow/"

    tokens = {
        "root": [
            (r"[\s;]+", Whitespace),
            (r"(#|//).*?$", Comment.Single),
            (r"@label\b", Name.Decorator),
            (r"(process)(\s+)([A-Za-z_]\w*)", bygroups(Keyword.Declaration, Whitespace,
                                                       Name.Function)),
            (r"(type)(\s+)([A-Za-z_]\w*)(?=\s*=)", bygroups(Keyword.Declaration, Whitespace,
                                                            Name.Class)),
            (r"(start)(\s+)([A-Za-z_]\w*)", bygroups(Keyword, Whitespace, Name.Function)),
            (rf"\"{DURATION}\"|'{DURATION}'", Number.Other),
            include("strings"),
            (r"\d+(\.\d*)?", Number),
            (words(("true", "false", "null"), suffix=r"\b"), Keyword.Constant),
            (words(("and", "or", "not"), suffix=r"\b"), Operator.Word),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(TYPES, suffix=r"\b"), Keyword.Type),
            (words(BUILTINS, prefix=r"\b", suffix=r"(?=\s*\()"), Name.Builtin),
            (r"(\.)([A-Za-z_]\w*)(?=\s*\()", bygroups(Punctuation, Name.Function)),
            (r"[A-Za-z_]\w*", Name),
            (r"->|==|!=|<=|>=|&&|\|\||[-+*/%<>=!?|]", Operator),
            (r"[{}()\[\],:.@]", Punctuation),
            (r".", Text),
        ],
        "strings": [
            (r'[rR]"""', String, "raw3d"),
            (r"[rR]'''", String, "raw3s"),
            (r'[rR]"', String, "raw1d"),
            (r"[rR]'", String, "raw1s"),
            (r'"""', String, "str3d"),
            (r"'''", String, "str3s"),
            (r'"', String, "str1d"),
            (r"'", String, "str1s"),
        ],
        "raw3d": _string('"""', True),
        "raw3s": _string("'''", True),
        "raw1d": _string('"', True),
        "raw1s": _string("'", True),
        "str3d": _string('"""', False),
        "str3s": _string("'''", False),
        "str1d": _string('"', False),
        "str1s": _string("'", False),
    }
