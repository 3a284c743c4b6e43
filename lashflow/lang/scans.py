"""Look-ahead scans over the raw token list (a ternary's `:`, an assignment target, a
record after a parenthesis, a string key...).

The token pass asks these before choosing a terminal; they only read raw token kinds,
never the parser, so they are plain functions over the token list.
"""

from __future__ import annotations

from lashflow.lang.tokens import Tok

KEY_WORDS = frozenset(
    "if else for in await cancel submit print call and or not true false null".split()
)
_EXPR_START = frozenset(
    ["null", "true", "false", "NUMBER", "STRING", "IDENT", "(", "[", "{", "await", "-", "!", "not"]
)


def is_assignment(toks: list[Tok], i: int) -> bool:
    """2.4 item 1: identifier, then `.key` / balanced `[...]` steps, then a single `=`."""
    j = i + 1
    while True:
        kind = toks[j].kind
        if kind == ".":
            nxt = toks[j + 1].kind
            if not (nxt == "IDENT" or nxt == "STRING" or nxt in KEY_WORDS):
                return False
            j += 2
        elif kind == "[":
            after = skip_brackets(toks, j)
            if after < 0:
                return False
            j = after
        else:
            return kind == "="


def skip_brackets(toks: list[Tok], j: int) -> int:
    """Index just after the `]` that closes the `[` at ``j`` (-1 if unbalanced)."""
    parens = braces = 0
    brackets = 1
    for k in range(j + 1, len(toks)):
        kind = toks[k].kind
        if kind == "(":
            parens += 1
        elif kind == ")":
            if parens == 0:
                return -1
            parens -= 1
        elif kind == "[":
            brackets += 1
        elif kind == "]":
            brackets -= 1
            if brackets == 0 and parens == 0 and braces == 0:
                return k + 1
            if brackets < 0:
                return -1
        elif kind == "{":
            braces += 1
        elif kind == "}":
            if braces == 0:
                return -1
            braces -= 1
        elif kind == "EOF":
            return -1
    return -1


def starts_ternary(toks: list[Tok], i: int) -> bool:
    """2.4 item 4: is the `?` at ``i`` a ternary question mark?"""
    if toks[i + 1].kind not in _EXPR_START:
        return False
    parens = brackets = braces = 0
    for k in range(i + 1, len(toks)):
        kind = toks[k].kind
        if parens == 0 and brackets == 0 and braces == 0:
            if kind == ":":
                return True
            if kind in ("=", ",", ")", "]", "}"):
                return False
        if kind == "EOF":
            return False
        if kind == "(":
            parens += 1
        elif kind == ")":
            if parens == 0:
                return False
            parens -= 1
        elif kind == "[":
            brackets += 1
        elif kind == "]":
            if brackets == 0:
                return False
            brackets -= 1
        elif kind == "{":
            braces += 1
        elif kind == "}":
            if braces == 0:
                return False
            braces -= 1
    return False


def matching(toks: list[Tok], i: int) -> int:
    """Index of the `)` closing the `(` at ``i`` (-1 if none)."""
    depth = 0
    for k in range(i, len(toks)):
        kind = toks[k].kind
        if kind in ("(", "[", "{"):
            depth += 1
        elif kind in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return k if kind == ")" else -1
        elif kind == "EOF":
            return -1
    return -1


def args_of(toks: list[Tok], lpar: int, rpar: int) -> list[list[Tok]]:
    """The argument token runs of a call, split on top-level commas."""
    args: list[list[Tok]] = [[]]
    depth = 0
    for tok in toks[lpar + 1: rpar]:
        kind = tok.kind
        if kind in ("(", "[", "{"):
            depth += 1
        elif kind in (")", "]", "}"):
            depth -= 1
        elif kind == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(tok)
    if not args[-1]:
        args.pop()
    return args


def paren_then_brace(toks: list[Tok], i: int) -> bool:
    """2.4 item 6: is the `(...)` group at ``i`` directly followed by `{`?"""
    depth = 0
    for k in range(i, len(toks)):
        kind = toks[k].kind
        if kind == "(":
            depth += 1
        elif kind == ")":
            depth = max(0, depth - 1)
            if depth == 0:
                return toks[k + 1].kind == "{"
        elif kind == "EOF":
            return False
    return False


def string_literal(run: list[Tok]) -> bool:
    """A single string literal, possibly wrapped in grouping parentheses."""
    while len(run) >= 3 and run[0].kind == "(" and run[-1].kind == ")":
        run = run[1:-1]
    return len(run) == 1 and run[0].kind == "STRING"
