"""``lashflow fmt``: one canonical layout for a ``.lash`` file, comments kept.

The layout is printed from the parsed tree, never patched into the text, so the
spacing, the indentation (two spaces), the parentheses (only where the grammar needs
them) and the spelling of operators (``and``, ``or``, ``not``) and keys come out the
same however the file was written. What the author chose is kept where it carries
intent and no meaning:

* every comment, on its own line or at the end of a line (trailing comments of
  consecutive lines are aligned); blank lines between statements (at most one);
* literals as written (``3.0``, ``r"\\d+"``, ``'''...'''``): the tree holds only their value;
* whether a bracket is broken over lines: a record, list, call, parameter list or
  type object whose first item starts on a new line is printed one item per line
  (gofmt's and Prettier's rule), and a block written on one line stays on one line.

A comment inside an expression that the layout has no line for (between ``x =`` and its
value, say) moves to its own line above the statement. ``format_source`` checks what
it prints: the text must parse back to the same tree (spans aside), hence the same
effect sites and step keys, or it raises ``FormatError`` and nothing is written.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Any, Callable

from lashflow.errors import LashflowError
from lashflow.lang import ast as A
from lashflow.lang.parser import parse
from lashflow.lang.printer import (BINARY_LEVEL, EXPR, OR, POSTFIX, PRIMARY, TERNARY, UNARY,
                                    precedence, quote)
from lashflow.lang.record import fields_of
from lashflow.lang.scans import starts_ternary
from lashflow.lang.tokens import Tok, tokenize

__all__ = ["FormatError", "format_source", "program_shape", "comments_of"]

INDENT = 2
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_COMMENT = re.compile(r"(?:#|//)[^\n]*")
# Words that change meaning when a `{` follows them (`Type {`, `start {`, `parallel {`).
_BRACE_WORDS = re.compile(r"(?:^|[^A-Za-z0-9_.])(?:Type|start|parallel)\Z")


class FormatError(LashflowError):
    """The canonical layout of this file would not parse back to the same program."""

    code = "format_error"


@dataclasses.dataclass(slots=True)
class Comment:
    start: int
    end: int
    text: str


def comments_of(source: str, toks: list[Tok]) -> list[Comment]:
    """The comments of ``source``: they live in the gaps between the tokenizer's tokens
    (a ``#`` or ``//`` inside a string is part of the string token)."""
    found: list[Comment] = []
    previous = 0
    for tok in toks:
        gap = source[previous:tok.start_pos]
        if "#" in gap or "/" in gap:
            for m in _COMMENT.finditer(gap):
                found.append(Comment(previous + m.start(), previous + m.end(),
                                     m.group().rstrip()))
        previous = tok.end_pos
    return found


# --------------------------------------------------------------------------- layout lines


class Line:
    """One output line: indent (relative while it is part of an expression's layout),
    code text, and an optional trailing comment."""

    __slots__ = ("indent", "text", "comment")

    def __init__(self, indent: int, text: str, comment: str | None = None) -> None:
        self.indent = indent
        self.text = text
        self.comment = comment


Doc = list[Line]


def _one(text: str) -> Doc:
    return [Line(0, text)]


def _cat(*parts: Doc | str) -> Doc:
    """Horizontal concatenation: each part continues the last line of the one before."""
    out: Doc = []
    for part in parts:
        doc = _one(part) if isinstance(part, str) else part
        if not doc:
            continue
        if not out:
            out = [Line(line.indent, line.text, line.comment) for line in doc]
            continue
        last = out[-1]
        last.text += doc[0].text
        if doc[0].comment is not None:
            last.comment = doc[0].comment
        out.extend(Line(line.indent, line.text, line.comment) for line in doc[1:])
    return out


def _shift(doc: Doc, by: int) -> Doc:
    for line in doc:
        line.indent += by
    return doc


def _single(doc: Doc) -> bool:
    return len(doc) == 1 and doc[0].comment is None and "\n" not in doc[0].text


class _Item:
    """One member of a list the layout may break: a statement, a record entry, an
    argument... ``start``/``end`` locate it in the source (for its comments)."""

    __slots__ = ("start", "end", "render")

    def __init__(self, start: int, end: int, render: Callable[[], Doc]) -> None:
        self.start = start
        self.end = end
        self.render = render


# --------------------------------------------------------------------------- the printer


class _Printer:
    def __init__(self, source: str, module: A.Module, toks: list[Tok],
                 paren_unwraps: frozenset[int]) -> None:
        self.src = source
        self.module = module
        self.toks = toks
        self.starts = [t.start_pos for t in toks]
        self.comments = comments_of(source, toks)
        self.comment_starts = [c.start for c in self.comments]
        self.claimed = [False] * len(self.comments)
        self.paren_unwraps = paren_unwraps
        self.qmarks: list[int] = []  # per printed `?`: the Unwrap's id, or 0 (ternary, optional)

    # ------------------------------------------------------------------ source positions

    def newline_between(self, start: int, end: int) -> bool:
        return "\n" in self.src[start:end]

    def token_from(self, offset: int, kind: str) -> Tok:
        """The first raw token of ``kind`` starting at or after ``offset``."""
        i = bisect.bisect_left(self.starts, offset)
        while self.toks[i].kind != kind:
            i += 1
        return self.toks[i]

    def key_start(self, value: A.Expr) -> int:
        """Where the key of a `key: value` entry starts (the value may be parenthesised)."""
        i = bisect.bisect_left(self.starts, value.span.start) - 1
        while self.toks[i].kind == "(":
            i -= 1
        return self.toks[i - 1].start_pos if self.toks[i].kind == ":" else value.span.start

    def line_end(self, offset: int) -> int:
        end = self.src.find("\n", offset)
        return len(self.src) if end < 0 else end

    # ------------------------------------------------------------------ comments

    def take(self, start: int, end: int) -> list[Comment]:
        """Claim the comments that start in ``[start, end)`` and are not claimed yet."""
        out = []
        i = bisect.bisect_left(self.comment_starts, start)
        while i < len(self.comments) and self.comments[i].start < end:
            if not self.claimed[i]:
                self.claimed[i] = True
                out.append(self.comments[i])
            i += 1
        return out

    def has_direct_comment(self, start: int, end: int, items: list[_Item]) -> bool:
        """A comment inside ``[start, end)`` but inside none of ``items``."""
        i = bisect.bisect_left(self.comment_starts, start)
        while i < len(self.comments) and self.comments[i].start < end:
            at = self.comments[i].start
            if not self.claimed[i] and not any(it.start <= at < it.end for it in items):
                return True
            i += 1
        return False

    # ------------------------------------------------------------------ lists that may break

    def body(self, items: list[_Item], start: int, end: int, sep: str, opener: bool = True
             ) -> tuple[str | None, Doc]:
        """Items one per line with their comments, in the region ``[start, end)`` (just
        after the opener up to the closer). Returns the comment that stays on the
        opener's line (``opener``: there is one), and the lines."""
        lines: Doc = []
        opener_comment: str | None = None
        cursor = start
        placed = False

        def place(comments: list[Comment]) -> None:
            nonlocal cursor, placed, opener_comment
            for comment in comments:
                if (opener and not placed and opener_comment is None
                        and not self.newline_between(start, comment.start)):
                    opener_comment = comment.text
                else:
                    if placed and self.blank_between(cursor, comment.start):
                        lines.append(Line(0, ""))
                    lines.append(Line(0, comment.text))
                    placed = True
                cursor = comment.end

        for index, item in enumerate(items):
            place(self.take(cursor, item.start))
            if placed and self.blank_between(cursor, item.start):
                lines.append(Line(0, ""))
            doc = item.render()
            lines.extend(Line(0, c.text) for c in self.take(item.start, item.end))
            last = index == len(items) - 1
            if sep and not last:
                doc = _cat(doc, sep)
            following = end if last else items[index + 1].start
            cursor = item.end
            trailing = self.take(item.end, min(self.line_end(item.end), following))
            if trailing:
                doc[-1].comment = trailing[0].text
                cursor = trailing[-1].end
            lines.extend(doc)
            placed = True
        place(self.take(cursor, end))
        return opener_comment, lines

    def blank_between(self, start: int, end: int) -> bool:
        return self.src.count("\n", start, end) >= 2

    def bracket(self, opener: str, closer: str, items: list[_Item], open_at: int,
                close_at: int, pad: str = "") -> Doc:
        """``opener item, item closer`` on one line, or one item per line when the
        source starts the first item on a new line or has a comment among them."""
        inner_start = open_at + 1
        first = items[0].start if items else close_at
        broken = self.newline_between(inner_start, first) or self.has_direct_comment(
            inner_start, close_at, items)
        if not broken:
            if not items:
                return _one(opener + closer)
            parts: list[Doc | str] = [opener + pad]
            for i, item in enumerate(items):
                if i:
                    parts.append(", ")
                parts.append(item.render())
            parts.append(pad + closer)
            return _cat(*parts)
        comment, lines = self.body(items, inner_start, close_at, ",")
        if not lines and comment is None:
            return _one(opener + closer)
        return [Line(0, opener, comment), *_shift(lines, INDENT), Line(0, closer)]

    # ------------------------------------------------------------------ module and statements

    def module_doc(self) -> Doc:
        m = self.module
        items: list[Any] = sorted([*m.types, *m.processes, *m.main], key=_start_of)
        rendered = [_Item(_start_of(node), node.span.end, self.top_render(node)) for node in items]
        _, lines = self.body(rendered, 0, len(self.src), "", opener=False)
        return lines

    def top_render(self, node: Any) -> Callable[[], Doc]:
        if isinstance(node, A.TypeDecl):
            return lambda: _cat(f"type {node.name} = ", self.type_doc(node.type, decl=True))
        if isinstance(node, A.ProcessDecl):
            return lambda: self.process_doc(node)
        return lambda: self.stmt_doc(node)

    def stmt_items(self, body: list[A.Stmt]) -> list[_Item]:
        return [_Item(_start_of(s), s.span.end, (lambda s=s: self.stmt_doc(s))) for s in body]

    def block_doc(self, block: A.Block) -> Doc:
        open_at, close_at = block.span.start, block.span.end - 1
        if not block.body and not self.take_peek(open_at, close_at):
            return _one("{}")
        if not self.newline_between(open_at, close_at):  # one line, hence no comment
            docs = [self.stmt_doc(s) for s in block.body]
            if all(_single(d) for d in docs):
                return _one("{ " + "; ".join(d[0].text for d in docs) + " }")
            lines = [line for d in docs for line in d]
            return [Line(0, "{"), *_shift(lines, INDENT), Line(0, "}")]
        comment, lines = self.body(self.stmt_items(block.body), open_at + 1, close_at, "")
        return [Line(0, "{", comment), *_shift(lines, INDENT), Line(0, "}")]

    def take_peek(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self.comment_starts, start)
        return i < len(self.comments) and self.comments[i].start < end

    def label_doc(self, label: A.Label) -> str:
        fields = [f"title: {quote(label.title)}"]
        if label.description is not None:
            fields.append(f"description: {quote(label.description)}")
        return f"@label({', '.join(fields)})"

    def stmt_doc(self, s: A.Stmt) -> Doc:
        doc = self.stmt_body(s)
        if s.label is not None:
            return [Line(0, self.label_doc(s.label)), *doc]
        return doc

    def stmt_body(self, s: A.Stmt) -> Doc:  # noqa: C901 - one case per statement
        if isinstance(s, A.Assign):
            steps: list[Doc | str] = [s.name]
            for step in s.steps:
                if isinstance(step, A.FieldStep):
                    steps.append("." + _key(step.name))
                else:
                    steps += ["[", self.expr(step.index, EXPR), "]"]
            return _cat(*steps, " = ", self.expr(s.value, EXPR))
        if isinstance(s, A.If):
            return self.if_doc(s)
        if isinstance(s, A.For):
            return _cat(f"for {s.var} in ", self.header_expr(s.iterable), " ",
                        self.block_doc(s.body))
        if isinstance(s, A.While):
            return _cat("while ", self.header_expr(s.cond), " ", self.block_doc(s.body))
        if isinstance(s, A.Break):
            return _one("break")
        if isinstance(s, A.Continue):
            return _one("continue")
        if isinstance(s, A.ValueStmt):
            return _cat(s.kind + " ", self.expr(s.value, EXPR))
        if isinstance(s, A.ExprStmt):
            return self.expr(s.expr, EXPR)
        raise FormatError(f"not a statement: {type(s).__name__}")

    def if_doc(self, s: A.If) -> Doc:
        doc = _cat("if ", self.header_expr(s.cond), " ", self.block_doc(s.then))
        if isinstance(s.otherwise, A.If):
            return _cat(doc, " else ", self.if_doc(s.otherwise))
        if s.otherwise is not None:
            return _cat(doc, " else ", self.block_doc(s.otherwise))
        return doc

    def header_expr(self, node: A.Expr) -> Doc:
        """An `if`/`while` condition or a `for` iterable: a `{` follows it, so a last word
        that a `{` would turn into something else is parenthesised."""
        doc = self.expr(node, EXPR)
        if _BRACE_WORDS.search(doc[-1].text):
            return _cat("(", doc, ")")
        return doc

    def process_doc(self, d: A.ProcessDecl) -> Doc:
        head_from = d.label.span.end if d.label is not None else d.span.start
        lpar = self.token_from(head_from, "(")
        rpar = self.token_from(d.params[-1].span.end if d.params else lpar.end_pos, ")")
        parts: list[Doc | str] = [f"process {d.name}",
                                  self.params_doc(d.params, "(", ")", lpar.start_pos,
                                                  rpar.start_pos, "")]
        if d.signals:
            lbrace = self.token_from(rpar.end_pos, "{")
            rbrace = self.token_from(d.signals[-1].span.end, "}")
            parts += [" signals ", self.params_doc(d.signals, "{", "}", lbrace.start_pos,
                                                   rbrace.start_pos, " ")]
        if d.returns is not None:
            parts += [" -> ", self.type_doc(d.returns)]
        parts += [" ", self.block_doc(d.body)]
        doc = _cat(*parts)
        if d.label is not None:
            return [Line(0, self.label_doc(d.label)), *doc]
        return doc

    def params_doc(self, params: list[A.Param], opener: str, closer: str, open_at: int,
                   close_at: int, pad: str) -> Doc:
        items = [_Item(p.span.start, p.span.end,
                       (lambda p=p: _cat(f"{p.name}: ", self.type_doc(p.type)))) for p in params]
        return self.bracket(opener, closer, items, open_at, close_at, pad)

    # ------------------------------------------------------------------ types

    def type_doc(self, t: A.TypeExpr, decl: bool = False) -> Doc:  # noqa: C901
        if isinstance(t, A.TypeName):
            return _one(t.name)
        if isinstance(t, A.TypeNull):
            return _one("null")
        if isinstance(t, A.TypeStringLiteral):
            return _one(self.verbatim_string(t.span, t.value))
        if isinstance(t, A.TypeObject):
            return self.type_object(t)
        if isinstance(t, A.TypeEnum):
            return _one("enum[" + ", ".join(quote(m) for m in t.members) + "]")
        if isinstance(t, A.TypeList):
            return _cat("list[", self.type_doc(t.item), "]")
        if isinstance(t, A.TypeUnion):
            parts: list[Doc | str] = []
            for i, member in enumerate(t.members):
                if i:
                    parts.append(" | ")
                doc = self.type_doc(member)
                if i == 0 and decl and isinstance(member, A.TypeObject):
                    doc = _cat("Type ", doc)
                parts.append(doc)
            return _cat(*parts)
        if isinstance(t, A.TypeProcess):
            return _cat("Process<", self.type_doc(t.input), ", ", self.type_doc(t.output), ">")
        if isinstance(t, A.TypeTriggerHandle):
            return _cat("TriggerHandle<", self.type_doc(t.item), ">")
        raise FormatError(f"not a type: {type(t).__name__}")

    def type_object(self, t: A.TypeObject) -> Doc:
        close_at = t.span.end - 1
        open_at = self.token_from(t.span.start, "{").start_pos

        def field(f: A.TypeField) -> Callable[[], Doc]:
            def render() -> Doc:
                doc = _cat(f"{_key(f.name)}: ", self.type_doc(f.type))
                if f.optional:
                    self.qmarks.append(0)
                    doc = _cat(doc, "?")
                return doc
            return render

        items = [_Item(f.span.start, f.span.end, field(f)) for f in t.fields]
        return self.bracket("{", "}", items, open_at, close_at, " ")

    # ------------------------------------------------------------------ expressions

    def verbatim_string(self, span: A.Span, value: str) -> str:
        text = self.src[span.start:span.end]
        return text if text[:1] in "\"'rR" and span.end > span.start else quote(value)

    def expr(self, node: A.Expr, level: int) -> Doc:
        doc = self.expr_doc(node)
        return _cat("(", doc, ")") if _level(node) < level else doc

    def postfix_object(self, node: A.Expr) -> Doc:
        if isinstance(node, A.Number):  # `1.x` would lex as the number `1.` then `x`
            return _cat("(", self.expr_doc(node), ")")
        return self.expr(node, POSTFIX)

    def items(self, nodes: list[A.Expr]) -> list[_Item]:
        return [_Item(n.span.start, n.span.end, (lambda n=n: self.expr(n, TERNARY)))
                for n in nodes]

    def entries(self, pairs: list[tuple[str, A.Expr]]) -> list[_Item]:
        return [_Item(self.key_start(v), v.span.end,
                      (lambda k=k, v=v: _cat(f"{_key(k)}: ", self.expr(v, TERNARY))))
                for k, v in pairs]

    def call_args(self, args: list[A.Expr], lpar_from: int, span: A.Span) -> Doc:
        lpar = self.token_from(lpar_from, "(")
        return self.bracket("(", ")", self.items(args), lpar.start_pos, span.end - 1)

    def expr_doc(self, node: A.Expr) -> Doc:  # noqa: C901 - one branch per node kind
        if isinstance(node, A.Null):
            return _one("null")
        if isinstance(node, A.Bool):
            return _one("true" if node.value else "false")
        if isinstance(node, A.Number):
            return _one(self.src[node.span.start:node.span.end])
        if isinstance(node, A.String):
            return _one(self.verbatim_string(node.span, node.value))
        if isinstance(node, A.Name):
            return _one(node.name)
        if isinstance(node, A.TupleLit):
            if not node.items:
                return _one("()")
            inner = [self.expr(item, TERNARY) for item in node.items]
            parts: list[Doc | str] = ["("]
            for i, doc in enumerate(inner):
                parts += [", " if i else "", doc]
            return _cat(*parts, ",)" if len(inner) == 1 else ")")
        if isinstance(node, A.ListLit):
            return self.bracket("[", "]", self.items(node.items), node.span.start,
                                node.span.end - 1)
        if isinstance(node, A.Comprehension):
            return self.comprehension(node)
        if isinstance(node, A.RecordLit):
            return self.bracket("{", "}", self.entries(node.entries), node.span.start,
                                node.span.end - 1, " ")
        if isinstance(node, A.Field):
            return _cat(self.postfix_object(node.obj), "." + _key(node.name))
        if isinstance(node, A.Index):
            return _cat(self.postfix_object(node.obj), "[", self.expr(node.index, EXPR), "]")
        if isinstance(node, A.ReceiverCall):
            receiver = self.postfix_object(node.receiver)
            return _cat(receiver, "." + _key(node.operation),
                        self.call_args(node.args, node.receiver.span.end, node.span))
        if isinstance(node, A.Unwrap):
            inner = self.postfix_object(node.expr)
            self.qmarks.append(id(node))
            if id(node) in self.paren_unwraps:
                return _cat("(", inner, "?)")
            return _cat(inner, "?")
        if isinstance(node, A.BuiltinCall):
            return _cat(node.name, self.call_args(node.args, node.span.start, node.span))
        if isinstance(node, A.Await):
            return _cat("await ", self.expr(node.expr, UNARY))
        if isinstance(node, A.Unary):
            operand = self.expr(node.operand, UNARY)
            return _cat("-" if node.op == "-" else "not ", operand)
        if isinstance(node, A.Binary):
            level = BINARY_LEVEL[node.op]
            return _cat(self.expr(node.left, level), f" {node.op} ",
                        self.expr(node.right, level + 1))
        if isinstance(node, A.Ternary):
            cond = self.expr(node.cond, OR)
            self.qmarks.append(0)
            return _cat(cond, " ? ", self.expr(node.then, TERNARY), " : ",
                        self.expr(node.otherwise, TERNARY))
        if isinstance(node, A.Start):
            lpar = self.token_from(node.span.start, "(")
            args = self.bracket("(", ")", self.entries(node.args), lpar.start_pos,
                                node.span.end - 1)
            return _cat(f"start {node.process}", args)
        if isinstance(node, A.Sleep):
            return _cat(f"sleep {node.mode} ", self.expr(node.value, EXPR))
        if isinstance(node, A.WaitSignal):
            return _one(f"wait_signal({quote(node.name)})")
        if isinstance(node, A.SignalRun):
            return _cat("signal_run(", self.expr(node.run, TERNARY), f", {quote(node.name)}, ",
                        self.expr(node.payload, TERNARY), ")")
        if isinstance(node, A.TypeLiteral):
            return _cat("Type ", self.type_object(node.type))
        raise FormatError(f"not an expression: {type(node).__name__}")

    def comprehension(self, node: A.Comprehension) -> Doc:
        parts: list[Doc | str] = ["[", self.expr(node.element, TERNARY)]
        for clause in node.clauses:
            if isinstance(clause, A.CompFor):
                parts += [f" for {clause.var} in ", self.expr(clause.iterable, TERNARY)]
            else:
                parts += [" if ", self.expr(clause.cond, TERNARY)]
        return _cat(*parts, "]")


def _start_of(node: Any) -> int:
    label = getattr(node, "label", None)
    return label.span.start if label is not None else node.span.start


def _key(name: str) -> str:
    return name if _IDENT.match(name) else quote(name)


def _level(node: A.Expr) -> int:
    """As the canonical printer's, except that an unwrap is printed bare (``x?``, with
    parentheses only where a ternary would take it) and a tuple always has its own."""
    if isinstance(node, A.Unwrap):
        return POSTFIX
    if isinstance(node, A.TupleLit):
        return PRIMARY
    return precedence(node)


# --------------------------------------------------------------------------- rendering


def _render(lines: Doc) -> str:
    """Lines to text; trailing comments of consecutive lines share one column."""
    out: list[str] = []
    run: list[tuple[str, str]] = []

    def flush() -> None:
        if not run:
            return
        width = max(len(code.rsplit("\n", 1)[-1]) for code, _ in run)
        for code, comment in run:
            out.append(code + " " * (width - len(code.rsplit("\n", 1)[-1]) + 2) + comment)
        run.clear()

    for line in lines:
        code = (" " * line.indent + line.text).rstrip() if line.text else ""
        if line.comment is not None and code:
            run.append((code, line.comment))
            continue
        flush()
        out.append(code)
    flush()
    return "\n".join(out) + "\n" if out else ""


def _print(source: str, module: A.Module, toks: list[Tok], paren_unwraps: frozenset[int]
           ) -> tuple[str, list[int]]:
    printer = _Printer(source, module, toks, paren_unwraps)
    text = _render(printer.module_doc())
    missing = [c.text for c, claimed in zip(printer.comments, printer.claimed) if not claimed]
    if missing:  # pragma: no cover - every region ends by claiming what is left in it
        raise FormatError(f"a comment would be lost: {missing[0]}")
    return text, printer.qmarks


def _ternary_unwraps(text: str, qmarks: list[int]) -> set[int]:
    """The unwraps printed bare that the parser would read as a ternary `?` (a `:` follows
    them further on): those are printed as ``(x?)``."""
    if not any(qmarks):
        return set()
    toks = tokenize(text)
    marks = iter(qmarks)
    found: set[int] = set()
    for i, tok in enumerate(toks):
        if tok.kind == "?":
            mark = next(marks)
            if mark and starts_ternary(toks, i):
                found.add(mark)
    return found


def format_source(source: str) -> str:
    """The canonical layout of ``source``; raises ``LangError`` if it does not parse and
    ``FormatError`` if the layout would change what it means (never seen on the
    corpora the tests run; the message says where)."""
    module = parse(source)
    toks = tokenize(source)
    text, qmarks = _print(source, module, toks, frozenset())
    fix = _ternary_unwraps(text, qmarks)
    if fix:
        text, _ = _print(source, module, toks, frozenset(fix))
    _check_same(module, text)
    return text


def _check_same(module: A.Module, text: str) -> None:
    from lashflow.lang.diagnostics import LangError

    try:
        again = parse(text)
    except LangError as exc:
        raise FormatError(f"the formatted text does not parse ({exc.message}, formatted line "
                          f"{exc.line}); please report this file") from None
    if program_shape(again) != program_shape(module):
        raise FormatError("the canonical layout would change what this file means; "
                          "please report this file")


def program_shape(node: Any) -> Any:
    """The tree without positions, site ids or linker fields: two sources with equal
    shapes are the same program (and get the same effect sites, hence step keys)."""
    names = fields_of(node)
    if names:
        return (type(node).__name__, *(
            program_shape(getattr(node, name)) for name in names
            if name not in ("span", "source", "site", "module")))
    if isinstance(node, (list, tuple)):
        return tuple(program_shape(item) for item in node)
    return node
