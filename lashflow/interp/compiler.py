"""Compiles a linked module to a ``Program``: one flat instruction list per entry.

Statements with effects become instructions over an operand stack (jumps for
if/while/for/break/continue, loop cursors on the stack) so the VM can stop at any
effect with all of its state in plain data. Effect-free statement runs and
sub-expressions are closures (``stmts.py``, ``exprs.py``). Instructions are first
emitted symbolically (``(op, *args)`` with labels), then materialised by
``instructions.materialise`` once the jump targets are known.
"""

from __future__ import annotations

import gc
from typing import Any, Callable

from lashflow.lang import ast
from lashflow.interp import ops
from lashflow.interp.exprs import ExprCompiler, Scope, children, is_pure, span_of
from lashflow.interp.instructions import BatchCall, BatchPlan, Label, materialise
from lashflow.interp.stmts import StmtCompiler, growth_of, stmt_is_pure
from lashflow.interp.values import Resource
from lashflow.lang.names import resource_type_name
from lashflow.lang.record import field, record


@record
class Entry:
    """One runnable body: the main block (``name`` None) or a process."""

    name: str | None
    code: list[Callable[..., int]]
    spans: list[tuple[int, int] | None]
    slot_names: list[str]
    slots: dict[str, int]
    params: list[str]
    listing: list[tuple[Any, ...]] = field(default_factory=list)  # symbolic form, for debugging


@record
class Program:
    """A compiled module: compiled once, run by any number of interpreters."""

    module: ast.Module
    source: str
    entries: dict[str | None, Entry]

    def entry(self, process: str | None) -> Entry:
        found = self.entries.get(process)
        if found is None:
            from lashflow.errors import UsageError

            raise UsageError(f"unknown process `{process}`")
        return found


def _module_roots(module: ast.Module, extra: set[str]) -> set[str]:
    """Host module names a bare name may denote: ``tools``, the catalog's, and every
    single-segment module the file calls."""
    roots = {"tools", *extra}

    def expr(node: Any) -> None:
        if type(node) is ast.ReceiverCall and node.module and "." not in node.module:
            roots.add(node.module)
        for child in children(node):
            expr(child)

    def stmts(body: list[Any]) -> None:
        for s in body:
            t = type(s)
            if t is ast.Assign:
                for step in s.steps:
                    if type(step) is ast.IndexStep:
                        expr(step.index)
                expr(s.value)
            elif t is ast.If:
                expr(s.cond)
                stmts(s.then.body)
                if s.otherwise is not None:
                    stmts([s.otherwise] if type(s.otherwise) is ast.If else s.otherwise.body)
            elif t is ast.While or t is ast.For:
                expr(s.cond if t is ast.While else s.iterable)
                stmts(s.body.body)
            elif t is ast.ValueStmt:
                expr(s.value)
            elif t is ast.ExprStmt:
                expr(s.expr)

    stmts(module.main)
    for decl in module.processes:
        stmts(decl.body.body)
    return roots


def compile_module(module: ast.Module, catalog: Any = None) -> Program:
    """Compile the main block and every process of a linked module.

    ``catalog`` (optional, a ``lashflow.lang.catalog.Catalog``) names the host modules
    a bare module name (``start worker(t: tools)``) may refer to; without it, the
    modules called somewhere in the file (and ``tools``) are used.
    """
    paused = gc.isenabled()
    gc.disable()  # compiling allocates many small objects; cyclic GC passes only cost time
    try:
        return _compile(module, catalog)
    finally:
        if paused:
            gc.enable()


def _compile(module: ast.Module, catalog: Any) -> Program:
    modules = set(getattr(catalog, "modules", {}) or {})
    roots = _module_roots(module, {m for m in modules if "." not in m})
    fallbacks: dict[str, Any] = {name: Resource(resource_type_name(name), name) for name in roots}
    for decl in module.processes:
        fallbacks.setdefault(decl.name, {"$lash_process": True, "process_name": decl.name})
    entries: dict[str | None, Entry] = {None: EntryCompiler(None, [], dict(fallbacks)).compile(module.main)}
    for decl in module.processes:
        names = [p.name for p in decl.params]
        local = {k: v for k, v in fallbacks.items() if k not in names}
        entries[decl.name] = EntryCompiler(decl.name, names, local).compile(decl.body.body)
    return Program(module, module.source, entries)


class EntryCompiler:
    """Emits the instruction list of one entry."""

    def __init__(self, name: str | None, params: list[str], fallbacks: dict[str, Any]) -> None:
        self.name = name
        self.params = params
        self.scope = Scope(fallbacks)
        for p in params:
            self.scope.slot(p)
        self.exprs = ExprCompiler(self.scope)
        self.stmts = StmtCompiler(self.exprs)
        self.ops: list[tuple[Any, ...]] = []
        self.spans: list[tuple[int, int] | None] = []
        self.span: tuple[int, int] | None = None

    # -- emission ---------------------------------------------------------------------
    def emit(self, *op: Any) -> None:
        self.ops.append(op)
        self.spans.append(self.span)

    def mark(self, label: Label) -> None:
        label.pc = len(self.ops)

    def compile(self, body: list[Any]) -> Entry:
        self.block(body, None)
        self.emit("end")
        code = materialise(self.ops, self.spans)
        return Entry(self.name, code, self.spans, list(self.scope.names), dict(self.scope.slots),
                     list(self.params), list(self.ops))

    # -- statements ---------------------------------------------------------------------
    def block(self, stmts: list[Any], loop: tuple[Label, Label] | None) -> None:
        run: list[Any] = []
        for s in stmts:
            if stmt_is_pure(s):
                run.append(s)
                continue
            self.flush(run, loop)
            run = []
            self.statement(s, loop)
        self.flush(run, loop)

    def flush(self, run: list[Any], loop: tuple[Label, Label] | None) -> None:
        if not run:
            return
        self.span = span_of(run[0])
        fn = self.stmts.block(run)
        brk, cont = loop if loop is not None else (None, None)
        self.emit("pure", fn, brk, cont)

    def statement(self, s: Any, loop: tuple[Label, Label] | None) -> None:
        self.span = span_of(s)
        t = type(s)
        if t is ast.Assign:
            growth = growth_of(s, self.scope.fallbacks)
            if growth is not None:
                operand, pushing = growth
                self.expr(operand)
                self.span = span_of(s)
                self.emit("grow", self.scope.slot(s.name), s.name, pushing)
                return
            for st in s.steps:
                if type(st) is ast.IndexStep:
                    self.expr(st.index)
            self.expr(s.value)
            self.span = span_of(s)
            if s.steps:
                steps = [(True, st.name) if type(st) is ast.FieldStep else (False, None)
                         for st in s.steps]
                self.emit("store_path", self.scope.slot(s.name), s.name, steps)
            else:
                self.emit("store", self.scope.slot(s.name))
        elif t is ast.ExprStmt:
            self.expr(s.expr)
            self.emit("pop")
        elif t is ast.ValueStmt:
            self.expr(s.value)
            self.span = span_of(s)
            if s.kind in ("finish", "fail"):
                self.emit(s.kind)
            elif s.kind == "cancel":
                self.emit("cancel", s.site)
            else:  # print / yield / wake
                self.emit("observe", s.site, s.kind)
        elif t is ast.If:
            other, end = Label(), Label()
            self.branch_if_false(s.cond, other)
            self.block(s.then.body, loop)
            if s.otherwise is None:
                self.mark(other)
            else:
                self.emit("jump", end)
                self.mark(other)
                if type(s.otherwise) is ast.If:
                    self.statement(s.otherwise, loop)
                else:
                    self.block(s.otherwise.body, loop)
            self.mark(end)
        elif t is ast.While:
            head, back, done = Label(), Label(), Label()
            self.mark(head)
            self.branch_if_false(s.cond, done)
            self.block(s.body.body, (done, back))
            self.mark(back)
            self.span = span_of(s)
            self.emit("loop", head)
            self.mark(done)
        elif t is ast.For:
            self.for_loop(s.var, s.iterable, lambda nxt: self.block(s.body.body, nxt), span_of(s))
        else:
            raise TypeError(f"cannot compile statement {t.__name__}")

    def for_loop(self, var: str, iterable: Any, body: Callable[[tuple[Label, Label]], None],
                 span: Any) -> None:
        """``for var in iterable``: a cursor on the stack from init to end."""
        slot = self.scope.slot(var)
        bounds = None
        if (type(iterable) is ast.BuiltinCall and iterable.name == "range"
                and 1 <= len(iterable.args) <= 3):
            bounds = iterable.args
        if bounds is not None:
            for b in bounds:
                self.expr(b)
            self.span = span
            self.emit("for_range", slot, len(bounds))
        else:
            self.expr(iterable)
            self.span = span
            self.emit("for_items", slot)
        nxt, done = Label(), Label()
        self.mark(nxt)
        self.emit("for_next", slot, done)
        body((done, nxt))
        self.emit("jump", nxt)
        self.mark(done)
        self.emit("for_end", slot)

    def branch_if_false(self, cond: Any, target: Label) -> None:
        if is_pure(cond):
            self.emit("jump_if_not", self.exprs.cond(cond), target)
        else:
            self.expr(cond)
            self.emit("pop_jump_if_not", target)

    # -- expressions (leave one value on the stack) -------------------------------------
    def expr(self, node: Any) -> None:
        if is_pure(node):
            self.emit("push", self.exprs.expr(node))
            return
        saved = self.span
        own = span_of(node)
        getattr(self, "e_" + type(node).__name__)(node, own if own is not None else saved)
        self.span = saved

    def e_ReceiverCall(self, node: ast.ReceiverCall, span: Any) -> None:
        if node.module is None:
            self.expr(node.receiver)
        for a in node.args:
            self.expr(a)
        self.span = span
        self.emit("call", node.site, node.module, node.operation, len(node.args))

    def e_Unwrap(self, node: ast.Unwrap, span: Any) -> None:
        inner = node.expr
        while type(inner) is ast.Await and type(inner.expr) is ast.ReceiverCall:
            inner = inner.expr
        if type(inner) is ast.ReceiverCall:
            self.expr(inner)
            self.span = span
            self.emit("unwrap", ops.MODULE_FAILURE)
            return
        self.expr(node.expr)
        self.span = span
        self.emit("unwrap", ops.RESULT_FAILURE)

    def e_Await(self, node: ast.Await, span: Any) -> None:
        inner = node.expr
        if type(inner) is ast.ReceiverCall:
            self.expr(inner)  # await on a direct call is only a marker
            return
        if type(inner) is ast.Unwrap:  # `await x?` means `(await x)?`
            self.expr(ast.Unwrap(ast.Await(inner.expr, node.span, node.site), inner.span))
            return
        plan = batch_plan(inner, self.exprs)
        if plan is not None:
            self.span = span
            self.emit("batch", node.site, plan)
            self.emit("batch_done", plan)
            return
        self.expr(inner)
        self.span = span
        self.emit("await_start")
        self.emit("await_next", node.site)
        self.emit("await_collect")

    def e_Binary(self, node: ast.Binary, span: Any) -> None:
        op = node.op
        if op in ("and", "&&", "or", "||"):
            done = Label()
            self.expr(node.left)
            self.emit("short_circuit", op in ("and", "&&"), done)
            self.expr(node.right)
            self.emit("to_bool")
            self.mark(done)
            return
        self.expr(node.left)
        self.expr(node.right)
        self.span = span
        self.emit("binop", ops.BINARY[op])

    def e_Unary(self, node: ast.Unary, span: Any) -> None:
        self.expr(node.operand)
        self.span = span
        self.emit("unop", ops.UNARY[node.op])

    def e_Ternary(self, node: ast.Ternary, span: Any) -> None:
        other, end = Label(), Label()
        self.branch_if_false(node.cond, other)
        self.expr(node.then)
        self.emit("jump", end)
        self.mark(other)
        self.expr(node.otherwise)
        self.mark(end)

    def e_TupleLit(self, node: ast.TupleLit, span: Any) -> None:
        for item in node.items:
            self.expr(item)
        self.emit("build_tuple", len(node.items))

    def e_ListLit(self, node: ast.ListLit, span: Any) -> None:
        for item in node.items:
            self.expr(item)
        self.emit("build_list", len(node.items))

    def e_RecordLit(self, node: ast.RecordLit, span: Any) -> None:
        for _, value in node.entries:
            self.expr(value)
        self.emit("build_record", [k for k, _ in node.entries])

    def e_Field(self, node: ast.Field, span: Any) -> None:
        self.expr(node.obj)
        self.span = span
        self.emit("field", node.name)

    def e_Index(self, node: ast.Index, span: Any) -> None:
        self.expr(node.obj)
        self.expr(node.index)
        self.span = span
        self.emit("index")

    def e_BuiltinCall(self, node: ast.BuiltinCall, span: Any) -> None:
        for a in node.args:
            self.expr(a)
        self.span = span
        self.emit("builtin", node.name, len(node.args))

    def e_Comprehension(self, node: ast.Comprehension, span: Any) -> None:
        self.emit("new_acc")
        end = Label()

        def clause(i: int, depth: int, cont: Label | None) -> None:
            if i == len(node.clauses):
                self.expr(node.element)
                self.emit("append_acc", depth)
                return
            c = node.clauses[i]
            if isinstance(c, ast.CompIf):
                self.branch_if_false(c.cond, cont if cont is not None else end)
                clause(i + 1, depth, cont)
                return
            self.for_loop(c.var, c.iterable, lambda labels: clause(i + 1, depth + 1, labels[1]), span)

        clause(0, 0, None)
        self.mark(end)
        self.span = span
        self.emit("check_acc")

    def e_Start(self, node: ast.Start, span: Any) -> None:
        for _, value in node.args:
            self.expr(value)
        self.span = span
        self.emit("start", node.site, node.process, [k for k, _ in node.args])

    def e_Sleep(self, node: ast.Sleep, span: Any) -> None:
        self.expr(node.value)
        self.span = span
        self.emit("sleep", node.site, node.mode)

    def e_WaitSignal(self, node: ast.WaitSignal, span: Any) -> None:
        self.span = span
        self.emit("wait_signal", node.site, node.name)

    def e_SignalRun(self, node: ast.SignalRun, span: Any) -> None:
        self.expr(node.run)
        self.expr(node.payload)
        self.span = span
        self.emit("signal_run", node.site, node.name)


# --------------------------------------------------------------------------- batches

_PURE_LEAVES = (
    ast.Null, ast.Bool, ast.Number, ast.String, ast.Name, ast.Field, ast.Index, ast.BuiltinCall,
    ast.Unary, ast.Binary, ast.Ternary, ast.Unwrap, ast.TypeLiteral, ast.TupleLit, ast.ListLit,
    ast.RecordLit,
)


def _direct_call(n: Any) -> tuple[ast.ReceiverCall, bool] | None:
    """``n`` as (direct receiver call, unwrapped with ``?``), or None."""
    if type(n) is ast.Unwrap and type(n.expr) is ast.ReceiverCall:
        return n.expr, True
    return (n, False) if type(n) is ast.ReceiverCall else None


def _batch_call(call: ast.ReceiverCall, unwrap: bool, exprs: ExprCompiler) -> BatchCall:
    parts = ([call.receiver] if call.module is None else []) + list(call.args)
    if not all(is_pure(p) for p in parts):
        raise _NotBatchable
    receiver = exprs.expr(call.receiver) if call.module is None else None
    return BatchCall(receiver, call.module, call.operation, [exprs.expr(a) for a in call.args],
                     unwrap, span_of(call))


def _fanout_call(node: ast.Comprehension, exprs: ExprCompiler) -> BatchCall | None:
    """A comprehension whose element is a direct call and whose clauses are pure: ONE
    batch of as many calls as the clauses bind (ADR 0015), or None."""
    direct = _direct_call(node.element)
    if direct is None:
        return None
    clause_parts = [c.cond if isinstance(c, ast.CompIf) else c.iterable for c in node.clauses]
    if not all(is_pure(p) for p in clause_parts):
        return None
    try:
        call = _batch_call(*direct, exprs)
    except _NotBatchable:
        return None
    call.each = exprs.comprehension(node.clauses, call.target)
    return call


def batch_plan(node: Any, exprs: ExprCompiler) -> BatchPlan | None:
    """The aggregate-await plan of a literal list/tuple/record whose leaves are direct
    receiver calls (optionally ``?``) or pure expressions, with at least one call, or of
    a fan-out comprehension ``[tools.f(x) for x in xs]``; None means "evaluate, then join
    handles recursively"."""
    if type(node) is ast.Comprehension:
        fanout = _fanout_call(node, exprs)
        return None if fanout is None else BatchPlan(("fanout", 0), [fanout])
    if type(node) not in (ast.ListLit, ast.TupleLit, ast.RecordLit):
        return None
    calls: list[BatchCall] = []

    def shape(n: Any) -> Any:
        t = type(n)
        if t is ast.ListLit or t is ast.TupleLit:
            items = [shape(i) for i in n.items]
            return ("list" if t is ast.ListLit else "tuple", items)
        if t is ast.RecordLit:
            return ("record", [(k, shape(v)) for k, v in n.entries])
        direct = _direct_call(n)
        if direct is not None:
            calls.append(_batch_call(*direct, exprs))
            return ("call", len(calls) - 1)
        if isinstance(n, _PURE_LEAVES) and is_pure(n):
            return ("pure", exprs.expr(n))
        raise _NotBatchable

    try:
        tree = shape(node)
    except _NotBatchable:
        return None
    if not calls:
        return None
    return BatchPlan(tree, calls)


class _NotBatchable(Exception):
    pass
