"""AST -> Lashlang source: ``print_module(parse(src))`` parses back to the same tree.

Used by the hardening tests (generated programs must be text to go through the CLI and
``Engine.run``) and handy for tooling that rewrites programs. The output is canonical,
not pretty: it adds parentheses wherever the grammar could read the text another way,
because newlines carry no meaning in Lashlang:

* a postfix ``?`` is always printed as ``(x?)``: the ternary look-ahead (a `?` is a ternary
  only if a matching `:` follows)
  can then never take it for a ternary ``?``;
* tuples are always parenthesised, and ``sleep`` (whose operand runs to the right) is
  parenthesised unless it is the whole statement expression;
* ``if``/``while`` conditions and ``for`` iterables are parenthesised, so a record or a
  trailing name can never be mistaken for the block's ``{``.

Spans, site ids and linker fields are not printed (a re-parse computes them again).
Some trees have no text: an expression statement starting with ``(``, ``[`` or ``-``
right after a statement that ends in an expression would be read as a call, an index
or a subtraction of that expression. ``print_module`` refuses those with
``Unprintable`` instead of printing a different program.
"""

from __future__ import annotations

import re
from decimal import Decimal

from lashflow.lang import ast as A

__all__ = ["Unprintable", "print_module", "print_stmt", "print_expr", "print_type", "quote"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Precedence levels, lowest first (as in grammar/lashlang.lark). A child printed below the level
# its position needs is parenthesised.
EXPR, TERNARY, OR, AND, CMP, ADD, MUL, UNARY, POSTFIX, PRIMARY = range(10)
BINARY_LEVEL = {"or": OR, "and": AND, "==": CMP, "!=": CMP, "<": CMP, "<=": CMP, ">": CMP,
                 ">=": CMP, "+": ADD, "-": ADD, "*": MUL, "/": MUL, "%": MUL}
_STATEMENT_KINDS = ("finish", "fail", "yield", "wake", "print", "cancel")


class Unprintable(ValueError):
    """The tree has no Lashlang text that parses back to it."""


# --------------------------------------------------------------------------- literals


def quote(text: str) -> str:
    """A double-quoted string literal whose decoded value is ``text``."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{out}"'


def _number(value: float) -> str:
    """Digits with at most one dot: Lashlang has no exponent and no sign in literals."""
    if value != value or value in (float("inf"), float("-inf")) or value < 0 or (
            value == 0 and str(value).startswith("-")):
        raise Unprintable(f"number {value!r} has no literal (negative or not finite)")
    if value.is_integer() and value < 1e16:
        return str(int(value))
    return format(Decimal(repr(value)), "f")


def _key(name: str) -> str:
    """A record key, field or argument name: a word (keywords included) or a string."""
    return name if _IDENT.match(name) else quote(name)


def _name(name: str) -> str:
    if not _IDENT.match(name):
        raise Unprintable(f"{name!r} is not an identifier")
    return name


# --------------------------------------------------------------------------- types


def print_type(node: A.TypeExpr, *, decl: bool = False) -> str:
    """A type expression. ``decl``: the right side of ``type X =``, where a union may not
    start with a bare ``{`` (it is printed as ``Type {...}``, the same tree)."""
    if isinstance(node, A.TypeName):
        return ".".join(_name(part) for part in node.name.split("."))
    if isinstance(node, A.TypeNull):
        return "null"
    if isinstance(node, A.TypeStringLiteral):
        return quote(node.value)
    if isinstance(node, A.TypeObject):
        fields = ", ".join(
            f"{_key(f.name)}: {print_type(f.type)}{'?' if f.optional else ''}" for f in node.fields)
        return "{ " + fields + " }" if fields else "{}"
    if isinstance(node, A.TypeEnum):
        if not node.members:
            raise Unprintable("an enum needs at least one member")
        return "enum[" + ", ".join(quote(m) for m in node.members) + "]"
    if isinstance(node, A.TypeList):
        return f"list[{print_type(node.item)}]"
    if isinstance(node, A.TypeUnion):
        if len(node.members) < 2 or any(isinstance(m, A.TypeUnion) for m in node.members):
            raise Unprintable("a union has two or more members, none of them a union")
        parts = [print_type(m) for m in node.members]
        if decl and isinstance(node.members[0], A.TypeObject):
            parts[0] = "Type " + parts[0]
        return " | ".join(parts)
    if isinstance(node, A.TypeProcess):
        return f"Process<{print_type(node.input)}, {print_type(node.output)}>"
    if isinstance(node, A.TypeTriggerHandle):
        return f"TriggerHandle<{print_type(node.item)}>"
    raise Unprintable(f"not a type node: {type(node).__name__}")


# --------------------------------------------------------------------------- expressions


def precedence(node: A.Expr) -> int:
    """The level an expression node prints at (parenthesised where a lower one is needed)."""
    if isinstance(node, A.Sleep):
        return EXPR  # its operand extends as far right as it can
    if isinstance(node, A.Ternary):
        return TERNARY
    if isinstance(node, A.Binary):
        return BINARY_LEVEL[node.op]
    if isinstance(node, (A.Unary, A.Await)):
        return UNARY
    if isinstance(node, (A.Field, A.Index, A.ReceiverCall)):
        return POSTFIX
    return PRIMARY


def print_expr(node: A.Expr, level: int = EXPR) -> str:
    """``node`` in a position that needs precedence ``level`` (parenthesised if lower)."""
    text = _expr(node)
    return f"({text})" if precedence(node) < level else text


def _args(items: list[A.Expr]) -> str:
    return ", ".join(print_expr(item, TERNARY) for item in items)


def _entries(entries: list[tuple[str, A.Expr]]) -> str:
    return ", ".join(f"{_key(k)}: {print_expr(v, TERNARY)}" for k, v in entries)


def _postfix_object(node: A.Expr) -> str:
    # `1.x` would lex as the number `1.` then `x`: numbers are parenthesised here.
    if isinstance(node, A.Number):
        return f"({_expr(node)})"
    return print_expr(node, POSTFIX)


def _expr(node: A.Expr) -> str:  # noqa: C901 - one branch per node kind
    if isinstance(node, A.Null):
        return "null"
    if isinstance(node, A.Bool):
        return "true" if node.value else "false"
    if isinstance(node, A.Number):
        return _number(node.value)
    if isinstance(node, A.String):
        return quote(node.value)
    if isinstance(node, A.Name):
        return _name(node.name)
    if isinstance(node, A.TupleLit):
        if not node.items:
            return "()"
        if len(node.items) == 1:
            return f"({print_expr(node.items[0], TERNARY)},)"
        return f"({_args(node.items)})"
    if isinstance(node, A.ListLit):
        return f"[{_args(node.items)}]"
    if isinstance(node, A.Comprehension):
        return _comprehension(node)
    if isinstance(node, A.RecordLit):
        return "{" + _entries(node.entries) + "}"
    if isinstance(node, A.Field):
        return f"{_postfix_object(node.obj)}.{_key(node.name)}"
    if isinstance(node, A.Index):
        return f"{_postfix_object(node.obj)}[{print_expr(node.index)}]"
    if isinstance(node, A.ReceiverCall):
        return f"{_postfix_object(node.receiver)}.{_key(node.operation)}({_args(node.args)})"
    if isinstance(node, A.Unwrap):
        return f"({_postfix_object(node.expr)}?)"
    if isinstance(node, A.BuiltinCall):
        return f"{_name(node.name)}({_args(node.args)})"
    if isinstance(node, A.Await):
        return f"await {print_expr(node.expr, UNARY)}"
    if isinstance(node, A.Unary):
        operand = print_expr(node.operand, UNARY)
        return f"-{operand}" if node.op == "-" else f"not {operand}"
    if isinstance(node, A.Binary):
        level = BINARY_LEVEL[node.op]
        return f"{print_expr(node.left, level)} {node.op} {print_expr(node.right, level + 1)}"
    if isinstance(node, A.Ternary):
        return (f"{print_expr(node.cond, OR)} ? {print_expr(node.then, TERNARY)} : "
                f"{print_expr(node.otherwise, TERNARY)}")
    if isinstance(node, A.Start):
        return f"start {_name(node.process)}({_entries(node.args)})"
    if isinstance(node, A.Sleep):
        return f"sleep {node.mode} ({print_expr(node.value)})"
    if isinstance(node, A.WaitSignal):
        return f"wait_signal({quote(node.name)})"
    if isinstance(node, A.SignalRun):
        return (f"signal_run({print_expr(node.run, TERNARY)}, {quote(node.name)}, "
                f"{print_expr(node.payload, TERNARY)})")
    if isinstance(node, A.TypeLiteral):
        return "Type " + print_type(node.type)
    raise Unprintable(f"not an expression node: {type(node).__name__}")


def _comprehension(node: A.Comprehension) -> str:
    if not node.clauses or not isinstance(node.clauses[0], A.CompFor):
        raise Unprintable("a comprehension starts with a `for` clause")
    parts = [print_expr(node.element, TERNARY)]
    for clause in node.clauses:
        if isinstance(clause, A.CompFor):
            parts.append(f"for {_name(clause.var)} in {print_expr(clause.iterable, POSTFIX)}")
        else:
            parts.append(f"if {print_expr(clause.cond, POSTFIX)}")
    return "[" + " ".join(parts) + "]"


# --------------------------------------------------------------------------- statements


def _label(label: A.Label | None) -> str:
    if label is None:
        return ""
    fields = [f"title: {quote(label.title)}"]
    if label.description is not None:
        fields.append(f"description: {quote(label.description)}")
    return f"@label({', '.join(fields)}) "


def _block(block: A.Block, indent: str) -> str:
    if not block.body:
        return "{}"
    inner = indent + "  "
    return "{\n" + _stmts(block.body, inner) + "\n" + indent + "}"


def _if(node: A.If, indent: str) -> str:
    text = f"if ({print_expr(node.cond)}) {_block(node.then, indent)}"
    if isinstance(node.otherwise, A.If):
        if node.otherwise.label is not None:
            raise Unprintable("an `else if` carries no label")
        text += " else " + _if(node.otherwise, indent)
    elif node.otherwise is not None:
        text += " else " + _block(node.otherwise, indent)
    return text


def print_stmt(node: A.Stmt, indent: str = "") -> str:
    """One statement (with its label), without the leading indent."""
    return _label(node.label) + _stmt_body(node, indent)


def _stmt_body(node: A.Stmt, indent: str) -> str:
    if isinstance(node, A.Assign):
        steps = "".join(f".{_key(s.name)}" if isinstance(s, A.FieldStep)
                        else f"[{print_expr(s.index)}]" for s in node.steps)
        return f"{_name(node.name)}{steps} = {print_expr(node.value)}"
    if isinstance(node, A.If):
        return _if(node, indent)
    if isinstance(node, A.For):
        return f"for {_name(node.var)} in ({print_expr(node.iterable)}) {_block(node.body, indent)}"
    if isinstance(node, A.While):
        return f"while ({print_expr(node.cond)}) {_block(node.body, indent)}"
    if isinstance(node, A.Break):
        return "break"
    if isinstance(node, A.Continue):
        return "continue"
    if isinstance(node, A.ValueStmt):
        if node.kind not in _STATEMENT_KINDS:
            raise Unprintable(f"unknown statement kind {node.kind!r}")
        return f"{node.kind} {print_expr(node.value)}"
    if isinstance(node, A.ExprStmt):
        return print_expr(node.expr)
    raise Unprintable(f"not a statement node: {type(node).__name__}")


def _ends_in_block(node: object) -> bool:
    return node is None or isinstance(node, (A.If, A.For, A.While, A.ProcessDecl))


def _stmts(body: list[A.Stmt], indent: str, previous: object = None) -> str:
    lines = []
    for stmt in body:
        text = print_stmt(stmt, indent)
        if (isinstance(stmt, A.ExprStmt) and stmt.label is None and text[:1] in "([-"
                and not _ends_in_block(previous)):
            raise Unprintable(
                f"the statement `{text[:30]}` would continue the statement before it")
        lines.append(indent + text)
        previous = stmt
    return "\n".join(lines)


# --------------------------------------------------------------------------- declarations


def _params(params: list[A.Param]) -> str:
    return ", ".join(f"{_name(p.name)}: {print_type(p.type)}" for p in params)


def _process(decl: A.ProcessDecl) -> str:
    text = f"{_label(decl.label)}process {_name(decl.name)}({_params(decl.params)})"
    if decl.signals:
        text += " signals { " + _params(decl.signals) + " }"
    if decl.returns is not None:
        text += f" -> {print_type(decl.returns)}"
    return text + " " + _block(decl.body, "")


def print_module(module: A.Module) -> str:
    """The whole module: type declarations, then processes, then the main block (the
    parser hoists declarations, so this order gives back the same ``Module``)."""
    parts = [f"type {_name(t.name)} = {print_type(t.type, decl=True)}" for t in module.types]
    parts += [_process(p) for p in module.processes]
    previous: object = module.processes[-1] if module.processes else (
        module.types[-1] if module.types else None)
    if module.main:
        parts.append(_stmts(module.main, "", previous))
    return "\n".join(parts) + "\n"
