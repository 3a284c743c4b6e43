"""``parse(source) -> Module``: tokenizer + token pass + Lark LALR + AST builder.

Two passes, both through Lark's public API, over two parsers of the same grammar:

1. the token pass drives the classifier's ``parse_interactive`` token by token and types
   each raw token (keyword or name, call or grouping...) from what the parser accepts at
   that point. It tries terminals on shallow copies of the parser, which may disturb the
   values the parser keeps, so the classifier builds nothing;
2. the typed tokens are parsed again by ``Lark.parse`` through a replaying lexer, with
   ``AstBuilder`` building the AST inline.

Both are built once per process, on first use, from ``grammar/lashlang.lark`` with
``cache=True`` (the LALR tables are pickled in the temp dir), so importing ``lashflow``
costs nothing and later processes skip the table construction (ADR 0016). Lark's
``UnexpectedToken`` is turned into the original recursive-descent messages here.
"""

from __future__ import annotations

import threading
from typing import Any

from lashflow.errors import LimitExceeded
from lashflow.lang import ast as A
from lashflow.lang.diagnostics import LangError, parse_error
from lashflow.lang.grammar_file import GRAMMAR_PATH as GRAMMAR_PATH  # re-exported
from lashflow.lang.grammar_file import grammar_text
from lashflow.lang.tokenpass import CLOSER_OF, ReplayLexer, StopPass, TokenPass, Typed
from lashflow.lang.tokens import Tok, render_found, tokenize

_lock = threading.Lock()
_parser: Any = None
_classifier: Any = None


def get_parser() -> Any:
    """The LALR parser that builds the AST from typed tokens (built lazily; its tables
    are cached on disk by Lark)."""
    global _parser
    if _parser is None:
        with _lock:
            if _parser is None:
                from lark import Lark

                from lashflow.lang.transform import AstBuilder

                _parser = Lark(grammar_text(), parser="lalr", lexer=ReplayLexer,
                               transformer=AstBuilder(), cache=True, maybe_placeholders=False)
    return _parser


def get_classifier() -> Any:
    """The same grammar's parser building nothing, driven token by token by the token
    pass. Trials on its shallow copies may disturb the values it keeps; none is read."""
    global _classifier
    if _classifier is None:
        with _lock:
            if _classifier is None:
                from lark import Lark

                _classifier = Lark(grammar_text(), parser="lalr", lexer=ReplayLexer,
                                   transformer=_BuildNothing(), cache=True,
                                   maybe_placeholders=False)
    return _classifier


class _BuildNothing:
    """A transformer whose every rule returns None. Lark keeps building the lists of the
    rules it inlines (names starting with `_`), so those are left to it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _nothing


def _nothing(children: list[Any]) -> None:
    return None


# A workflow file is untrusted input and parsing runs on the caller's thread: the size
# bounds how long a hostile file can hold it (about 2 s on a slow 2-core machine).
MAX_SOURCE_CHARS = 256 * 1024


def source_too_large(size: int, what: str = "the source") -> LimitExceeded:
    return LimitExceeded(f"{what} is {size:,} characters, over the limit of "
                         f"{MAX_SOURCE_CHARS:,} (split it into several files)")


def parse(source: str) -> A.Module:
    """Parse Lashlang source into a ``Module``; raises ``LangError`` (code parse_error),
    or ``LimitExceeded`` for a source over ``MAX_SOURCE_CHARS``."""
    from lark.exceptions import UnexpectedInput

    if not isinstance(source, str):
        raise TypeError("source must be a str")
    if len(source) > MAX_SOURCE_CHARS:
        raise source_too_large(len(source))
    toks = tokenize(source)
    ctx = TokenPass(source, toks)
    try:
        ctx.drive(get_classifier().parse_interactive(""))
        module = get_parser().parse(Typed(toks))
    except LangError:
        raise
    except UnexpectedInput:
        raise _diagnose(source, toks, ctx.cur) from None
    except RecursionError:  # pragma: no cover - the pass caps nesting before this
        raise parse_error(source, "expression nesting too deep (limit 40); flatten the program", 0)
    except Exception as exc:  # pragma: no cover - a bug here must still be a diagnostic
        offset = toks[min(ctx.cur, len(toks) - 1)].start_pos
        raise parse_error(source, f"internal parser error ({type(exc).__name__}: {exc})",
                          offset) from exc
    module.source = source
    return module


# ---------------------------------------------------------------------- error messages

_EXPECT_NAMES = {
    "RBRACE": "`}`", "RPAR": "`)`", "RSQB": "`]`", "COLON": "`:`", "ASSIGN_EQ": "`=`",
    "IN": "`in`", "BLOCK_LBRACE": "`{`", "LBRACE": "`{`", "CALL_LPAR": "`(`", "LPAR": "`(`",
    "LSQB": "`[`", "INDEX_LSQB": "`[`", "LT": "`<`", "GT": "`>`", "COMMA": "`,`",
    "IDENT": "identifier", "ASSIGN_NAME": "identifier", "STRING": "string literal",
    "KW_LABEL": "label", "KEY": "identifier, string key, or keyword key", "AT": "`@`",
    "DOT": "`.`", "PIPE": "`|`", "ARROW": "`-`",
}
_CLOSER_TERM = {"}": "RBRACE", ")": "RPAR", "]": "RSQB", ">": "GT", ":": "COLON"}
# Terminals that only continue what is already there; the original never names them.
_CONTINUATION = frozenset(
    ["DOT", "INDEX_LSQB", "CALL_LPAR", "QMARK_TERN", "QMARK_UNWRAP", "QMARK_OPT",
     "TRAILING_COMMA", "TUPLE_END", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "EQEQ", "NE",
     "LT", "LE", "GT", "GE", "AND", "OR", "PIPE", "FOR", "IF"]
)
_LOOP_STOPS_AT_EOF = frozenset(["BLOCK", "NAMED", "PARAMS", "SIGNALS", "LABEL"])
_HINTS = {
    "`if`": "use `cond ? yes : no` for inline conditionals",
    "`for`": "`for` is a statement. Put it on its own line, not inside an expression or "
    "record literal.",
}


def _diagnose(source: str, toks: list[Tok], index: int) -> LangError:
    """Phrase an LALR failure at raw token ``index`` the way the recursive-descent
    original does. The parse is replayed up to that token to see the parser state
    (and the open brackets) just before it; errors are rare, so this costs nothing."""
    ctx = TokenPass(source, toks, stop_at=index)
    try:
        ctx.drive(get_classifier().parse_interactive(""))
    except StopPass:
        pass
    tok: Tok = toks[index]
    found = render_found(tok)
    acceptable = ctx.pre_parser.accepts() if ctx.pre_parser is not None else set()
    top = ctx.pre_top
    eof = tok.kind == "EOF"
    after_dot = index > 0 and toks[index - 1].kind == "."
    message = _message(acceptable, top.kind if top else "", eof and not after_dot, found)
    hint = _HINTS.get(found) if message.startswith("unexpected") else None
    return parse_error(ctx.source, message, tok.start_pos, end=tok.end_pos, hint=hint)


def _message(acc: set[str], top: str, eof: bool, found: str) -> str:
    closer = _CLOSER_TERM[CLOSER_OF[top]] if top else ""
    if eof and top in _LOOP_STOPS_AT_EOF and (
        ("KW_BREAK" in acc and top == "BLOCK")
        or ("KEY" in acc and top == "NAMED")
        or ("IDENT" in acc and "T_LIST" not in acc  # (not where a type comes next)
            and top in ("PARAMS", "SIGNALS", "LABEL"))
    ):
        return f"expected {_EXPECT_NAMES[closer]}, found {found}"
    if "NUMBER" in acc:
        return f"unexpected {found}"
    if "KEY" in acc:
        return f"expected {_EXPECT_NAMES['KEY']}, found {found}"
    if "T_LIST" in acc:
        return f"expected type expression, found {found}"
    if "IDENT" in acc or "ASSIGN_NAME" in acc:
        return f"expected identifier, found {found}"
    if "STRING" in acc:
        return f"expected string literal, found {found}"
    if "FOR" in acc and "KW_UNTIL" in acc:
        return f"expected `for` or `until`, found {found}"
    if closer and closer in acc:
        return f"expected {_EXPECT_NAMES[closer]}, found {found}"
    rest = acc - _CONTINUATION - {"$END"}
    if "BLOCK_LBRACE" in rest:
        return f"expected `{{`, found {found}"
    if len(rest) == 1:
        name = _EXPECT_NAMES.get(next(iter(rest)))
        if name:
            return f"expected {name}, found {found}"
    if not rest and len(acc - {"$END"}) == 1:
        name = _EXPECT_NAMES.get(next(iter(acc - {"$END"})))
        if name:
            return f"expected {name}, found {found}"
    return f"unexpected {found}"

