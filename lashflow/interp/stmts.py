"""Compiles effect-free statements to closures ``fn(env) -> None | BREAK | CONTINUE``.

A statement subtree without effects (assignments, ifs, whole loops) runs as plain
Python calls: a pure ``while`` is a Python ``while`` over closures. Only statements
that contain effects go to the instruction list (``compiler.py``), where the VM can
stop. Each statement closure attaches its own span to runtime errors (a ``try`` costs
nothing in CPython 3.11 until something is raised).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from lashflow.lang import ast
from lashflow.interp import ops
from lashflow.interp.builtins import push as push_builtin
from lashflow.interp.builtins import range_bounds
from lashflow.interp.errors import LashRuntimeError
from lashflow.interp.exprs import ExprCompiler, is_pure, span_of
from lashflow.interp.limits import ACTIVE, charge, counted, grew, iterable_items, steps_exhausted
from lashflow.interp.values import UNSET

BREAK = 1
CONTINUE = 2

StmtClosure = Callable[[list[Any]], Any]

_refcount = getattr(sys, "getrefcount", None) or (lambda _obj: 1 << 30)


_UNROLL = 8
_SEQUENCES: dict[int, Callable[..., StmtClosure]] = {}


def _sequence(n: int) -> Callable[..., StmtClosure]:
    """A maker of a straight-line block of ``n`` statements (2 to ``_UNROLL``) without a
    loop over closures, compiled on first use: an import compiles none (ADR 0044)."""
    made = _SEQUENCES.get(n)
    if made is None:
        names = [f"f{i}" for i in range(n)]
        src = (f"def make({', '.join(names)}):\n    def run(env):\n"
               + "".join(f"        {name}(env)\n" for name in names) + "    return run\n")
        ns: dict[str, Any] = {}
        exec(src, ns)  # noqa: S102
        made = _SEQUENCES[n] = ns["make"]
    return made


def stmt_is_pure(stmt: Any) -> bool:
    t = type(stmt)
    if t is ast.Assign:
        return is_pure(stmt.value) and all(
            type(s) is ast.FieldStep or is_pure(s.index) for s in stmt.steps)
    if t is ast.ExprStmt:
        return is_pure(stmt.expr)
    if t is ast.If:
        return (is_pure(stmt.cond) and all(stmt_is_pure(s) for s in stmt.then.body)
                and (stmt.otherwise is None or stmt_is_pure(stmt.otherwise)))
    if t is ast.Block:
        return all(stmt_is_pure(s) for s in stmt.body)
    if t is ast.While:
        return is_pure(stmt.cond) and all(stmt_is_pure(s) for s in stmt.body.body)
    if t is ast.For:
        return is_pure(stmt.iterable) and all(stmt_is_pure(s) for s in stmt.body.body)
    if t is ast.Break or t is ast.Continue:
        return True
    return False  # ValueStmt: finish/fail/yield/wake/print/cancel are effects


def growth_of(s: ast.Assign, fallbacks: Any) -> tuple[Any, bool] | None:
    """``(operand, pushing)`` when ``s`` is ``xs = xs + operand`` or ``xs = push(xs, operand)``
    on a plain variable (not a module or process name), else None. Such an assignment
    evaluates the operand before it reads ``xs``, as the original Lashlang does: an
    unassigned ``xs`` is reported only after the operand's own errors and effects."""
    v = s.value
    if s.steps or s.name in fallbacks:
        return None
    if (type(v) is ast.BuiltinCall and v.name == "push" and len(v.args) == 2
            and type(v.args[0]) is ast.Name and v.args[0].name == s.name):
        return v.args[1], True
    if type(v) is ast.Binary and v.op == "+" and type(v.left) is ast.Name and v.left.name == s.name:
        return v.right, False
    return None


def may_jump(stmt: Any) -> bool:
    """Can this statement end with break/continue of an enclosing loop?"""
    t = type(stmt)
    if t is ast.Break or t is ast.Continue:
        return True
    if t is ast.If:
        return any(may_jump(s) for s in stmt.then.body) or (
            stmt.otherwise is not None and may_jump(stmt.otherwise))
    if t is ast.Block:
        return any(may_jump(s) for s in stmt.body)
    return False


def _located(span: tuple[int, int] | None, error: LashRuntimeError) -> LashRuntimeError:
    if error.span is None:
        error.span = span
    return error


class StmtCompiler:
    def __init__(self, exprs: ExprCompiler) -> None:
        self.exprs = exprs
        self.scope = exprs.scope

    def block(self, stmts: list[Any]) -> StmtClosure:
        fns = [self.stmt(s) for s in stmts]
        jumps = any(may_jump(s) for s in stmts)
        if not fns:
            return lambda env: None
        if len(fns) == 1:
            return fns[0]
        if not jumps:
            if len(fns) <= _UNROLL:
                return _sequence(len(fns))(*fns)

            def run(env: list[Any]) -> None:
                for f in fns:
                    f(env)
            return run

        def run_jumps(env: list[Any]) -> Any:
            for f in fns:
                r = f(env)
                if r is not None:
                    return r
            return None
        return run_jumps

    def stmt(self, s: Any) -> StmtClosure:
        return getattr(self, "s_" + type(s).__name__)(s)

    def s_Block(self, s: ast.Block) -> StmtClosure:
        return self.block(s.body)

    def s_Break(self, s: ast.Break) -> StmtClosure:
        return lambda env: BREAK

    def s_Continue(self, s: ast.Continue) -> StmtClosure:
        return lambda env: CONTINUE

    def s_ExprStmt(self, s: ast.ExprStmt) -> StmtClosure:
        f = self.exprs.expr(s.expr)
        span = span_of(s)

        def run(env: list[Any]) -> None:
            try:
                f(env)
            except LashRuntimeError as e:
                raise _located(span, e)
        return run

    # -- assignment -------------------------------------------------------------------
    def s_Assign(self, s: ast.Assign) -> StmtClosure:
        span = span_of(s)
        slot = self.scope.slot(s.name)
        name = s.name
        if not s.steps:
            appended = self._grow_in_place(s, slot, span)
            if appended is not None:
                return appended
            val = self.exprs.expr(s.value)

            def assign(env: list[Any]) -> None:
                try:
                    env[slot] = val(env)
                except LashRuntimeError as e:
                    raise _located(span, e)
            return assign
        val = self.exprs.expr(s.value)
        assign_path = ops.assign_path
        if len(s.steps) == 1 and type(s.steps[0]) is ast.FieldStep:
            key = s.steps[0].name
            steps = [(True, key)]

            def assign_field(env: list[Any]) -> None:
                try:
                    v = val(env)
                    root = env[slot]
                    if type(root) is dict and key in root and _refcount(root) == 3:
                        root[key] = v
                    else:
                        root = None
                        assign_path(env, slot, name, steps, v)
                except LashRuntimeError as e:
                    raise _located(span, e)
            return assign_field
        only = s.steps[0]
        if len(s.steps) == 1 and isinstance(only, ast.IndexStep):
            idx = self.exprs.expr(only.index)

            def assign_index(env: list[Any]) -> None:
                try:
                    k = idx(env)
                    v = val(env)
                    root = env[slot]
                    if (type(root) is list and type(k) is float and 0.0 <= k < len(root)
                            and k == int(k) and _refcount(root) == 3):
                        root[int(k)] = v
                    else:
                        root = None
                        assign_path(env, slot, name, [(False, k)], v)
                except LashRuntimeError as e:
                    raise _located(span, e)
            return assign_index
        plan: list[tuple[bool, Any]] = [
            (True, st.name) if isinstance(st, ast.FieldStep) else (False, self.exprs.expr(st.index))
            for st in s.steps]

        def assign_deep(env: list[Any]) -> None:
            try:
                keys = [(f, k if f else k(env)) for f, k in plan]
                v = val(env)
                assign_path(env, slot, name, keys, v)
            except LashRuntimeError as e:
                raise _located(span, e)
        return assign_deep

    def _grow_in_place(self, s: ast.Assign, slot: int, span: Any) -> StmtClosure | None:
        """``xs = push(xs, item)`` appends to ``xs`` and ``xs = xs + ys`` extends it, in
        place when nobody else holds ``xs``: building a list item by item costs what the
        items cost, not a copy of the list each time."""
        growth = growth_of(s, self.scope.fallbacks)
        if growth is None:
            return None
        operand, pushing = growth
        more = self.exprs.expr(operand)
        fallback = push_builtin if pushing else ops.add
        name = s.name

        def grow(env: list[Any]) -> None:
            try:
                x = more(env)
                xs = env[slot]
                if xs is UNSET:
                    raise ops.undefined(name)
                if type(xs) is not list or _refcount(xs) != 3:
                    env[slot] = fallback(xs, x)
                elif pushing:
                    xs.append(x)
                    grew(xs, 1)
                elif type(x) is list and x is not xs:
                    xs.extend(x)
                    charge(len(x))
                    grew(xs, len(x))
                else:
                    env[slot] = fallback(xs, x)
            except LashRuntimeError as e:
                raise _located(span, e)
        return grow

    # -- control flow -----------------------------------------------------------------
    def _checked_cond(self, node: Any, span: Any) -> Callable[[list[Any]], bool]:
        cond = self.exprs.cond(node)

        def checked(env: list[Any]) -> bool:
            try:
                return cond(env)
            except LashRuntimeError as e:
                raise _located(span, e)
        return checked

    def s_If(self, s: ast.If) -> StmtClosure:
        cond = self._checked_cond(s.cond, span_of(s))
        then = self.block(s.then.body)
        if s.otherwise is None:
            def if_only(env: list[Any]) -> Any:
                if cond(env):
                    return then(env)
                return None
            return if_only
        other = self.stmt(s.otherwise)

        def if_else(env: list[Any]) -> Any:
            if cond(env):
                return then(env)
            return other(env)
        return if_else

    def s_While(self, s: ast.While) -> StmtClosure:
        cond = self.exprs.cond(s.cond)
        span = span_of(s)
        body = self.block(s.body.body)
        jumps = any(may_jump(x) for x in s.body.body)

        def loop(env: list[Any]) -> None:
            m = ACTIVE
            try:  # body statements locate their own errors first
                while cond(env):
                    n = m.steps - 1
                    m.steps = n
                    if n < 0:
                        raise steps_exhausted()
                    if body(env) == BREAK and jumps:
                        break
            except LashRuntimeError as e:
                raise _located(span, e)
        return loop

    def s_For(self, s: ast.For) -> StmtClosure:
        slot = self.scope.slot(s.var)
        span = span_of(s)
        body = self.block(s.body.body)
        jumps = any(may_jump(x) for x in s.body.body)
        bounds = self.exprs.range_args(s.iterable)
        if bounds is not None:
            def loop_range(env: list[Any]) -> None:
                try:
                    r = range_bounds([b(env) for b in bounds])
                except LashRuntimeError as e:
                    raise _located(span, e)
                saved = env[slot]
                for i in counted(r):
                    env[slot] = float(i)
                    if body(env) == BREAK and jumps:
                        break
                env[slot] = saved
            return loop_range
        iterable = self.exprs.expr(s.iterable)

        def loop_items(env: list[Any]) -> None:
            try:
                items = iterable_items(iterable(env))
            except LashRuntimeError as e:
                raise _located(span, e)
            saved = env[slot]
            for x in counted(items):
                env[slot] = x
                if body(env) == BREAK and jumps:
                    break
            env[slot] = saved
        return loop_items
