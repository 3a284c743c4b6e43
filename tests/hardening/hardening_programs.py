"""Hypothesis strategies that build Lashlang programs as syntax trees (not random text).

Two families:

* ``syntax_modules()``: any tree the grammar can produce (every node kind, types,
  processes, labels), obeying only the parse-time rules (``print`` outside processes,
  ``yield``/``wake``/``fail`` inside, ``break`` and ``continue`` inside loops). Used for parse -> print -> parse.
* ``runnable_programs()``: main blocks meant to get past the linker and do something:
  values come mostly from tool answers (statically ``any``), so arithmetic, indexing,
  builtins and loops reach the interpreter, where they may finish, fail at runtime or
  hit a limit. Used to run generated programs through the in-memory host, the Engine
  and the CLI.

Depth is bounded so the generated nesting stays far below the parser's limit of 40.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from lashflow.lang import ast as A
from lashflow.lang.printer import print_expr
from lashflow.lang.record import fields_of

NAMES = ["a", "b", "x", "y", "n", "items", "acc", "_v", "k2", "Total"]
KEYWORD_KEYS = ["if", "for", "finish", "while", "type", "null", "start", "print"]
BUILTINS = ["len", "empty", "keys", "values", "trim", "to_string", "to_int", "to_float",
            "json_parse", "contains", "starts_with", "ends_with", "split", "join", "find",
            "slice", "push", "range", "ceil_div", "floor_div", "format", "grep_text"]
SCALAR_TYPES = ["str", "int", "float", "bool", "dict", "any", "User", "cron.Tick"]
BINARY_OPS = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or"]


# --------------------------------------------------------------------------- comparison


def shape(node: Any) -> Any:
    """A tree as nested tuples without spans, site ids, linker fields or source text:
    what must survive parse -> print -> parse."""
    names = fields_of(node)
    if names:
        return (type(node).__name__,) + tuple(
            (name, shape(getattr(node, name))) for name in names
            if name not in ("span", "site", "module", "source"))
    if isinstance(node, (list, tuple)):
        return tuple(shape(item) for item in node)
    return node


# --------------------------------------------------------------------------- leaves

text = st.text(max_size=12)
keys = st.one_of(st.sampled_from(NAMES + KEYWORD_KEYS), st.text(min_size=0, max_size=6))
numbers = st.one_of(
    st.integers(0, 10**6).map(float),
    st.floats(min_value=0.0, max_value=1e30, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, 0.1, 3.0, 1e22, 123456789.125]),
).filter(lambda v: not (v == 0.0 and str(v).startswith("-")))


def _leaf() -> st.SearchStrategy[A.Expr]:
    return st.one_of(
        st.just(A.Null()),
        st.booleans().map(lambda b: A.Bool(b)),
        numbers.map(lambda v: A.Number(v)),
        text.map(lambda s: A.String(s)),
        st.sampled_from(NAMES).map(lambda n: A.Name(n)),
    )


# --------------------------------------------------------------------------- types


def types(depth: int = 2) -> st.SearchStrategy[A.TypeExpr]:
    term = st.one_of(
        st.sampled_from(SCALAR_TYPES).map(lambda n: A.TypeName(n)),
        st.just(A.TypeNull()),
        text.map(lambda s: A.TypeStringLiteral(s)),
        st.lists(text, min_size=1, max_size=3).map(lambda m: A.TypeEnum(m)),
    )
    if depth <= 0:
        return term
    inner = types(depth - 1)
    fields = st.lists(st.tuples(keys, inner, st.booleans()), max_size=3,
                      unique_by=lambda f: f[0])
    compound = st.one_of(
        fields.map(lambda fs: A.TypeObject([A.TypeField(k, t, o) for k, t, o in fs])),
        inner.map(lambda t: A.TypeList(t)),
        st.tuples(inner, inner).map(lambda p: A.TypeProcess(*p)),
        inner.map(lambda t: A.TypeTriggerHandle(t)),
    )
    single = st.one_of(term, compound)
    union = st.lists(single, min_size=2, max_size=3).map(lambda ms: A.TypeUnion(ms))
    return st.one_of(single, union)


def type_objects(depth: int = 2) -> st.SearchStrategy[A.TypeObject]:
    fields = st.lists(st.tuples(keys, types(depth - 1), st.booleans()), max_size=3,
                      unique_by=lambda f: f[0])
    return fields.map(lambda fs: A.TypeObject([A.TypeField(k, t, o) for k, t, o in fs]))


# --------------------------------------------------------------------------- expressions

_EXPR_CACHE: dict[int, st.SearchStrategy[A.Expr]] = {}


def exprs(depth: int = 3) -> st.SearchStrategy[A.Expr]:
    """Any expression node, nested at most ``depth`` levels."""
    if depth in _EXPR_CACHE:
        return _EXPR_CACHE[depth]
    if depth <= 0:
        result = _leaf()
        _EXPR_CACHE[depth] = result
        return result
    sub = exprs(depth - 1)
    items = st.lists(sub, max_size=3)
    entries = st.lists(st.tuples(keys, sub), max_size=3)
    receiver = st.sampled_from([A.Name("tools"), A.Field(A.Name("ws"), "default")])
    clause = st.one_of(
        st.tuples(st.sampled_from(NAMES), sub).map(lambda p: A.CompFor(p[0], p[1])),
        sub.map(lambda c: A.CompIf(c)),
    )
    comprehension = st.tuples(sub, st.sampled_from(NAMES), sub, st.lists(clause, max_size=2)).map(
        lambda p: A.Comprehension(p[0], [A.CompFor(p[1], p[2]), *p[3]]))
    compound = st.one_of(
        items.map(lambda xs: A.TupleLit(xs)),
        items.map(lambda xs: A.ListLit(xs)),
        comprehension,
        entries.map(lambda es: A.RecordLit(es)),
        st.tuples(sub, keys).map(lambda p: A.Field(*p)),
        st.tuples(sub, sub).map(lambda p: A.Index(*p)),
        st.tuples(st.sampled_from(BUILTINS), items).map(lambda p: A.BuiltinCall(*p)),
        st.tuples(receiver, st.sampled_from(["read", "echo", "if"]), items).map(
            lambda p: A.ReceiverCall(*p)),
        sub.map(lambda e: A.Await(e)),
        sub.map(lambda e: A.Unwrap(e)),
        st.tuples(st.sampled_from(["-", "not"]), sub).map(lambda p: A.Unary(*p)),
        st.tuples(st.sampled_from(BINARY_OPS), sub, sub).map(lambda p: A.Binary(*p)),
        st.tuples(sub, sub, sub).map(lambda p: A.Ternary(*p)),
        st.tuples(st.sampled_from(["p", "child"]), st.lists(st.tuples(keys, sub), max_size=2)).map(
            lambda p: A.Start(*p)),
        st.tuples(st.sampled_from(["for", "until"]), sub).map(lambda p: A.Sleep(*p)),
        text.map(lambda s: A.WaitSignal(s)),
        st.tuples(sub, text, sub).map(lambda p: A.SignalRun(*p)),
        type_objects(2).map(lambda t: A.TypeLiteral(t)),
    )
    result = st.one_of(_leaf(), compound)
    _EXPR_CACHE[depth] = result
    return result


# --------------------------------------------------------------------------- statements

labels = st.one_of(st.none(), st.tuples(text, st.one_of(st.none(), text)).map(
    lambda p: A.Label(p[0], p[1])))


def _safe_expr_stmt(expr: A.Expr) -> A.Stmt:
    """An expression statement starting with `(`, `[` or `-` would glue onto the one
    before it (newlines mean nothing): such an expression is assigned instead."""
    if print_expr(expr)[:1] in "([-":
        return A.Assign("_v", [], expr)
    return A.ExprStmt(expr)


@st.composite
def stmts(draw: st.DrawFn, depth: int = 2, in_loop: bool = False,
          in_process: bool = False) -> list[A.Stmt]:
    """A statement list obeying the parse-time placement rules."""
    e = exprs(2)
    kinds = ["assign", "expr", "value"]
    if depth > 0:
        kinds += ["if", "for", "while"]
    if in_loop:
        kinds += ["break", "continue"]
    value_kinds = ["finish", "cancel"] + (["yield", "wake", "fail"] if in_process else ["print"])
    body: list[A.Stmt] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(kinds))
        if kind == "assign":
            steps = draw(st.lists(st.one_of(keys.map(lambda k: A.FieldStep(k)),
                                            exprs(1).map(lambda i: A.IndexStep(i))), max_size=2))
            node: A.Stmt = A.Assign(draw(st.sampled_from(NAMES)), steps, draw(e))
        elif kind == "expr":
            node = _safe_expr_stmt(draw(e))
        elif kind == "value":
            node = A.ValueStmt(draw(st.sampled_from(value_kinds)), draw(e))
        elif kind == "break":
            node = A.Break()
        elif kind == "continue":
            node = A.Continue()
        elif kind == "if":
            node = draw(_ifs(depth, in_loop, in_process))
        elif kind == "for":
            inner = A.Block(draw(stmts(depth - 1, True, in_process)))
            node = A.For(draw(st.sampled_from(NAMES)), draw(e), inner)
        else:
            node = A.While(draw(e), A.Block(draw(stmts(depth - 1, True, in_process))))
        node.label = draw(labels)
        body.append(node)
    return body


@st.composite
def _ifs(draw: st.DrawFn, depth: int, in_loop: bool, in_process: bool) -> A.If:
    then = A.Block(draw(stmts(depth - 1, in_loop, in_process)))
    choice = draw(st.sampled_from(["none", "block", "elif"]))
    otherwise: A.Block | A.If | None = None
    if choice == "block":
        otherwise = A.Block(draw(stmts(depth - 1, in_loop, in_process)))
    elif choice == "elif":
        otherwise = draw(_ifs(depth - 1 if depth > 1 else 1, in_loop, in_process))
        otherwise.label = None
    return A.If(draw(exprs(2)), then, otherwise)


params = st.lists(st.tuples(st.sampled_from(NAMES), types(1)), max_size=3,
                  unique_by=lambda p: p[0]).map(lambda ps: [A.Param(n, t) for n, t in ps])


@st.composite
def processes(draw: st.DrawFn, name: str) -> A.ProcessDecl:
    return A.ProcessDecl(name, draw(params), draw(params), draw(st.one_of(st.none(), types(1))),
                         A.Block(draw(stmts(2, False, True))), label=draw(labels))


@st.composite
def syntax_modules(draw: st.DrawFn) -> A.Module:
    """A module with type declarations, processes and a main block."""
    type_names = draw(st.lists(st.sampled_from(["User", "Order", "T1", "Pair"]), max_size=2,
                               unique=True))
    decls = [A.TypeDecl(n, draw(types(2))) for n in type_names]
    names = draw(st.lists(st.sampled_from(["p", "child", "worker"]), max_size=2, unique=True))
    procs = [draw(processes(n)) for n in names]
    return A.Module("", decls, procs, draw(stmts(2)))


# --------------------------------------------------------------------------- runnable

VARS = ["v0", "v1", "v2", "v3"]
RUN_BUILTINS = {"len": 1, "empty": 1, "keys": 1, "values": 1, "to_string": 1, "to_int": 1,
                "to_float": 1, "trim": 1, "contains": 2, "push": 2, "range": 1, "slice": 3,
                "join": 2, "split": 2, "format": 2, "find": 2, "floor_div": 2, "json_parse": 1}
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 50), st.text(max_size=5),
                      st.sampled_from([0.5, -2.25, 1e22]))
json_values = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "n"]), inner,
                                                 max_size=3)), max_leaves=8)


def literal(value: Any) -> A.Expr:
    """A Lashlang literal for a JSON value (negative numbers through unary minus)."""
    if value is None:
        return A.Null()
    if isinstance(value, bool):
        return A.Bool(value)
    if isinstance(value, (int, float)):
        number = A.Number(float(abs(value)))
        return A.Unary("-", number) if value < 0 else number
    if isinstance(value, str):
        return A.String(value)
    if isinstance(value, list):
        return A.ListLit([literal(v) for v in value])
    return A.RecordLit([(k, literal(v)) for k, v in value.items()])


def _call(tool: str, value: A.Expr) -> A.ReceiverCall:
    return A.ReceiverCall(A.Name("tools"), tool, [A.RecordLit([("v", value)])])


def dyn_exprs(depth: int) -> st.SearchStrategy[A.Expr]:
    """Expressions over tool-fed (statically ``any``) variables."""
    leaf = st.one_of(st.sampled_from(VARS + ["i"]).map(A.Name),
                     st.integers(0, 5).map(lambda n: A.Number(float(n))),
                     st.sampled_from(["", "ab", "a,b"]).map(A.String))
    if depth <= 0:
        return leaf
    sub = dyn_exprs(depth - 1)
    builtin = st.sampled_from(sorted(RUN_BUILTINS)).flatmap(
        lambda name: st.lists(sub, min_size=RUN_BUILTINS[name], max_size=RUN_BUILTINS[name]).map(
            lambda args: A.BuiltinCall(name, args)))
    return st.one_of(
        leaf, builtin,
        st.tuples(st.sampled_from(BINARY_OPS), sub, sub).map(lambda p: A.Binary(*p)),
        st.tuples(st.sampled_from(["-", "not"]), sub).map(lambda p: A.Unary(*p)),
        st.tuples(sub, sub, sub).map(lambda p: A.Ternary(*p)),
        st.tuples(sub, sub).map(lambda p: A.Index(*p)),
        st.tuples(sub, st.sampled_from(["a", "b", "n"])).map(lambda p: A.Field(*p)),
        st.lists(sub, max_size=3).map(A.ListLit),
        st.lists(sub, min_size=2, max_size=3).map(A.TupleLit),
        st.lists(st.tuples(st.sampled_from(["a", "b", "n"]), sub), max_size=3).map(A.RecordLit),
        st.tuples(sub, sub, sub).map(lambda p: A.Comprehension(
            p[0], [A.CompFor("j", p[1]), A.CompIf(p[2])])),
    )


@st.composite
def run_stmts(draw: st.DrawFn, depth: int, in_loop: bool) -> list[A.Stmt]:
    e = dyn_exprs(2)
    var = st.sampled_from(VARS)
    kinds = ["assign", "tool", "tool", "batch", "print", "path", "sleep"]
    if depth > 0:
        kinds += ["if", "for", "while"]
    if in_loop:
        kinds += ["break", "continue"]
    body: list[A.Stmt] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(kinds))
        if kind == "assign":
            body.append(A.Assign(draw(var), [], draw(e)))
        elif kind == "tool":
            call: A.Expr = _call(draw(st.sampled_from(["echo", "echo", "boom", "flaky"])), draw(e))
            if draw(st.booleans()):
                call = A.Unwrap(call)
            body.append(A.Assign(draw(var), [], A.Await(call)))
        elif kind == "batch":
            calls = [_call(t, draw(e)) for t in draw(st.lists(
                st.sampled_from(["echo", "boom", "flaky"]), min_size=1, max_size=3))]
            body.append(A.Assign(draw(var), [], A.Await(A.ListLit(list(calls)))))
        elif kind == "print":
            body.append(A.ValueStmt("print", draw(e)))
        elif kind == "path":
            step = draw(st.one_of(st.sampled_from(["a", "n"]).map(A.FieldStep),
                                  dyn_exprs(1).map(A.IndexStep)))
            body.append(A.Assign(draw(var), [step], draw(e)))
        elif kind == "sleep":
            body.append(A.ExprStmt(A.Sleep("for", A.Number(0.0))))
        elif kind == "if":
            otherwise = A.Block(draw(run_stmts(depth - 1, in_loop))) if draw(st.booleans()) else None
            body.append(A.If(draw(e), A.Block(draw(run_stmts(depth - 1, in_loop))), otherwise))
        elif kind == "for":
            iterable = draw(st.one_of(
                st.integers(0, 6).map(lambda n: A.BuiltinCall("range", [A.Number(float(n))])),
                var.map(A.Name), e))
            body.append(A.For("i", iterable, A.Block(draw(run_stmts(depth - 1, True)))))
        elif kind == "while":
            if draw(st.integers(0, 9)) == 0:  # now and then an endless loop: a limit ends it
                cond: A.Expr = A.Bool(True)
                inner = draw(run_stmts(depth - 1, True))
            else:
                bound = draw(st.integers(0, 5))
                body.append(A.Assign("c", [], A.Number(0.0)))
                cond = A.Binary("<", A.Name("c"), A.Number(float(bound)))
                bump = A.Assign("c", [], A.Binary("+", A.Name("c"), A.Number(1.0)))
                inner = [bump, *draw(run_stmts(depth - 1, True))]
            body.append(A.While(cond, A.Block(inner)))
        elif kind == "break":
            body.append(A.Break())
        else:
            body.append(A.Continue())
    return body


@st.composite
def runnable_programs(draw: st.DrawFn) -> A.Module:
    """A main block: tool-fed variables, then generated statements, then ``finish``."""
    prelude: list[A.Stmt] = [A.Assign(v, [], A.Await(A.Unwrap(_call("echo", literal(draw(json_values))))))
                             for v in VARS]
    body = draw(run_stmts(2, False))
    end = [A.ValueStmt("finish", draw(dyn_exprs(2)))] if draw(st.booleans()) else []
    return A.Module("", [], [], prelude + body + end)
