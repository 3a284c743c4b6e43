"""Compiles effect-free expressions to Python closures ``fn(env) -> value``.

A whole pure expression is evaluated by one call; the common float/float cases of the
operators are inlined (generated once at import from a template) and everything else
falls back to ``ops``. Variables live in list slots resolved at compile time.
"""

from __future__ import annotations

import math
from typing import Any, Callable, cast

from lashflow.lang import ast
from lashflow.interp import ops
from lashflow.interp.builtins import BUILTINS, arity_error, range_bounds
from lashflow.interp.errors import LashRuntimeError, type_error
from lashflow.interp.limits import ACTIVE, check_seq, counted, iterable_items
from lashflow.interp.schema import TYPE_KEY, schema_of
from lashflow.interp.values import UNSET, truthy

Closure = Callable[[list[Any]], Any]


def children(node: Any) -> list[Any]:
    """Direct sub-expressions of an expression node (compile time only)."""
    t = type(node)
    if t is ast.TupleLit or t is ast.ListLit:
        return list(node.items)
    if t is ast.RecordLit:
        return [v for _, v in node.entries]
    if t is ast.Comprehension:
        out = [node.element]
        for c in node.clauses:
            out.append(c.iterable if type(c) is ast.CompFor else c.cond)
        return out
    if t is ast.Field:
        return [node.obj]
    if t is ast.Index:
        return [node.obj, node.index]
    if t is ast.BuiltinCall:
        return list(node.args)
    if t is ast.ReceiverCall:
        return [node.receiver, *node.args]
    if t is ast.Await or t is ast.Unwrap:
        return [node.expr]
    if t is ast.Unary:
        return [node.operand]
    if t is ast.Binary:
        return [node.left, node.right]
    if t is ast.Ternary:
        return [node.cond, node.then, node.otherwise]
    if t is ast.Start:
        return [v for _, v in node.args]
    if t is ast.Sleep:
        return [node.value]
    if t is ast.SignalRun:
        return [node.run, node.payload]
    return []


def is_pure(node: Any) -> bool:
    """No effect anywhere inside: evaluable by one closure call."""
    if isinstance(node, ast.EFFECTS):
        return False
    return all(is_pure(c) for c in children(node))


def span_of(node: Any) -> tuple[int, int] | None:
    span = getattr(node, "span", None)
    return None if span is None else (span.start, span.end)


# --------------------------------------------------------------------------- templates

_BIN_TEMPLATE = """
def make_ee(l, r, slow):
    def f(env):
        a = l(env)
        b = r(env)
        if type(a) is float and type(b) is float{guard}:
            return a {op} b
        return slow(a, b)
    return f

def make_ec(l, c, slow):
    def f(env):
        a = l(env)
        if type(a) is float:
            return a {op} c
        return slow(a, c)
    return f

def make_sc(s, c, slow, name):
    def f(env):
        a = env[s]
        if type(a) is float:
            return a {op} c
        if a is UNSET:
            raise undefined(name)
        return slow(a, c)
    return f

def make_ss(s1, s2, slow, n1, n2):
    def f(env):
        a = env[s1]
        b = env[s2]
        if type(a) is float and type(b) is float{guard}:
            return a {op} b
        if a is UNSET:
            raise undefined(n1)
        if b is UNSET:
            raise undefined(n2)
        return slow(a, b)
    return f
"""

_MOD_TEMPLATE = """
def make_ec(l, c, slow):
    def f(env):
        a = l(env)
        if type(a) is float and a - a == 0.0:
            return fmod(a, c)
        return slow(a, c)
    return f

def make_sc(s, c, slow, name):
    def f(env):
        a = env[s]
        if type(a) is float and a - a == 0.0:
            return fmod(a, c)
        if a is UNSET:
            raise undefined(name)
        return slow(a, c)
    return f
"""

_FAST_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "<": "<", "<=": "<=", ">": ">",
             ">=": ">=", "==": "==", "!=": "!="}
_MAKERS: dict[str, dict[str, Callable[..., Closure]]] = {}


def _makers(op: str) -> dict[str, Callable[..., Closure]] | None:
    """The closure makers with ``op`` written inline, or None for an operator without
    them. Each operator's are compiled from the template on first use: an import
    compiles none (a resume's program uses a few of the eleven; ADR 0044)."""
    made = _MAKERS.get(op)
    if made is None:
        ns: dict[str, Any] = {"UNSET": UNSET, "undefined": ops.undefined}
        if op == "%":  # fmod: only a finite dividend over a non-zero constant divisor
            ns["fmod"] = math.fmod
            exec(_MOD_TEMPLATE, ns)  # noqa: S102
            names: tuple[str, ...] = ("make_ec", "make_sc")
        elif op in _FAST_OPS:
            py = _FAST_OPS[op]
            exec(_BIN_TEMPLATE.format(op=py, guard=" and b" if py == "/" else ""), ns)  # noqa: S102
            names = ("make_ee", "make_ec", "make_sc", "make_ss")
        else:
            return None
        made = _MAKERS[op] = {k: ns[k] for k in names}
    return made


# --------------------------------------------------------------------------- scope


class Scope:
    """Variable slots of one entry (main block or process body)."""

    def __init__(self, fallbacks: dict[str, Any]) -> None:
        self.slots: dict[str, int] = {}
        self.names: list[str] = []
        self.fallbacks = fallbacks  # unset name -> value (module resources, process refs)

    def slot(self, name: str) -> int:
        s = self.slots.get(name)
        if s is None:
            s = self.slots[name] = len(self.names)
            self.names.append(name)
        return s


# --------------------------------------------------------------------------- compiler


class ExprCompiler:
    """Turns pure expression nodes into closures over ``env`` (a list of slots)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def expr(self, node: Any) -> Closure:
        method = getattr(self, "c_" + type(node).__name__, None)
        if method is None:
            raise TypeError(f"cannot compile {type(node).__name__} as a pure expression")
        return method(node)

    def cond(self, node: Any) -> Closure:
        """A closure returning a Python bool (truthiness), without a wrapper for
        comparisons and logic that already produce bools."""
        f = self.expr(node)
        if type(node) is ast.Binary and node.op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
            return f
        if type(node) is ast.Unary and node.op in ("not", "!"):
            return f
        if type(node) is ast.Bool:
            return f
        return lambda env: truthy(f(env))

    # -- leaves -------------------------------------------------------------------------
    def c_Null(self, node: ast.Null) -> Closure:
        return lambda env: None

    def c_Bool(self, node: ast.Bool) -> Closure:
        v = bool(node.value)
        return (lambda env: True) if v else (lambda env: False)

    def c_Number(self, node: ast.Number) -> Closure:
        v = float(node.value)
        return lambda env: v

    def c_String(self, node: ast.String) -> Closure:
        v = node.value
        return lambda env: v

    def c_Name(self, node: ast.Name) -> Closure:
        name = node.name
        s = self.scope.slot(name)
        fallback = UNSET if node.local else self.scope.fallbacks.get(name, UNSET)
        span = span_of(node)
        if fallback is not UNSET:
            def f(env: list[Any]) -> Any:
                v = env[s]
                return fallback if v is UNSET else v
            return f

        def g(env: list[Any]) -> Any:
            v = env[s]
            if v is UNSET:
                raise LashRuntimeError("UndefinedVariable", f"unknown name `{name}`", span)
            return v
        return g

    def _slot_of(self, node: Any) -> int | None:
        """The slot of a plain variable read with no fallback value (fast paths)."""
        if type(node) is ast.Name and node.name not in self.scope.fallbacks:
            return self.scope.slot(node.name)
        return None

    # -- containers ---------------------------------------------------------------------
    def c_TupleLit(self, node: ast.TupleLit) -> Closure:
        fns = [self.expr(i) for i in node.items]
        return lambda env: tuple([f(env) for f in fns])

    def c_ListLit(self, node: ast.ListLit) -> Closure:
        fns = [self.expr(i) for i in node.items]
        if not fns:
            return lambda env: []
        return lambda env: [f(env) for f in fns]

    def c_RecordLit(self, node: ast.RecordLit) -> Closure:
        pairs = [(k, self.expr(v)) for k, v in node.entries]
        if not pairs:
            return lambda env: {}

        def f(env: list[Any]) -> dict[str, Any]:
            out = {}
            for k, fn in pairs:
                out[k] = fn(env)
            return out
        return f

    def c_TypeLiteral(self, node: ast.TypeLiteral) -> Closure:
        texpr = node.type
        scope = self.scope

        def f(env: list[Any]) -> dict[str, Any]:
            def resolve(name: str) -> Any:
                s = scope.slots.get(name)
                v = UNSET if s is None else env[s]
                if v is UNSET:
                    raise ops.undefined(name)
                return v
            return {TYPE_KEY: schema_of(texpr, resolve)}
        return f

    def c_Comprehension(self, node: ast.Comprehension) -> Closure:
        return self.comprehension(node.clauses, self.expr(node.element))

    def comprehension(self, clauses: list[Any], element: Closure) -> Closure:
        """The list of ``element(env)`` for every binding the ``for``/``if`` clauses make
        (a fan-out passes an element that computes a call's target instead of a value)."""
        def innermost(env: list[Any], out: list[Any]) -> None:
            out.append(element(env))

        body: Callable[[list[Any], list[Any]], None] = innermost
        for clause in reversed(clauses):
            body = self._clause(clause, body)
        run = body

        def f(env: list[Any]) -> list[Any]:
            out: list[Any] = []
            building = ACTIVE.building
            building.append(out)
            try:
                run(env, out)
            finally:
                building.pop()
            return check_seq(out)
        return f

    def _clause(self, clause: Any, inner: Callable[[list[Any], list[Any]], None]) -> Callable[[list[Any], list[Any]], None]:
        if type(clause) is ast.CompIf:
            cond = self.cond(clause.cond)

            def when(env: list[Any], out: list[Any]) -> None:
                if cond(env):
                    inner(env, out)
            return when
        s = self.scope.slot(clause.var)
        bounds = self.range_args(clause.iterable)
        if bounds is not None:
            def over_range(env: list[Any], out: list[Any]) -> None:
                r = range_bounds([b(env) for b in bounds])
                saved = env[s]
                for i in counted(r):
                    env[s] = float(i)
                    inner(env, out)
                env[s] = saved
            return over_range
        iterable = self.expr(clause.iterable)

        def over_items(env: list[Any], out: list[Any]) -> None:
            items = iterable_items(iterable(env))
            saved = env[s]
            for x in counted(items):
                env[s] = x
                inner(env, out)
            env[s] = saved
        return over_items

    def range_args(self, node: Any) -> list[Closure] | None:
        """Closures of ``range(...)``'s bounds when ``node`` is a well-formed range call
        (a loop over it needs no list)."""
        if (type(node) is ast.BuiltinCall and node.name == "range" and 1 <= len(node.args) <= 3
                and all(is_pure(a) for a in node.args)):
            return [self.expr(a) for a in node.args]
        return None

    # -- access -------------------------------------------------------------------------
    def c_Field(self, node: ast.Field) -> Closure:
        name = node.name
        s = self._slot_of(node.obj)
        if s is not None:
            var = cast(ast.Name, node.obj).name

            def fs(env: list[Any]) -> Any:
                v = env[s]
                if type(v) is dict:
                    return v.get(name)
                if v is UNSET:
                    raise ops.undefined(var)
                return ops.get_field(v, name)
            return fs
        obj = self.expr(node.obj)

        def f(env: list[Any]) -> Any:
            v = obj(env)
            if type(v) is dict:
                return v.get(name)
            return ops.get_field(v, name)
        return f

    def c_Index(self, node: ast.Index) -> Closure:
        obj, idx = self.expr(node.obj), self.expr(node.index)
        get = ops.get_index

        def f(env: list[Any]) -> Any:
            v = obj(env)
            i = idx(env)
            if type(v) is list and type(i) is float and 0.0 <= i < len(v):
                k = int(i)
                if k == i:
                    return v[k]
            return get(v, i)
        return f

    def c_BuiltinCall(self, node: ast.BuiltinCall) -> Closure:
        fns = [self.expr(a) for a in node.args]
        return builtin_caller(node.name, fns)

    def c_Unwrap(self, node: ast.Unwrap) -> Closure:
        inner = self.expr(node.expr)
        unwrap = ops.unwrap
        return lambda env: unwrap(inner(env))

    # -- operators ----------------------------------------------------------------------
    def c_Unary(self, node: ast.Unary) -> Closure:
        if node.op == "-":
            operand = self.expr(node.operand)
            neg = ops.neg

            def f(env: list[Any]) -> Any:
                v = operand(env)
                return -v if type(v) is float else neg(v)
            return f
        cond = self.cond(node.operand)  # compiles the operand once (a chain stays linear)
        return lambda env: not cond(env)

    def c_Binary(self, node: ast.Binary) -> Closure:
        op = node.op
        if op in ("&&", "and"):
            l, r = self.cond(node.left), self.cond(node.right)
            return lambda env: l(env) and r(env)
        if op in ("||", "or"):
            l, r = self.cond(node.left), self.cond(node.right)
            return lambda env: l(env) or r(env)
        slow = ops.BINARY[op]
        makers = _makers(op) if op in _FAST_OPS else None
        if makers is None:  # "%": inline only `x % <non-zero constant>`
            if op == "%" and type(node.right) is ast.Number and node.right.value != 0:
                c = float(node.right.value)
                s = self._slot_of(node.left)
                mod = _makers("%")
                assert mod is not None
                if s is not None:
                    return mod["make_sc"](s, c, slow, cast(ast.Name, node.left).name)
                return mod["make_ec"](self.expr(node.left), c, slow)
            l, r = self.expr(node.left), self.expr(node.right)
            return lambda env: slow(l(env), r(env))
        if op in ("==", "!="):
            slow = ops.eq if op == "==" else ops.ne
        const = node.right.value if type(node.right) is ast.Number else None
        if const is not None and not (op == "/" and const == 0):
            const = float(const)
            s = self._slot_of(node.left)
            if s is not None:
                return makers["make_sc"](s, const, slow, cast(ast.Name, node.left).name)
            return makers["make_ec"](self.expr(node.left), const, slow)
        s1, s2 = self._slot_of(node.left), self._slot_of(node.right)
        if s1 is not None and s2 is not None:
            return makers["make_ss"](s1, s2, slow, cast(ast.Name, node.left).name, cast(ast.Name, node.right).name)
        return makers["make_ee"](self.expr(node.left), self.expr(node.right), slow)

    def c_Ternary(self, node: ast.Ternary) -> Closure:
        c, t, o = self.cond(node.cond), self.expr(node.then), self.expr(node.otherwise)
        return lambda env: t(env) if c(env) else o(env)


def builtin_caller(name: str, fns: list[Closure]) -> Closure:
    """A closure evaluating the args left to right, then calling builtin ``name``."""
    entry = BUILTINS.get(name)
    if entry is None:
        def unknown(env: list[Any]) -> Any:
            for f in fns:
                f(env)
            raise LashRuntimeError("UnknownBuiltin", f"unknown builtin `{name}`")
        return unknown
    fn = entry[0]
    problem = arity_error(name, len(fns))
    if problem is not None:
        def wrong(env: list[Any]) -> Any:
            for f in fns:
                f(env)
            raise type_error(problem)
        return wrong
    if len(fns) == 1:
        a0 = fns[0]
        return lambda env: fn(a0(env))
    if len(fns) == 2:
        a0, a1 = fns
        return lambda env: fn(a0(env), a1(env))
    return lambda env: fn(*[f(env) for f in fns])


def call_builtin(name: str, args: list[Any]) -> Any:
    """The stack-form counterpart of ``builtin_caller`` (values already evaluated)."""
    entry = BUILTINS.get(name)
    if entry is None:
        raise LashRuntimeError("UnknownBuiltin", f"unknown builtin `{name}`")
    problem = arity_error(name, len(args))
    if problem is not None:
        raise type_error(problem)
    return entry[0](*args)


__all__ = ["ExprCompiler", "Scope", "is_pure", "children", "builtin_caller", "call_builtin",
           "span_of"]
