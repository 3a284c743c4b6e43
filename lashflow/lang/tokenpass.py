"""The token pass between the tokenizer and Lark's LALR parser.

The pass drives Lark's public interactive parser (``Lark.parse_interactive``) one token
at a time, so between two tokens the parser's state is up to date. It asks that parser
which terminals it would shift now (``choices()``, and a trial ``feed_token`` on a copy
when the answer depends on reductions below the top state) and reads the raw tokens
ahead, and gives each raw token its terminal: a contextual word
becomes a keyword only at statement start, `(` after a name is a call, `[` after an operand
is an index, `?` is a ternary only if the forward scan of 2.4 item 4 finds its `:`, and so
on. It also raises the parse errors that are not about grammar (loop-only and
process-only statements, removed syntax, `@label` fields, signal-name literals, the
nesting limit), at the token where the original reports them.
"""

from __future__ import annotations

from typing import Any, Iterator

from lark import Token
from lark.exceptions import UnexpectedToken
from lark.lexer import Lexer

from lashflow.lang.diagnostics import LangError, parse_error
from lashflow.lang.scans import (
    KEY_WORDS, args_of, is_assignment, matching, paren_then_brace, skip_brackets,
    starts_ternary, string_literal,
)
from lashflow.lang.tokens import Tok

MAX_NESTING = 40
# Long operator / postfix chains make a deep tree without any bracket; every later tree
# walk recurses, so their length (summed over the open brackets) is capped as well.
MAX_CHAIN = 200

NESTING_MESSAGE = f"expression nesting too deep (limit {MAX_NESTING}); flatten the program"

_SIMPLE = {
    "}": "RBRACE", ")": "RPAR", "]": "RSQB", ":": "COLON", ".": "DOT", "@": "AT",
    "==": "EQEQ", "!=": "NE", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "+": "PLUS",
    "*": "STAR", "/": "SLASH", "%": "PERCENT", "|": "PIPE", "||": "OR", "&&": "AND",
    "!": "NOT", "NUMBER": "NUMBER", "in": "IN", "await": "AWAIT", "and": "AND", "or": "OR",
    "not": "NOT", "true": "TRUE", "false": "FALSE", "null": "NULL", "else": "ELSE",
}
_STMT_WORDS = {
    "let": "KW_LET", "finish": "KW_FINISH", "fail": "KW_FAIL", "yield": "KW_YIELD",
    "wake": "KW_WAKE", "break": "KW_BREAK", "continue": "KW_CONTINUE", "while": "KW_WHILE",
}
_SPECIAL_OPERANDS = frozenset(["start", "sleep", "Type", "parallel", "wait_signal", "signal_run"])
_TYPE_WORDS = {
    "list": "T_LIST", "enum": "T_ENUM", "Process": "T_PROCESS", "TriggerHandle": "T_TRIGGER",
    "Type": "T_TYPE",
}
_CLOSERS = frozenset(["}", ")", "]"])
_AFTER_TERMS = frozenset(
    ["BLOCK_LBRACE", "LBRACE", "CALL_LPAR", "LPAR", "INDEX_LSQB", "LSQB", "QMARK_TERN", "LT",
     "RBRACE", "RPAR", "RSQB", "COLON", "GT", "COMMA", "TRAILING_COMMA", "TUPLE_END", "KEY",
     "STRING"]
)
# Raw kinds whose terminal never depends on context.
_PLAIN = {
    "}": "RBRACE", ")": "RPAR", "]": "RSQB", ":": "COLON", ".": "DOT", "==": "EQEQ",
    "!=": "NE", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "+": "PLUS", "*": "STAR",
    "/": "SLASH", "%": "PERCENT", "|": "PIPE", "||": "OR", "&&": "AND",
}
_BINARY = frozenset(
    ["EQEQ", "NE", "LT", "LE", "GT", "GE", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "AND",
     "OR", "NEG", "NOT", "AWAIT", "DOT", "INDEX_LSQB", "QMARK_UNWRAP", "QMARK_TERN"]
)

# Opener kinds and their closing raw token.
CLOSER_OF = {
    "BLOCK": "}", "RECORD": "}", "TYPE_OBJ": "}", "SIGNALS": "}", "PAREN": ")", "CALL": ")",
    "NAMED": ")", "PARAMS": ")", "LABEL": ")", "LIST": "]", "INDEX": "]", "TYPE_LIST": "]",
    "ENUM": "]", "ANGLE": ">", "TERN": ":",
}
_EXPR_GROUPS = frozenset(["PAREN", "CALL", "LIST", "INDEX", "TERN"])
_KEYED_GROUPS = frozenset(["RECORD", "NAMED"])
_TYPE_GROUPS = frozenset(["TYPE_OBJ", "TYPE_LIST", "ANGLE"])


class StopPass(Exception):
    """Raised by a diagnosis re-run when it reaches the token that failed."""


class Opener:
    """An open bracket (or ternary `?`) the pass is inside of."""

    __slots__ = ("kind", "index", "header", "counted", "pending", "ops", "fields")

    def __init__(self, kind: str, index: int, header: str = "") -> None:
        self.kind = kind
        self.index = index
        self.header = header
        self.counted = False
        self.pending = kind in _EXPR_GROUPS or kind in _TYPE_GROUPS
        self.ops = 0
        self.fields: set[str] | None = set() if kind == "TYPE_OBJ" else None


def _shifts(action: Any) -> bool:
    """A ``choices()`` entry that shifts (Lark shows its actions as ``Shift``/``Reduce``)."""
    return action is not None and str(action[0]) == "Shift"


class TokenPass:
    """Per-parse state of the pass: raw tokens, the opener stack, pending checks."""

    def __init__(self, source: str, toks: list[Tok], stop_at: int = -1) -> None:
        self.text = source  # Lark's LexerState reads `.text`
        self.source = source
        self.toks = toks
        self.openers: list[Opener] = []
        self.cur = 0
        self.pre_top: Opener | None = None
        self.pre_parser: Any = None  # diagnosis re-run: the parser just before stop_at
        self.parser: Any = None  # the interactive parser being driven
        self.last = ""  # terminal of the previous token
        self.prev2 = ""  # terminal before that
        self.header = ""  # kind of the block the next BLOCK_LBRACE opens
        self.loop_depth = 0
        self.process_depth = 0
        self.block_frames = 0
        self.group_frames = 0
        self.stmt_frame = 0
        self.stmt_ops = 0
        self.chain = 0  # sum of `ops` over the open levels (+ statement level)
        self.pending_stmt = False  # next token begins a statement's expression
        self.frame_after: int = -1  # token index after which the statement expression starts
        self.deferred: dict[int, LangError] = {}
        self.label_closed = False
        self.stop_at = stop_at  # diagnosis re-run: stop before this token

    # ------------------------------------------------------------------ helpers

    def ok(self, term: str) -> bool:
        """Would the parser shift ``term`` now? The current state's row (``choices()``)
        decides when it has no action for it or a shift; a reduce is checked by feeding the
        terminal to a copy, because LALR may reduce on a lookahead that turns out to be an
        error only after the reductions."""
        action = self.parser.choices().get(term)
        if action is None:
            return False
        if _shifts(action):
            return True
        trial = self.parser.copy(deepcopy_values=False)
        try:
            trial.feed_token(Token(term, ""))
        except UnexpectedToken:
            return False
        return True

    def err(self, message: str, offset: int, hint: str | None = None) -> LangError:
        return parse_error(self.source, message, offset, hint=hint)

    def depth(self) -> int:
        return self.block_frames + self.stmt_frame + self.group_frames

    def enter(self, index: int) -> None:
        """The original's nesting guard: entering one more level at token ``index``."""
        if self.depth() >= MAX_NESTING:
            raise self.err(NESTING_MESSAGE, self.toks[index].start_pos)

    def bump_chain(self, index: int, amount: int = 1) -> None:
        if self.openers:
            self.openers[-1].ops += amount
        else:
            self.stmt_ops += amount
        self.chain += amount
        if self.chain + len(self.openers) > MAX_CHAIN:
            raise self.err(NESTING_MESSAGE, self.toks[index].start_pos)

    def reset_level(self) -> None:
        if self.openers:
            self.chain -= self.openers[-1].ops
            self.openers[-1].ops = 0
        else:
            self.chain -= self.stmt_ops
            self.stmt_ops = 0

    # ------------------------------------------------------------------ the pass

    def drive(self, parser: Any) -> None:
        """Feed every raw token, with its terminal, to the interactive ``parser`` (one that
        builds no AST: trials on its shallow copies may disturb the values it keeps)."""
        self.parser = parser
        toks = self.toks
        i = 0
        stop_at = self.stop_at
        while True:
            tok = toks[i]
            if i == stop_at:
                self.pre_top = self.openers[-1] if self.openers else None
                self.pre_parser = parser.copy(deepcopy_values=False)
                raise StopPass()
            self.cur = i
            if tok.kind == "EOF":
                parser.feed_token(Token("$END", "", tok.start_pos))
                return
            term = self.classify(i, tok)
            self.after(i, tok, term)
            self.prev2 = self.last
            self.last = term
            tok.type = term
            parser.feed_token(tok)
            pending = self.deferred.pop(i, None)
            if pending is not None:
                raise pending
            i += 1

    def new_statement(self) -> None:
        self.stmt_frame = 0
        self.reset_level()

    def begin_expr_frame(self, i: int) -> None:
        self.enter(i)
        self.stmt_frame = 1

    def classify(self, i: int, tok: Tok) -> str:  # noqa: C901 - one dispatch on token kind
        kind = tok.kind
        if self.label_closed:
            self.label_closed = False
            self.check_label_target(i, tok)
        if self.pending_stmt:
            self.pending_stmt = False
            self.begin_expr_frame(i)
        elif self.frame_after >= 0 and i == self.frame_after:
            self.frame_after = -1
            self.begin_expr_frame(i)
        elif self.openers:
            top = self.openers[-1]
            if top.pending and not top.counted:
                self.pending_enter(i, kind)

        plain = _PLAIN.get(kind)
        if plain is not None:
            return plain
        if kind == "IDENT":
            return self.ident(i, tok)
        if kind == "NUMBER":
            self.maybe_expr_statement(i, "NUMBER")
            return "NUMBER"
        if kind == "STRING":
            if self.ok("KEY"):
                return "KEY"
            self.maybe_expr_statement(i, "STRING")
            return "STRING"
        if kind in KEY_WORDS:
            if self.ok("KEY"):
                return "KEY"
            return self.reserved(i, tok)
        if kind == "{":
            if self.ok("BLOCK_LBRACE"):
                return "BLOCK_LBRACE"
            self.maybe_expr_statement(i, "LBRACE")
            return "LBRACE"
        if kind == "(":
            if self.ok("CALL_LPAR"):
                return "CALL_LPAR"
            self.maybe_expr_statement(i, "LPAR")
            return "LPAR"
        if kind == "[":
            if self.ok("INDEX_LSQB"):
                return "INDEX_LSQB"
            self.maybe_expr_statement(i, "LSQB")
            return "LSQB"
        if kind == "-":
            if self.ok("MINUS"):
                return "MINUS"
            if self.toks[i + 1].kind == ">" and self.ok("ARROW"):
                return "ARROW"
            self.maybe_expr_statement(i, "NEG")
            return "NEG"
        if kind == "!":
            self.maybe_expr_statement(i, "NOT")
            return "NOT"
        if kind == ",":
            nxt = self.toks[i + 1].kind
            if nxt in _CLOSERS or nxt == "EOF":
                if self.ok("TUPLE_END"):
                    return "TUPLE_END"
                top = self.openers[-1] if self.openers else None
                if top is not None and CLOSER_OF[top.kind] == nxt and self.ok("TRAILING_COMMA"):
                    return "TRAILING_COMMA"
            return "COMMA"
        if kind == "?":
            if self.ok("QMARK_OPT"):
                return "QMARK_OPT"
            return "QMARK_TERN" if starts_ternary(self.toks, i) else "QMARK_UNWRAP"
        if kind == "=":
            return "ASSIGN_EQ" if self.ok("ASSIGN_EQ") else "="
        if kind == "@":
            if self.ok("AT"):
                self.new_statement()
            return "AT"
        term = _SIMPLE.get(kind)
        return term if term is not None else kind

    def pending_enter(self, i: int, kind: str) -> None:
        """A bracket's content frame starts at its first token (records: after `:`)."""
        if not self.openers:
            return
        top = self.openers[-1]
        if top.pending and not top.counted:
            top.pending = False
            if kind != CLOSER_OF[top.kind]:
                self.enter(i)
                top.counted = True
                self.group_frames += 1

    def maybe_expr_statement(self, i: int, term: str) -> None:
        """A token that can begin an expression starts a new statement when one can start."""
        if self.ok("KW_BREAK"):
            self.new_statement()
            self.begin_expr_frame(i)

    def statement_start(self) -> bool:
        return self.ok("KW_BREAK")

    # ------------------------------------------------------------------ words

    def ident(self, i: int, tok: Tok) -> str:
        name = tok.value
        nxt = self.toks[i + 1].kind
        # Fast paths for the two common cases, decided by the current row alone: a key
        # (after `.` or in a record) and a plain operand where no statement can start.
        row = self.parser.choices()
        if _shifts(row.get("KEY")):
            return "KEY"
        if _shifts(row.get("NULL")) and "KW_BREAK" not in row and "T_LIST" not in row:
            if name in _SPECIAL_OPERANDS:
                return self.operand_ident(i, name, nxt)
            return "IDENT"
        if self.ok("T_LIST"):  # type position
            if name in _TYPE_WORDS and nxt != ".":
                return _TYPE_WORDS[name]
            return "IDENT"
        if self.statement_start():
            self.new_statement()
            if is_assignment(self.toks, i):
                self.frame_after = self.find_assign_eq(i) + 1
                return "ASSIGN_NAME"
            word = _STMT_WORDS.get(name)
            if word is not None:
                return self.statement_word(i, tok, word)
            if self.ok("KW_PROCESS"):  # module level
                if name == "type":
                    return "KW_TYPE"
                if name == "process":
                    self.header = "process"
                    return "KW_PROCESS"
                if name == "trigger":
                    raise self.err(
                        "declarative trigger syntax has been removed; construct a source value "
                        "and call the trigger registry register operation",
                        tok.start_pos,
                        hint="construct a host-provided trigger source value and call the "
                        "trigger registry register operation",
                    )
            self.begin_expr_frame(i)
            return self.operand_ident(i, name, nxt)
        if self.ok("NULL"):  # operand position
            return self.operand_ident(i, name, nxt)
        if self.ok("KEY"):
            return "KEY"
        if self.last == "KW_LET":
            self.frame_after = self.find_assign_eq(i) + 1 if is_assignment(self.toks, i) else -1
            return "ASSIGN_NAME"
        if name == "label" and self.last == "AT":
            return "KW_LABEL"
        if name == "until" and self.last == "KW_SLEEP":
            return "KW_UNTIL"
        if name == "signals" and self.ok("KW_SIGNALS") and not is_assignment(self.toks, i):
            return "KW_SIGNALS"
        return "IDENT"

    def find_assign_eq(self, i: int) -> int:
        j = i + 1
        toks = self.toks
        while toks[j].kind != "=":
            if toks[j].kind == "[":
                j = skip_brackets(self.toks, j)
            else:
                j += 1
        return j

    def statement_word(self, i: int, tok: Tok, word: str) -> str:
        name = str(tok.value)
        if word == "KW_LET":
            return word
        if word in ("KW_YIELD", "KW_WAKE", "KW_FAIL"):
            if self.process_depth == 0:
                raise self.err(f"`{name}` can only be used inside a `process` body", tok.start_pos)
            self.pending_stmt = True
            return word
        if word == "KW_FINISH":
            if self.toks[i + 1].kind in ("}", "EOF"):
                raise self.err(
                    "`finish` requires a value; use `finish null` to finish with null", tok.start_pos
                )
            self.pending_stmt = True
            return word
        if word in ("KW_BREAK", "KW_CONTINUE"):
            if self.loop_depth == 0:
                raise self.err(f"`{name}` can only be used inside a loop", tok.start_pos)
            return word
        # while
        self.header = "loop"
        self.pending_stmt = True
        return word

    def operand_ident(self, i: int, name: str, nxt: str) -> str:
        toks = self.toks
        if name == "start":
            if nxt == "call":
                raise self.err("unexpected `start call`", toks[i].start_pos)
            if nxt == "{" or (nxt == "(" and paren_then_brace(self.toks, i + 1)):
                raise self.err("unexpected inline `start` process body", toks[i + 1].start_pos)
            if nxt == "IDENT":
                return "KW_START"
            return "IDENT"
        if name == "sleep":
            return "KW_SLEEP"
        if name == "Type" and nxt == "{":
            return "KW_TYPELIT"
        if name == "parallel" and nxt == "{":
            raise self.err("unexpected `parallel`", toks[i].start_pos)
        if nxt == "(" and name in ("wait_signal", "signal_run"):
            self.check_signal_call(i, name)
        return "IDENT"

    def check_signal_call(self, i: int, name: str) -> None:
        """Signal names must be string literals (so a process's signals are known without
        running it); raised once the call's `)` has been parsed, at the offending name."""
        rpar = matching(self.toks, i + 1)
        if rpar < 0:
            return
        args = args_of(self.toks, i + 1, rpar)
        at = self.toks[rpar].start_pos
        if name == "wait_signal":
            if len(args) != 1:
                self.deferred[rpar] = self.err(
                    f"expected one signal name argument, found {len(args)} arguments", at
                )
            elif not string_literal(args[0]):  # at the name (the original said 1:1)
                self.deferred[rpar] = self.err(
                    "unexpected non-literal signal name in `wait_signal`", args[0][0].start_pos
                )
        else:
            if len(args) != 3:
                self.deferred[rpar] = self.err(
                    "expected run handle, signal name, and payload arguments, "
                    f"found {len(args)} arguments",
                    at,
                )
            elif not string_literal(args[1]):
                self.deferred[rpar] = self.err(
                    "unexpected non-literal signal name in `signal_run`", args[1][0].start_pos
                )

    def reserved(self, i: int, tok: Tok) -> str:
        kind = tok.kind
        if kind == "if":
            if self.last == "ELSE":
                self.header = "if"
                self.pending_stmt = True
            elif self.statement_start():
                self.new_statement()
                self.header = "if"
                self.pending_stmt = True
            return "IF"
        if kind == "for":
            if self.statement_start():
                self.new_statement()
                self.header = "loop"
                self.frame_after = self.find_in(i)
            return "FOR"
        if kind in ("print", "cancel"):
            if self.statement_start():
                self.new_statement()
                if kind == "print" and self.process_depth > 0:
                    raise self.err("`print` can't be used inside a `process` body", tok.start_pos)
                self.pending_stmt = True
            return kind.upper()
        if kind == "else":
            if self.ok("ELSE"):
                self.header = "if"
            return "ELSE"
        if kind == "submit":
            if self.ok("NULL"):
                raise self.err("`submit` was removed; use `finish <value>`", tok.start_pos)
            return "SUBMIT"
        if kind == "call":
            if self.ok("NULL"):
                raise self.err("unexpected `call`", tok.start_pos)
            return "CALL"
        term = _SIMPLE[kind]
        if term in ("NULL", "TRUE", "FALSE", "NOT", "AWAIT"):
            self.maybe_expr_statement(i, term)
        return term

    def find_in(self, i: int) -> int:
        toks = self.toks
        if toks[i + 1].kind == "IDENT" and toks[i + 2].kind == "in":
            return i + 3
        return -1

    # ------------------------------------------------------------------ bookkeeping

    def after(self, i: int, tok: Tok, term: str) -> None:  # noqa: C901
        """Opener stack, frames and per-statement checks once ``term`` is chosen."""
        if term in _BINARY:
            self.bump_chain(i)
        if term not in _AFTER_TERMS:
            return
        openers = self.openers
        if term == "BLOCK_LBRACE":
            self.stmt_frame = 0
            self.reset_level()
            self.enter(i)
            op = Opener("BLOCK", i, self.header)
            openers.append(op)
            self.block_frames += 1
            if op.header == "loop":
                self.loop_depth += 1
            elif op.header == "process":
                self.process_depth += 1
            self.header = ""
        elif term == "LBRACE":
            if self.last == "KW_SIGNALS":
                openers.append(Opener("SIGNALS", i))
            elif self.last in ("KW_TYPELIT", "T_TYPE") or self.ok("T_LIST"):
                openers.append(Opener("TYPE_OBJ", i))
            else:
                openers.append(Opener("RECORD", i))
        elif term == "CALL_LPAR":
            if self.prev2 == "KW_START":
                kind = "NAMED"
            elif self.last == "KW_LABEL":
                kind = "LABEL"
            elif self.prev2 == "KW_PROCESS":
                kind = "PARAMS"
            else:
                kind = "CALL"
            openers.append(Opener(kind, i))
        elif term == "LPAR":
            openers.append(Opener("PAREN", i))
        elif term == "INDEX_LSQB":
            openers.append(Opener("INDEX", i))
        elif term == "LSQB":
            if self.last == "T_LIST":
                openers.append(Opener("TYPE_LIST", i))
            elif self.last == "T_ENUM":
                openers.append(Opener("ENUM", i))
            else:
                openers.append(Opener("LIST", i))
        elif term == "QMARK_TERN":
            openers.append(Opener("TERN", i))
        elif term == "LT" and self.last in ("T_PROCESS", "T_TRIGGER"):
            openers.append(Opener("ANGLE", i))
        elif term in ("RBRACE", "RPAR", "RSQB", "COLON", "GT"):
            self.close(i, tok, term)
        elif term in ("COMMA", "TRAILING_COMMA", "TUPLE_END"):
            self.reset_level()
        elif term == "KEY" and openers:
            top = openers[-1]
            if top.kind == "TYPE_OBJ" and self.last in ("LBRACE", "COMMA"):
                name = str(tok.value)
                assert top.fields is not None
                if name in top.fields:
                    raise self.err(
                        f"expected unique field name, found duplicate field `{name}`", tok.start_pos
                    )
                top.fields.add(name)
        elif term == "STRING" and openers and openers[-1].kind == "LABEL":
            self.check_label_field(i)

    def close(self, i: int, tok: Tok, term: str) -> None:
        openers = self.openers
        if not openers:
            return
        top = openers[-1]
        raw = tok.kind
        if raw == ":" and top.kind in _KEYED_GROUPS:
            if not top.counted:
                top.pending = True
            return
        if CLOSER_OF[top.kind] != raw:
            return
        if top.kind == "ENUM" and top.index == i - 1:
            raise self.err(
                "expected at least one enum string literal, found empty enum",
                self.toks[top.index - 1].start_pos,
            )
        openers.pop()
        self.chain -= top.ops
        if top.counted:
            self.group_frames -= 1
        if top.kind == "BLOCK":
            self.block_frames -= 1
            self.stmt_frame = 0
            if top.header == "loop":
                self.loop_depth -= 1
            elif top.header == "process":
                self.process_depth -= 1
        elif top.kind == "LABEL":
            self.finish_label(top, i)
            self.label_closed = True

    # ------------------------------------------------------------------ @label

    def check_label_field(self, i: int) -> None:
        """A `key: "value"` pair just ended inside `@label(...)`: validate the key."""
        toks = self.toks
        key = toks[i - 2]
        if toks[i - 1].kind != ":" or key.kind != "IDENT":
            return
        name = str(key.value)
        seen = self._label_seen(i - 2)
        if name not in ("title", "description"):
            self.deferred[i] = self.err(
                f"invalid @label annotation: unknown field `{name}`", key.start_pos
            )
        elif name in seen:
            self.deferred[i] = self.err(
                f"invalid @label annotation: duplicate `{name}` field", key.start_pos
            )

    def _label_seen(self, upto: int) -> set[str]:
        opener = self.openers[-1]
        toks = self.toks
        seen: set[str] = set()
        k = opener.index + 1
        while k < upto:
            if toks[k].kind == "IDENT" and toks[k + 1].kind == ":":
                seen.add(str(toks[k].value))
            k += 1
        return seen

    def finish_label(self, opener: Opener, rpar: int) -> None:
        seen = self._label_seen_range(opener.index, rpar)
        if "title" not in seen:
            at = self.toks[opener.index - 2].start_pos  # the `@`
            self.deferred[rpar] = self.err("invalid @label annotation: `title` is required", at)

    def _label_seen_range(self, lpar: int, rpar: int) -> set[str]:
        toks = self.toks
        return {
            str(toks[k].value)
            for k in range(lpar + 1, rpar)
            if toks[k].kind == "IDENT" and toks[k + 1].kind == ":"
        }

    def check_label_target(self, i: int, tok: Tok) -> None:
        """2.4 item 13: what may follow `@label(...)`."""
        bad = tok.kind == "@"
        if tok.kind == "IDENT":
            name = tok.value
            if name in ("type", "trigger"):
                bad = True
            elif name == "process":
                bad = not (self.ok("KW_PROCESS") and not is_assignment(self.toks, i))
        if bad:
            raise self.err(
                "@label can annotate statements or process declarations, but not other "
                "declarations or another @label",
                tok.start_pos,
            )


class ReplayLexer(Lexer):
    """Hands Lark the tokens the pass has already typed (Lark's custom-lexer interface)."""

    __future_interface__ = 2

    def __init__(self, lexer_conf: Any) -> None:  # Lark hands its lexer config; unused
        pass

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        toks: list[Token] = lexer_state.text.toks
        return iter(toks[:-1])  # the pass's EOF token is not a terminal


class Typed:
    """The "text" Lark is given to parse: the token list the pass has typed."""

    __slots__ = ("toks",)

    def __init__(self, toks: list[Any]) -> None:
        self.toks = toks
