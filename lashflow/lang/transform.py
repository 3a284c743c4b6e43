"""Grammar rules -> AST nodes (``lashflow.lang.ast``), run inline by the LALR parser.

Lark calls one method per reduced rule with its children (tokens and already built
nodes), so the tree is built bottom-up without recursion and no parse tree is kept.
The methods only build nodes: every check that can fail happens in the token pass.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer

from lashflow.lang import ast as A
from lashflow.lang.names import JSON_TYPE_ALIASES

_OPS = {"&&": "and", "||": "or", "!": "not"}


def _start(x: Any) -> int:
    return x.start_pos if isinstance(x, Token) else x.span.start


def _end(x: Any) -> int:
    return x.end_pos if isinstance(x, Token) else x.span.end


def _span(first: Any, last: Any) -> A.Span:
    return A.Span(_start(first), _end(last))


def _nodes(children: list[Any]) -> list[Any]:
    """Children that are not punctuation tokens."""
    return [c for c in children if not isinstance(c, Token)]


class _Signals:
    __slots__ = ("params",)

    def __init__(self, params: list[A.Param]) -> None:
        self.params = params


class _Returns:
    __slots__ = ("type",)

    def __init__(self, type_: A.TypeExpr) -> None:
        self.type = type_


class _Entry:
    __slots__ = ("key", "value")

    def __init__(self, key: str, value: Any) -> None:
        self.key = key
        self.value = value


class AstBuilder(Transformer):
    """One method per rule (or alias) of grammar/lashlang.lark."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.source = ""

    # ------------------------------------------------------------------ module

    def start(self, c: list[Any]) -> A.Module:
        module = A.Module(self.source)
        for item in c:
            if isinstance(item, A.ProcessDecl):
                module.processes.append(item)
            elif isinstance(item, A.TypeDecl):
                module.types.append(item)
            else:
                module.main.append(item)
        return module

    def type_decl(self, c: list[Any]) -> A.TypeDecl:
        return A.TypeDecl(str(c[1].value), c[3], _span(c[0], c[3]))

    def process_decl(self, c: list[Any]) -> A.ProcessDecl:
        label = c[0] if isinstance(c[0], A.Label) else None
        at = 1 if label else 0
        name = str(c[at + 1].value)
        params = c[at + 3]
        signals: list[A.Param] = []
        returns = None
        for item in c[at + 5:-1]:
            if isinstance(item, _Signals):
                signals = item.params
            elif isinstance(item, _Returns):
                returns = item.type
        body = c[-1]
        return A.ProcessDecl(name, params, signals, returns, body, _span(c[0], body), label)

    def params(self, c: list[Any]) -> list[A.Param]:
        return _nodes(c)

    def param(self, c: list[Any]) -> A.Param:
        return A.Param(str(c[0].value), c[2], _span(c[0], c[2]))

    def signals(self, c: list[Any]) -> _Signals:
        return _Signals(c[2])

    def returns(self, c: list[Any]) -> _Returns:
        return _Returns(c[2])

    def label(self, c: list[Any]) -> A.Label:
        fields = dict(f for f in c if isinstance(f, tuple))
        return A.Label(fields.get("title", ""), fields.get("description"), _span(c[0], c[-1]))

    def label_field(self, c: list[Any]) -> tuple[str, str]:
        return (str(c[0].value), str(c[2].value))

    # ------------------------------------------------------------------ statements

    def stmt(self, c: list[Any]) -> Any:
        if len(c) == 2:
            node = c[1]
            node.label = c[0]
            return node
        return c[0]

    def block(self, c: list[Any]) -> A.Block:
        return A.Block(c[1:-1], _span(c[0], c[-1]))

    def if_stmt(self, c: list[Any]) -> A.If:
        otherwise = c[4] if len(c) > 3 else None
        return A.If(c[1], c[2], otherwise, _span(c[0], c[-1]))

    def for_stmt(self, c: list[Any]) -> A.For:
        return A.For(str(c[1].value), c[3], c[4], _span(c[0], c[4]))

    def while_stmt(self, c: list[Any]) -> A.While:
        return A.While(c[1], c[2], _span(c[0], c[2]))

    def assign(self, c: list[Any]) -> A.Assign:
        return A.Assign(str(c[0].value), c[1:-2], c[-1], _span(c[0], c[-1]))

    def let_assign(self, c: list[Any]) -> A.Assign:
        node = c[1]
        node.span = A.Span(c[0].start_pos, node.span.end)
        return node

    def field_step(self, c: list[Any]) -> A.FieldStep:
        return A.FieldStep(str(c[1].value), _span(c[0], c[1]))

    def index_step(self, c: list[Any]) -> A.IndexStep:
        return A.IndexStep(c[1], _span(c[0], c[2]))

    def value_stmt(self, c: list[Any]) -> A.ValueStmt:
        return A.ValueStmt(str(c[0].value), c[1], _span(c[0], c[1]))

    def break_stmt(self, c: list[Any]) -> A.Break:
        return A.Break(_span(c[0], c[0]))

    def continue_stmt(self, c: list[Any]) -> A.Continue:
        return A.Continue(_span(c[0], c[0]))

    def expr_stmt(self, c: list[Any]) -> A.ExprStmt:
        return A.ExprStmt(c[0], c[0].span)

    # ------------------------------------------------------------------ expressions

    def tuple(self, c: list[Any]) -> A.TupleLit:
        return A.TupleLit(_nodes(c), _span(c[0], c[-1]))

    def ternary(self, c: list[Any]) -> A.Ternary:
        return A.Ternary(c[0], c[2], c[4], _span(c[0], c[4]))

    def binary(self, c: list[Any]) -> A.Binary:
        op = str(c[1].value)
        return A.Binary(_OPS.get(op, op), c[0], c[2], _span(c[0], c[2]))

    def unary(self, c: list[Any]) -> A.Unary:
        op = str(c[0].value)
        return A.Unary("-" if op == "-" else "not", c[1], _span(c[0], c[1]))

    def await_expr(self, c: list[Any]) -> A.Await:
        return A.Await(c[1], _span(c[0], c[1]))

    def field(self, c: list[Any]) -> A.Field:
        return A.Field(c[0], str(c[2].value), _span(c[0], c[2]))

    def receiver_call(self, c: list[Any]) -> A.ReceiverCall:
        return A.ReceiverCall(c[0], str(c[2].value), c[4], _span(c[0], c[5]))

    def index(self, c: list[Any]) -> A.Index:
        return A.Index(c[0], c[2], _span(c[0], c[3]))

    def unwrap(self, c: list[Any]) -> A.Unwrap:
        return A.Unwrap(c[0], _span(c[0], c[1]))

    def null(self, c: list[Any]) -> A.Null:
        return A.Null(_span(c[0], c[0]))

    def true(self, c: list[Any]) -> A.Bool:
        return A.Bool(True, _span(c[0], c[0]))

    def false(self, c: list[Any]) -> A.Bool:
        return A.Bool(False, _span(c[0], c[0]))

    def number(self, c: list[Any]) -> A.Number:
        return A.Number(float(c[0].value), _span(c[0], c[0]))

    def string(self, c: list[Any]) -> A.String:
        return A.String(str(c[0].value), _span(c[0], c[0]))

    def name(self, c: list[Any]) -> A.Name:
        return A.Name(str(c[0].value), _span(c[0], c[0]))

    def call(self, c: list[Any]) -> Any:
        name = str(c[0].value)
        args = c[2]
        span = _span(c[0], c[3])
        if name == "wait_signal":
            return A.WaitSignal(_literal(args[0]), span)
        if name == "signal_run":
            return A.SignalRun(args[0], _literal(args[1]), args[2], span)
        return A.BuiltinCall(name, args, span)

    def args(self, c: list[Any]) -> list[Any]:
        return _nodes(c)

    def empty_tuple(self, c: list[Any]) -> A.TupleLit:
        return A.TupleLit([], _span(c[0], c[1]))

    def group(self, c: list[Any]) -> Any:
        return c[1]

    def list(self, c: list[Any]) -> A.ListLit:
        return A.ListLit(_nodes(c), _span(c[0], c[-1]))

    def comprehension(self, c: list[Any]) -> A.Comprehension:
        clauses: list[Any] = []
        for group in c[2:-1]:
            clauses.extend(group)
        return A.Comprehension(c[1], clauses, _span(c[0], c[-1]))

    def comp_for(self, c: list[Any]) -> list[Any]:
        head = A.CompFor(str(c[1].value), c[3], _span(c[0], c[3]))
        return [head, *c[4:]]

    def comp_if(self, c: list[Any]) -> A.CompIf:
        return A.CompIf(c[1], _span(c[0], c[1]))

    def record(self, c: list[Any]) -> A.RecordLit:
        return A.RecordLit([(e.key, e.value) for e in _nodes(c)], _span(c[0], c[-1]))

    def entry(self, c: list[Any]) -> _Entry:
        return _Entry(str(c[0].value), c[2])

    def start_process(self, c: list[Any]) -> A.Start:
        entries = [(e.key, e.value) for e in _nodes(c)]
        return A.Start(str(c[1].value), entries, _span(c[0], c[-1]))

    def sleep(self, c: list[Any]) -> A.Sleep:
        return A.Sleep(str(c[1].value), c[2], _span(c[0], c[2]))

    def type_literal(self, c: list[Any]) -> A.TypeLiteral:
        return A.TypeLiteral(c[1], _span(c[0], c[1]))

    # ------------------------------------------------------------------ types

    def type_expr(self, c: list[Any]) -> A.TypeExpr:
        terms = _nodes(c)
        if len(terms) == 1:
            return terms[0]
        return A.TypeUnion(terms, _span(terms[0], terms[-1]))

    type_expr_nb = type_expr

    def type_null(self, c: list[Any]) -> A.TypeNull:
        return A.TypeNull(_span(c[0], c[0]))

    def type_string(self, c: list[Any]) -> A.TypeStringLiteral:
        return A.TypeStringLiteral(str(c[0].value), _span(c[0], c[0]))

    def type_tagged_object(self, c: list[Any]) -> A.TypeObject:
        obj = c[1]
        obj.span = _span(c[0], obj)
        return obj

    def type_enum(self, c: list[Any]) -> A.TypeEnum:
        members = [str(t.value) for t in c if t.type == "STRING"]
        return A.TypeEnum(members, _span(c[0], c[-1]))

    def type_list(self, c: list[Any]) -> A.TypeList:
        return A.TypeList(c[2], _span(c[0], c[3]))

    def type_process(self, c: list[Any]) -> A.TypeProcess:
        return A.TypeProcess(c[2], c[4], _span(c[0], c[5]))

    def type_trigger(self, c: list[Any]) -> A.TypeTriggerHandle:
        return A.TypeTriggerHandle(c[2], _span(c[0], c[3]))

    def type_name(self, c: list[Any]) -> A.TypeName:
        name = ".".join(str(t.value) for t in c if t.type == "IDENT")
        return A.TypeName(JSON_TYPE_ALIASES.get(name, name), _span(c[0], c[-1]))

    def type_object(self, c: list[Any]) -> A.TypeObject:
        return A.TypeObject(_nodes(c), _span(c[0], c[-1]))

    def type_field(self, c: list[Any]) -> A.TypeField:
        optional = len(c) == 4
        return A.TypeField(str(c[0].value), c[2], optional, _span(c[0], c[-1]))


def _literal(node: Any) -> str:
    return node.value if isinstance(node, A.String) else ""
