"""The hand-written tokenizer: source text -> raw tokens.

It runs over the whole file before parsing starts, as the original does, so a lex error
anywhere wins over a parse error earlier in the file. Raw tokens know nothing about
context; the token pass (``tokenpass.py``) gives each one its grammar terminal.
"""

from __future__ import annotations

import re
import unicodedata

from lark.lexer import Token

from lashflow.lang.diagnostics import parse_error

# Raw kinds: "IDENT", "NUMBER", "STRING", "EOF", a reserved word, or the punctuation text.
RESERVED = frozenset(
    "if else for in await cancel submit print call and or not true false null".split()
)

# Rust's char::is_whitespace (Unicode White_Space) plus `;`, which is whitespace here.
_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000;"

_SKIP = re.compile(rf"(?:[{_WS}]+|(?:#|//)[^\n]*)*")
# One match = the whitespace and comments before a token, then the token. Plain
# double-quoted strings without escapes are matched whole; every other string form is
# finished by hand in _string.
_SCAN = re.compile(
    rf"""
    (?:[{_WS}]++|(?:\#|//)[^\n]*+)*+
    (?:
      (?P<raw>[rR](?:\"\"\"|'''|"|'))
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|&&|\|\||[{{}}()\[\],:@?.!=|<>+\-*/%])
    | (?P<num>[0-9]+(?:\.[0-9]*)?)
    | (?P<dq>"(?!"")[^"\\]*")
    | (?P<str>\"\"\"|'''|"|')
    )
    """,
    re.VERBOSE,
)

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
_STOPS = {'"': re.compile(r'[\\"]'), "'": re.compile(r"[\\']")}


class Tok(Token):
    """One raw token, which is also the Lark token handed to the parser (one object per
    token): ``kind`` is the raw kind, ``type`` the grammar terminal the token pass gives it,
    ``value`` the decoded text / number / name, ``start_pos``/``end_pos`` the char span."""

    __slots__ = ("kind",)
    kind: str

    def __new__(cls, kind: str, value: object, start: int, end: int) -> "Tok":
        inst = str.__new__(cls, "" if value is None else value)
        inst.kind = inst.type = kind
        inst.value = value
        inst.start_pos = start
        inst.end_pos = end
        return inst

    def __repr__(self) -> str:
        return f"Tok({self.kind!r}, {self.value!r}, {self.start_pos}, {self.end_pos})"


def tokenize(source: str) -> list[Tok]:
    """Split ``source`` into raw tokens, ending with an ``EOF`` token at ``len(source)``."""
    toks: list[Tok] = []
    append = toks.append
    pos = 0
    n = len(source)
    match = _SCAN.match
    while True:
        m = match(source, pos)
        if m is None:
            # _SKIP matches the empty string: never None
            pos = _SKIP.match(source, pos).end()  # type: ignore[union-attr]
            if pos >= n:
                break
            raise parse_error(source, f"unexpected `{source[pos]}`", pos)
        group = m.lastgroup
        start = m.start(group)
        pos = m.end()
        if group == "ident":
            text = m.group(group)
            append(Tok(text if text in RESERVED else "IDENT", text, start, pos))
        elif group == "op":
            text = m.group(group)
            append(Tok(text, text, start, pos))
        elif group == "num":
            append(Tok("NUMBER", float(m.group(group)), start, pos))
        elif group == "dq":
            append(Tok("STRING", source[start + 1: pos - 1], start, pos))
        else:
            tok = _string(source, start, m.group(group))
            append(tok)
            pos = tok.end_pos
    append(Tok("EOF", None, n, n))
    for tok in toks[-2:]:  # Lark copies line info from the last token into `$END`
        tok.line = tok.column = tok.end_line = tok.end_column = None
    return toks


def _string(source: str, start: int, opener: str) -> Tok:
    """Read one string literal whose opening delimiter (with optional r/R) is ``opener``."""
    raw = opener[0] in "rR"
    delim = opener[1:] if raw else opener
    body = start + len(opener)
    if raw:
        close = source.find(delim, body)
        if close < 0:
            raise parse_error(source, "unterminated string", start)
        return Tok("STRING", source[body:close], start, close + len(delim))
    if len(delim) == 3:
        return _triple(source, start, body, delim)
    stop = _STOPS[delim]
    parts: list[str] = []
    pos = body
    while True:
        m = stop.search(source, pos)
        if m is None:
            raise parse_error(source, "unterminated string", start)
        at = m.start()
        parts.append(source[pos:at])
        if source[at] == delim:
            return Tok("STRING", "".join(parts), start, at + 1)
        if at + 1 >= len(source):
            raise parse_error(source, "unterminated string", start)
        esc = source[at + 1]
        parts.append(_ESCAPES.get(esc, esc))
        pos = at + 2


def _triple(source: str, start: int, body: int, delim: str) -> Tok:
    """Non-raw triple-quoted string: escapes apply, ends at the first unescaped delimiter."""
    parts: list[str] = []
    pos = body
    n = len(source)
    while pos < n:
        if source.startswith(delim, pos):
            return Tok("STRING", "".join(parts), start, pos + 3)
        ch = source[pos]
        if ch == "\\":
            if pos + 1 >= n:
                break
            esc = source[pos + 1]
            parts.append(_ESCAPES.get(esc, esc))
            pos += 2
            continue
        parts.append(ch)
        pos += 1
    raise parse_error(source, "unterminated string", start)


def render_found(tok: Tok) -> str:
    """How the original names a token in messages: `{`, identifier `x`, string "a", ..."""
    kind = tok.kind
    if kind == "IDENT":
        return f"identifier `{tok.value}`"
    if kind == "STRING":
        return f"string {rust_debug_str(str(tok.value))}"
    if kind == "NUMBER":
        # a NUMBER token holds its float
        return f"number {format_number(float(tok.value))}"  # type: ignore[arg-type]
    if kind == "EOF":
        return "end of input"
    return f"`{kind}`"


def rust_debug_str(text: str) -> str:
    """A string quoted the way Rust's ``{:?}`` prints it."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif (not ch.isprintable() and ch != " ") or _grapheme_extend(ch):
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


# Unicode's Other_Grapheme_Extend: marks outside Mn/Me that still extend a grapheme
_OTHER_GRAPHEME_EXTEND = (
    (0x09BE, 0x09BE), (0x09D7, 0x09D7), (0x0B3E, 0x0B3E), (0x0B57, 0x0B57), (0x0BBE, 0x0BBE),
    (0x0BD7, 0x0BD7), (0x0CC2, 0x0CC2), (0x0CD5, 0x0CD6), (0x0D3E, 0x0D3E), (0x0D57, 0x0D57),
    (0x0DCF, 0x0DCF), (0x0DDF, 0x0DDF), (0x1B35, 0x1B35), (0x200C, 0x200C), (0x302E, 0x302F),
    (0xFF9E, 0xFF9F), (0x1133E, 0x1133E), (0x11357, 0x11357), (0x114B0, 0x114B0),
    (0x114BD, 0x114BD), (0x115AF, 0x115AF), (0x11930, 0x11930), (0x1D165, 0x1D165),
    (0x1D16E, 0x1D172), (0xE0020, 0xE007F),
)


def _grapheme_extend(ch: str) -> bool:
    """Rust's ``{:?}`` escapes every grapheme-extending character (a combining accent
    would otherwise attach to the quote before it)."""
    if unicodedata.category(ch) in ("Mn", "Me"):
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _OTHER_GRAPHEME_EXTEND)


def format_number(value: float) -> str:
    """Rust's f64 Display: integral values without a fraction, never an exponent."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if value == int(value) and abs(value) < 1e16:
        return str(int(value))
    text = repr(value)
    if "e" in text or "E" in text:
        from decimal import Decimal

        text = format(Decimal(text), "f")
    if text.endswith(".0"):
        text = text[:-2]
    return text
