"""The linker: names, processes, builtins, host modules and gradual static types.

``link(module, catalog)`` checks a parsed module against a tool ``Catalog`` and returns it
with ``ReceiverCall.module`` and every effect ``site`` filled in, or raises ``LangError``
(code ``link_error``) for the first problem, in the original's order: declarations (in
source order); then, process by process, what the body can finish with (a partial walk of
its reachable statements, as the original infers a process's output type) against its
``-> T``; then each process body in full; then the main block.
"""

from __future__ import annotations

from typing import Any

from lashflow.lang import ast as A
from lashflow.lang import types as T
from lashflow.lang.catalog import Catalog, Operation
from lashflow.lang.diagnostics import LangError, link_error
from lashflow.lang.durations import deadline_seconds, duration_seconds
from lashflow.lang.names import did_you_mean, resource_type_name
from lashflow.lang.sites import assign_sites

BUILTINS: dict[str, T.SType] = {
    "len": T.INT, "empty": T.BOOL, "keys": T.LIST_ANY, "values": T.LIST_ANY, "trim": T.STR,
    "to_string": T.STR, "to_int": T.INT, "to_float": T.FLOAT, "json_parse": T.ANY,
    "contains": T.BOOL, "starts_with": T.BOOL, "ends_with": T.BOOL, "split": T.LIST_ANY,
    "join": T.STR, "find": T.INT, "grep_text": T.LIST_ANY, "slice": T.ANY, "push": T.LIST_ANY,
    "range": T.LIST_ANY, "ceil_div": T.INT, "floor_div": T.INT, "format": T.ANY,
    "validate": T.ANY,
}
_ARITH = frozenset(["-", "*", "/", "%", "<", "<=", ">", ">="])
_INT_OPS = frozenset(["+", "-", "*", "%"])
UNSUPPORTED_TRIGGERS = "not supported by lashflow: triggers registry"
# expressions the original's output inference types without looking at all of them
_PARTLY_INFERRED = (A.BuiltinCall, A.Start, A.Unary, A.Index, A.Sleep, A.WaitSignal, A.SignalRun)

Env = dict[str, T.SType]


def link(module: A.Module, catalog: Catalog | None = None) -> A.Module:
    """Check ``module``; fill module paths and site ids; raise ``LangError`` on a problem."""
    try:
        Linker(module, catalog if catalog is not None else Catalog()).run()
    except LangError:
        raise
    except RecursionError:  # pragma: no cover - the parser bounds tree depth
        raise link_error(module.source, "program too deeply nested to check") from None
    except Exception as exc:  # pragma: no cover - a bug here must still be a diagnostic
        raise link_error(module.source,
                         f"internal linker error ({type(exc).__name__}: {exc})") from exc
    return assign_sites(module)


class Linker:
    def __init__(self, module: A.Module, catalog: Catalog) -> None:
        self.module = module
        self.source = module.source
        self.catalog = catalog
        self.resources = {resource_type_name(m): m for m in catalog.modules}
        self.type_decls: dict[str, A.TypeDecl] = {}
        self.resolved: dict[str, T.SType] = {}
        self.resolving: set[str] = set()
        self.processes: dict[str, A.ProcessDecl] = {}
        self.params: dict[str, list[tuple[str, T.SType]]] = {}
        self.outputs: dict[str, T.SType | None] = {}
        self.process_values: dict[str, T.ProcessT] = {}  # a process's type as a value
        # per entry
        self.proc: A.ProcessDecl | None = None
        self.assigned: set[str] = set()
        self.signal_types: dict[str, T.SType] = {}
        self.reachable = True  # false after a `finish`/`fail`/`break`/`continue` in a block
        self.finishes: list[T.SType] = []  # types of the reachable `finish`es of the body
        self.undeclared_signal: LangError | None = None  # the body's first, reported last
        # True while inferring a process's output: only the reachable statements, and not
        # the parts of expressions the original leaves out of its inference (see `inferred`)
        self.inferring = False

    def fail(self, message: str, node: Any = None, *, hint: str | None = None) -> LangError:
        span = getattr(node, "span", None)
        if span is None or (span.start == 0 and span.end == 0 and node is None):
            return link_error(self.source, message, hint=hint)
        return link_error(self.source, message, span.start, end=span.end, hint=hint)

    def check_sleep_literal(self, e: A.Sleep) -> None:
        """A literal duration or deadline that could never work is reported now, with the
        accepted forms, rather than when the run reaches the sleep."""
        value = e.value
        if not isinstance(value, (A.String, A.Number)):
            return
        kind, check = (("duration", duration_seconds) if e.mode == "for"
                       else ("deadline", deadline_seconds))
        try:
            check(value.value)
        except ValueError as exc:
            shown = f'"{value.value}"' if isinstance(value, A.String) else f"{value.value:g}"
            raise self.fail(f"invalid {kind} {shown} in `sleep {e.mode}`: {exc}", value) from None

    def no_tools_hint(self) -> str | None:
        """For a name that could have been a tool module when no tool is loaded at all."""
        if self.catalog.modules:
            return None
        return ("no tools are loaded: lashflow looks for a .py file beside the .lash file "
                "and for modules given with --tools")

    # ------------------------------------------------------------------ declarations

    def run(self) -> None:
        processes = [d for d in self.declare() if isinstance(d, A.ProcessDecl)]
        for decl in processes:
            self.infer_output(decl)
        deferred: LangError | None = None  # lashflow's own signal check comes last
        for decl in processes:
            try:
                self.process_body(decl)
            except LangError as exc:
                if exc is not self.undeclared_signal:
                    raise
                deferred = deferred or exc
        self.entry(None, self.module.main, {})
        if deferred is not None:
            raise deferred

    def declare(self) -> list[Any]:
        """Check the declarations (names, types, process signatures) in source order and
        return them in that order. Each body is then checked on its own, against them
        alone: the language server re-checks just the body that was edited."""
        decls: list[Any] = sorted(
            [*self.module.types, *self.module.processes], key=lambda d: d.span.start
        )
        for decl in decls:
            table = self.type_decls if isinstance(decl, A.TypeDecl) else self.processes
            if decl.name in table:
                raise self.fail(f"duplicate declaration `{decl.name}`", decl)
            table[decl.name] = decl  # type: ignore[assignment]  # the table chosen by the decl's class
        for decl in decls:
            if isinstance(decl, A.TypeDecl):
                self.resolve_named(decl.name, decl)
            else:
                self.signature(decl)
        return decls

    def resolve_named(self, name: str, node: Any) -> T.SType:
        if name in self.resolved:
            return self.resolved[name]
        if name in self.resolving:
            return T.Ref(name)  # recursive type: gradual
        decl = self.type_decls[name]
        self.resolving.add(name)
        result = self.type_of(decl.type)
        self.resolving.discard(name)
        self.resolved[name] = result
        return result

    def type_of(self, t: A.TypeExpr) -> T.SType:
        """A declared type expression as a static type (``unknown type `X``` otherwise)."""
        if isinstance(t, A.TypeName):
            if t.name in T.SCALAR_TYPES:
                return T.SCALAR_TYPES[t.name]
            if t.name in self.type_decls:
                return self.resolve_named(t.name, t)
            if t.name in self.resources:
                return T.Resource(t.name)
            raise self.fail(f"unknown type `{t.name}`", t,
                            hint=did_you_mean(t.name, [*self.type_decls, *T.SCALAR_TYPES, *self.resources]))
        if isinstance(t, A.TypeNull):
            return T.NULL
        if isinstance(t, A.TypeStringLiteral):
            return T.Enum((t.value,))
        if isinstance(t, A.TypeEnum):
            return T.Enum(tuple(t.members))
        if isinstance(t, A.TypeList):
            return T.ListT(self.type_of(t.item))
        if isinstance(t, A.TypeObject):
            return T.Obj(tuple(T.Field(f.name, self.type_of(f.type), f.optional) for f in t.fields))
        if isinstance(t, A.TypeUnion):  # members as written: a repeated one is shown twice
            members = [self.type_of(m) for m in t.members]
            return members[0] if len(members) == 1 else T.UnionT(tuple(members))
        if isinstance(t, A.TypeProcess):
            return T.ProcessT(self.type_of(t.input), self.type_of(t.output))
        if isinstance(t, A.TypeTriggerHandle):
            raise self.fail(UNSUPPORTED_TRIGGERS, t)
        return T.ANY

    def signature(self, decl: A.ProcessDecl) -> None:
        seen: set[str] = set()
        params: list[tuple[str, T.SType]] = []
        for p in decl.params:
            if p.name in seen:
                raise self.fail(f"duplicate process parameter `{p.name}`", p)
            seen.add(p.name)
            params.append((p.name, self.type_of(p.type)))
        seen = set()
        for s in decl.signals:
            if s.name in seen:
                raise self.fail(f"duplicate process signal `{s.name}`", s)
            seen.add(s.name)
            self.type_of(s.type)
        self.params[decl.name] = params
        self.outputs[decl.name] = self.type_of(decl.returns) if decl.returns is not None else None

    def infer_output(self, decl: A.ProcessDecl) -> None:
        """What the body can finish with, checked against ``-> T``. Like the original, this
        walks only the reachable statements and skips some sub-expressions (builtin and
        `start` arguments, ...), so an error there is reported after every process's output
        check, while one in the walked part is reported before the next process's."""
        self.inferring = True
        try:
            self.signal_types = {s.name: self.type_of(s.type) for s in decl.signals}
            self.finishes = []
            self.entry(decl, decl.body.body, dict(self.params[decl.name]))
        finally:
            self.inferring = False
        expected = self.outputs.get(decl.name)
        if expected is not None:
            self.check_output(decl, expected, ends=self.reachable)
        self.process_values[decl.name] = T.ProcessT(
            self.input_type(decl.name), self.finished_type(ends=self.reachable))

    def output_of(self, name: str) -> T.SType:
        """What a run of process ``name`` finishes with, once its body has been inferred:
        what the body can finish with (which fits ``-> T`` if declared, and may be narrower,
        as ``range(3)`` for ``list[int]``); before that unknown, even if declared, as the
        original types it while inferring the processes before it (and itself)."""
        known = self.process_values.get(name)
        return known.output if known is not None else T.ANY

    def input_type(self, name: str) -> T.SType:
        """A process's input as its value's type shows it, as the original does: null
        without parameters, the parameter's type for one, an object of them for more."""
        params = self.params[name]
        if not params:
            return T.NULL
        if len(params) == 1:
            return params[0][1]
        return T.Obj(tuple(T.Field(n, t) for n, t in params))

    def finished_type(self, ends: bool) -> T.SType:
        """What a run of the process being inferred can finish with: each reachable
        ``finish``, and null if the body can end without one."""
        members: list[T.SType] = []
        shown: set[str] = set()  # members that read the same are one (a result reads `any`)
        for t in [*self.finishes, *([T.NULL] if ends or not self.finishes else [])]:
            for m in (t.members if isinstance(t, T.UnionT) else (T.widen(t),)):
                if m.render() not in shown:
                    shown.add(m.render())
                    members.append(m)
        return members[0] if len(members) == 1 else T.UnionT(tuple(members))

    def process_body(self, decl: A.ProcessDecl) -> None:
        self.signal_types = {s.name: self.type_of(s.type) for s in decl.signals}
        self.undeclared_signal = None
        self.entry(decl, decl.body.body, dict(self.params[decl.name]))
        if self.undeclared_signal is not None:
            raise self.undeclared_signal

    def check_output(self, decl: A.ProcessDecl, expected: T.SType, ends: bool) -> None:
        """What a run of the process can finish with (each reachable ``finish``, and null
        if the body can end without one) must fit the declared output type."""
        for value in self.finishes:  # a literal that fits no member is reported as such
            if isinstance(value, T.StrLit):
                try:
                    T.check_assignable(value, expected)
                except T.Mismatch as exc:
                    if exc.message:
                        raise self.fail(exc.message, decl) from None
        got = self.finished_type(ends)
        members = got.members if isinstance(got, T.UnionT) else (got,)
        try:
            T.check_assignable(got, expected)
        except T.Mismatch:
            hint = ("the body can end without `finish`, which finishes with null"
                    if T.NULL in members and T.NULL not in self.finishes else None)
            raise self.fail(f"process `{decl.name}` return type is incompatible: expected "
                            f"{expected.render()}, got {got.render()}", decl, hint=hint) from None

    def literals_fit(self, e: Any, expected: T.SType) -> None:
        """The text literals a reachable ``finish`` writes (alone, or inside a list, tuple
        or record literal, or as a branch of ``? :``) each fit the declared enum or union
        they land in, checked where the ``finish`` is, as the original does."""
        if isinstance(e, A.String):
            fits = True
            if isinstance(expected, T.Enum):
                fits = e.value in expected.members
            elif isinstance(expected, T.UnionT):
                fits = any(m in (T.ANY, T.STR) or (isinstance(m, T.Enum) and e.value in m.members)
                           or (isinstance(m, T.StrLit) and m.value == e.value)
                           for m in expected.members)
            if not fits:
                raise self.fail(f"expected {expected.render()}, got incompatible literal "
                                f"{T.quote(e.value)}", e)
        elif isinstance(e, A.Ternary):
            self.literals_fit(e.then, expected)
            self.literals_fit(e.otherwise, expected)
        elif isinstance(e, A.RecordLit) and isinstance(expected, T.Obj):
            for key, value in e.entries:
                field = expected.get(key)
                if field is not None:
                    self.literals_fit(value, field.type)
        elif isinstance(e, (A.ListLit, A.TupleLit)) and isinstance(expected, T.ListT):
            for item in e.items:
                self.literals_fit(item, expected.item)

    def literal_fits_output(self, value: T.SType, node: A.ValueStmt) -> None:
        """A text literal after a ``finish`` (which cannot run) is still checked against
        ``-> T`` when the body is checked, as the original does; other values are not."""
        expected = self.outputs.get(self.proc.name) if self.proc is not None else None
        if expected is None or not isinstance(value, T.StrLit):
            return
        try:
            T.check_assignable(value, expected)
        except T.Mismatch as exc:
            if exc.message:
                raise self.fail(exc.message, node) from None

    # ------------------------------------------------------------------ entries

    def entry(self, proc: A.ProcessDecl | None, body: list[A.Stmt], env: Env) -> None:
        self.proc = proc
        self.assigned = set(env)
        _statement_names(body, self.assigned, whole_only=False)
        self.reachable = True
        self.block(body, env)

    def block(self, body: list[A.Stmt], env: Env) -> None:
        """Check the statements; ``self.reachable`` says afterwards whether the block can
        end normally (statements after a ``finish`` are still checked, but what they
        finish with is not counted, as in the original)."""
        reachable = self.reachable
        for stmt in body:
            if self.inferring and not self.reachable:
                break  # the original infers no further than a `finish` or `fail`
            self.stmt(stmt, env)
            if not self.reachable:
                reachable = False
                self.reachable = False
        self.reachable = reachable

    def stmt(self, s: A.Stmt, env: Env) -> None:  # noqa: C901 - one case per statement
        if isinstance(s, A.Assign):
            if not s.steps:
                env[s.name] = T.widen(self.expr(s.value, env))
            else:
                self.assign_path(s, env)
        elif isinstance(s, A.ExprStmt):
            self.expr(s.expr, env)
        elif isinstance(s, A.ValueStmt):
            if self.inferring and s.kind != "finish":  # not inferred: only what it does
                if s.kind == "fail":
                    self.reachable = False
                return
            value = self.expr(s.value, env)
            if s.kind in ("finish", "fail"):
                if s.kind == "finish" and self.reachable:
                    self.finishes.append(value)
                    expected = self.outputs.get(self.proc.name) if self.proc is not None else None
                    if self.inferring and expected is not None:
                        self.literals_fit(s.value, expected)
                elif s.kind == "finish" and not self.inferring:
                    self.literal_fits_output(value, s)
                self.reachable = False
        elif isinstance(s, A.If):
            self.expr(s.cond, env)
            before = self.reachable
            then_env = dict(env)
            self.block(s.then.body, then_env)
            then_ends = self.reachable
            self.reachable = before
            else_env = dict(env)
            if isinstance(s.otherwise, A.Block):
                self.block(s.otherwise.body, else_env)
            elif isinstance(s.otherwise, A.If):
                self.stmt(s.otherwise, else_env)
            self.reachable = before and (then_ends or self.reachable)
            _merge(env, then_env, else_env)
        elif isinstance(s, A.For):
            item = self.iterate(self.expr(s.iterable, env), s.iterable)
            saved = env.get(s.var)
            self.loop(env, s.body.body, {s.var: item})
            if saved is None:
                env.pop(s.var, None)
            else:
                env[s.var] = saved
        elif isinstance(s, A.While):
            self.expr(s.cond, env)
            self.loop(env, s.body.body, {})
        elif isinstance(s, (A.Break, A.Continue)):
            if not self.inferring:  # the original's inference counts what follows them
                self.reachable = False

    def loop(self, env: Env, body: list[A.Stmt], bind: Env) -> None:
        """Check a loop body once, with the types from before the loop (as the original
        does); afterwards each variable is the join of before and after one pass, and one
        the body creates is unknown (the body may not run)."""
        inner = dict(env)
        inner.update(bind)
        before = self.reachable
        self.block(body, inner)
        self.reachable = before  # a loop may run no time, or leave by `break`
        for name, t in inner.items():
            if name in bind:
                continue
            if name not in env:
                env[name] = T.ANY
            elif env[name] != t:
                env[name] = T.join([env[name], t])

    def assign_path(self, s: A.Assign, env: Env) -> None:
        """``x.a[i] = v``, in the original's order: the index expressions, the path's type
        (a field no member of the type has is refused), the value, then the variable's
        type with the stored value's in place (a field on a union that no member has is
        refused then)."""
        if not self.inferring:
            for step in s.steps:
                if isinstance(step, A.IndexStep):
                    self.expr(step.index, env)
        current = env.get(s.name)
        if current is not None:
            for step in s.steps:
                if isinstance(step, A.FieldStep):
                    current = self.field_type(current, step.name, step)
                else:
                    current = _index_type(current)
        value = T.widen(self.expr(s.value, env))
        root = env.get(s.name)
        if root is None:
            if self.proc is not None and s.name not in ("input", "inputs"):
                raise self.fail(f"unknown name `{s.name}`", s)
            return
        try:
            env[s.name] = _updated(root, s.steps, value)
        except _NoField as exc:
            raise self.fail(f"object type has no field `{exc.step.name}`", exc.step) from None

    def field_type(self, t: T.SType, name: str, node: Any) -> T.SType:
        """The type of field ``name`` of a value of type ``t``; an object type (or a union
        of them) without it is refused."""
        if isinstance(t, T.Resource):
            raise self.fail(f"cannot access `.{name}` on opaque host descriptor `{t.type_name}`",
                            node)
        found = _field_of(t, name)
        if found is None:
            raise self.fail(f"object type has no field `{name}`", node)
        return found

    def iterate(self, t: T.SType, node: Any) -> T.SType:
        """The item type of a ``for``; a union iterates if some member is a list."""
        if isinstance(t, T.ListT):
            return t.item
        if (isinstance(t, T.UnionT) and any(isinstance(m, T.ListT) for m in t.members)
                and all(isinstance(m, T.ListT) or T.is_gradual(m) for m in t.members)):
            # lists and unknowns: each list gives its items, each unknown `any`, in order
            return T.join(m.item if isinstance(m, T.ListT) else T.ANY for m in t.members)
        if _unchecked(t):
            return T.ANY
        if isinstance(t, T.UnionT):
            lists = [m for m in t.members if isinstance(m, T.ListT)]
            if lists:
                return T.join(m.item for m in lists) if len(lists) == len(t.members) else T.ANY
        raise self.fail(f"cannot iterate over {t.render()}; expected a list", node)

    # ------------------------------------------------------------------ expressions

    def expr(self, e: Any, env: Env) -> T.SType:  # noqa: C901 - one case per node
        if self.inferring and isinstance(e, _PARTLY_INFERRED):
            return self.inferred(e, env)
        if isinstance(e, A.Name):
            return self.name(e, env)
        if isinstance(e, A.String):
            return T.StrLit(e.value)
        if isinstance(e, A.Number):
            # a whole literal is an int however large (a literal of 309+ digits is inf)
            return T.INT if e.value - e.value == 0 and e.value == int(e.value) else T.FLOAT
        if isinstance(e, A.Bool):
            return T.BOOL
        if isinstance(e, A.Null):
            return T.NULL
        if isinstance(e, A.ReceiverCall):
            return self.receiver_call(e, env)
        if isinstance(e, A.Await):
            inner = self.expr(e.expr, env)
            if isinstance(e.expr, A.Unwrap) or isinstance(inner, T.Wrapper):
                return inner
            if isinstance(inner, T.Handle):  # the child's output, or anything if it failed
                return T.join([inner.output, T.ANY])
            return _awaited(inner)
        if isinstance(e, A.Unwrap):
            inner = self.expr(e.expr, env)
            if isinstance(inner, T.Wrapper):
                return inner.inner
            if isinstance(inner, T.Handle):  # the child's output, or anything if it failed
                return T.join([inner.output, T.ANY])
            return inner  # as the original types it; the run refuses what is not a result
        if isinstance(e, A.Field):
            return self.field(e, env)
        if isinstance(e, A.Index):
            obj = self.expr(e.obj, env)
            self.expr(e.index, env)
            return _index_type(obj)
        if isinstance(e, A.Binary):
            return self.binary(e, env)
        if isinstance(e, A.Unary):
            operand = self.expr(e.operand, env)
            if e.op == "not":
                return T.BOOL
            return T.INT if operand == T.INT else T.FLOAT
        if isinstance(e, A.Ternary):
            self.expr(e.cond, env)
            return T.join([self.expr(e.then, env), self.expr(e.otherwise, env)])
        if isinstance(e, (A.ListLit, A.TupleLit)):
            items = [self.expr(x, env) for x in e.items]
            return T.ListT(T.join(items)) if items else T.LIST_ANY
        if isinstance(e, A.RecordLit):  # a repeated key is a repeated field, as the original has it
            return T.Obj(tuple(T.Field(k, self.expr(v, env)) for k, v in e.entries))
        if isinstance(e, A.BuiltinCall):
            return self.builtin(e, env)
        if isinstance(e, A.Start):
            return self.start(e, env)
        if isinstance(e, A.Comprehension):
            return self.comprehension(e, env)
        if isinstance(e, A.Sleep):
            self.expr(e.value, env)
            self.check_sleep_literal(e)
            return T.NULL
        if isinstance(e, A.WaitSignal):
            if self.proc is None:
                raise self.fail("`wait_signal` can only be used inside a process body", e)
            if (self.signal_types and e.name not in self.signal_types and not self.inferring
                    and self.undeclared_signal is None):
                # a process that declares its signals takes no other: a typo would park
                # forever. The original has no such check, so it is reported only once the
                # body shows none of the original's own errors (see process_body and run).
                self.undeclared_signal = self.fail(
                    f"process `{self.proc.name}` declares no signal `{e.name}` (its signals: "
                    f"{', '.join(f'`{n}`' for n in self.signal_types)})", e,
                    hint=did_you_mean(e.name, list(self.signal_types)))
            return self.signal_types.get(e.name, T.ANY)
        if isinstance(e, A.SignalRun):
            self.expr(e.run, env)
            self.expr(e.payload, env)
            return T.NULL
        if isinstance(e, A.TypeLiteral):
            return T.DICT
        return T.ANY

    def inferred(self, e: Any, env: Env) -> T.SType:
        """The type of ``e`` while inferring a process's output, from the parts the
        original looks at then: a builtin's or `start`'s name (not its arguments), the
        object of an index (not the index), and no sleep or signal at all."""
        if isinstance(e, A.BuiltinCall):
            return BUILTINS.get(e.name, T.ANY)
        if isinstance(e, A.Start):
            return T.Handle(self.output_of(e.process))
        if isinstance(e, A.Unary):
            if e.op == "not":
                return T.BOOL
            try:  # lashflow keeps `-int` an int (docs/adr/0025): look, but report nothing
                return T.INT if self.expr(e.operand, env) == T.INT else T.FLOAT
            except LangError:
                return T.FLOAT
        if isinstance(e, A.Index):
            return _index_type(self.expr(e.obj, env))
        if isinstance(e, A.WaitSignal):
            return self.signal_types.get(e.name, T.ANY)
        return T.NULL  # sleep, signal run

    def name(self, e: A.Name, env: Env) -> T.SType:
        name = e.name
        if name in env:
            if name in self.processes or name in self.catalog.modules:
                e.local = True
            return env[name]
        if name in self.assigned and self.proc is not None and not (
                name in self.processes or name in self.catalog.modules):
            # (a process or module name not yet assigned here still names that global)
            raise self.fail(f"unknown name `{name}`", e,
                            hint=f"`{name}` is assigned only later in the process body")
        if name in self.assigned and self.proc is None and not (
                name in self.processes or name in self.catalog.modules):
            return T.ANY
        if name in self.processes:
            return T.ProcessT(self.input_type(name), self.output_of(name))
        if name in self.catalog.modules:
            return T.Resource(resource_type_name(name), name)
        if self.proc is not None:
            if name in ("input", "inputs"):
                return T.ANY
            raise self.fail(f"unknown name `{name}`", e, hint=did_you_mean(
                name, [*env, *self.assigned, *self.processes, *self.catalog.modules]))
        return T.ANY

    def field(self, e: A.Field, env: Env) -> T.SType:
        return self.field_type(self.expr(e.obj, env), e.name, e)

    def binary(self, e: A.Binary, env: Env) -> T.SType:
        left = self.expr(e.left, env)
        right = self.expr(e.right, env)
        op = e.op
        # The original checks no operator over a module value (``tools < 1``): it fails,
        # or answers, when it runs. So a module operand is unchecked here, as ``any`` is.
        gradual = _unchecked(left) or _unchecked(right)

        def refuse() -> LangError:
            return self.fail(
                f"operator `{op}` does not accept {left.render()} and {right.render()}", e
            )

        if op in ("and", "or"):
            if not gradual and not (_is_bool(left) and _is_bool(right)):
                raise refuse()
            return T.BOOL
        if op in ("==", "!="):
            if not gradual and not _comparable(left, right):
                raise refuse()
            return T.BOOL
        if op == "+":
            if not gradual:
                both_lists = isinstance(left, T.ListT) and isinstance(right, T.ListT)
                if not (both_lists or (T.is_scalar(left) and T.is_scalar(right))):
                    raise refuse()
                if both_lists:
                    return T.ListT(T.join([left.item, right.item]))  # type: ignore[union-attr]  # both_lists
                if _is_text(left) or _is_text(right):
                    return T.STR
            elif _is_text(left) or _is_text(right):
                return T.STR
        elif op in _ARITH:
            if not gradual and not (T.is_scalar(left) and T.is_scalar(right)):
                raise refuse()
            if op in ("<", "<=", ">", ">="):
                return T.BOOL
            if not (op in _INT_OPS and left == T.INT and right == T.INT):
                return T.FLOAT  # a number whatever the operands: it cannot be anything else
        if gradual:
            return T.ANY
        if op in _INT_OPS and left == T.INT and right == T.INT:
            return T.INT
        return T.FLOAT

    def builtin(self, e: A.BuiltinCall, env: Env) -> T.SType:
        result = BUILTINS.get(e.name)
        if result is None:
            owner = self._tool_module(e.name)
            if owner is not None:
                raise self.fail(
                    f"tools must be called through module paths, e.g. `{owner}.{e.name}`", e
                )
            raise self.fail(f"unknown builtin `{e.name}`", e, hint=did_you_mean(e.name, BUILTINS))
        for arg in e.args:
            self.expr(arg, env)
        return result

    def _tool_module(self, name: str) -> str | None:
        for module, ops in self.catalog.modules.items():
            if name in ops:
                return module
        return None

    def receiver_call(self, e: A.ReceiverCall, env: Env) -> T.SType:
        op = self.resolve_receiver(e, env)
        args = [self.expr(a, env) for a in e.args]
        output: T.SType = T.ANY
        if op is not None:
            if op.input_schema is not None and len(args) == 1:
                expected = T.from_schema(op.input_schema)
                try:
                    T.check_assignable(args[0], expected)
                except T.Mismatch as exc:
                    message = exc.message or (
                        f"operation `{e.operation}` expects {expected.render()}, "
                        f"got {args[0].render()}"
                    )
                    raise self.fail(message, e) from None
            if op.output_schema is not None:
                output = T.from_schema(op.output_schema)
        return T.Wrapper(output)

    def resolve_receiver(self, e: A.ReceiverCall, env: Env) -> Operation | None:
        """Find the module behind ``receiver.op(...)``; fills ``e.module`` when static."""
        path = path_of(e.receiver)
        not_authority = f"receiver for operation `{e.operation}` is not a module authority"
        if path is None:
            receiver = self.expr(e.receiver, env)
            return self._resource_op(receiver, e, not_authority)
        root = path.split(".", 1)[0]
        if root in env or (root in self.assigned and root not in self.catalog.modules):
            receiver = self.expr(e.receiver, env)
            return self._resource_op(receiver, e, not_authority)
        if path in self.catalog.modules:
            op = self.catalog.operation(path, e.operation)
            if op is None:
                raise self.fail(f"module `{path}` does not expose operation `{e.operation}`", e,
                                hint=did_you_mean(e.operation, self.catalog.modules[path]))
            e.module = path
            return op
        if root in ("triggers", "trigger"):
            raise self.fail(UNSUPPORTED_TRIGGERS, e)
        if "." in path and any(m.startswith(root + ".") or m == root for m in self.catalog.modules):
            raise self.fail(not_authority, e, hint=did_you_mean(path, self.catalog.modules)
                            or f"there is no module `{path}`")
        if not self.catalog.modules:  # nothing could be called: say why
            raise self.fail(not_authority, e, hint=self.no_tools_hint())
        if self.proc is not None and root not in (*self.processes, "input", "inputs"):
            # the original reports an unknown name in a process body as such
            raise self.fail(f"unknown name `{root}`", e.receiver, hint=did_you_mean(
                root, [*env, *self.assigned, *self.catalog.modules])
                or f"no tool module `{root}` is loaded to call `{path}.{e.operation}`")
        self.expr(e.receiver, env)
        raise self.fail(not_authority, e, hint=did_you_mean(
            root, [*env, *self.assigned, *self.catalog.modules]))

    def _resource_op(self, receiver: T.SType, e: A.ReceiverCall, message: str) -> Operation | None:
        if isinstance(receiver, T.Resource):
            module = receiver.module or self.resources.get(receiver.type_name)
            if module is None:
                raise self.fail(message, e)
            op = self.catalog.operation(module, e.operation)
            if op is None:
                raise self.fail(
                    f"resource type `{receiver.type_name}` does not expose operation "
                    f"`{e.operation}`",
                    e, hint=did_you_mean(e.operation, self.catalog.modules.get(module, {})),
                )
            return op
        raise self.fail(message, e)

    def start(self, e: A.Start, env: Env) -> T.SType:
        decl = self.processes.get(e.process)
        if decl is None:
            raise self.fail(f"unknown process `{e.process}`", e,
                            hint=did_you_mean(e.process, self.processes))
        params = dict(self.params[e.process])
        given: set[str] = set()
        for key, value in e.args:
            if key in given:
                raise self.fail(f"duplicate process argument `{key}`", value)
            given.add(key)
            if key not in params:
                raise self.fail(f"process `{e.process}` does not accept argument `{key}`", value,
                                hint=did_you_mean(key, params))
            actual = self.expr(value, env)
            try:
                T.check_assignable(actual, params[key])
            except T.Mismatch as exc:
                raise self.fail(
                    exc.message
                    or f"process `{e.process}` argument `{key}` expects "
                    f"{params[key].render()}, got {actual.render()}",
                    value,
                ) from None
        for name, _ in self.params[e.process]:
            if name not in given:
                raise self.fail(f"process `{e.process}` is missing argument `{name}`", e)
        return T.Handle(self.output_of(e.process))

    def comprehension(self, e: A.Comprehension, env: Env) -> T.SType:
        inner = dict(env)
        for clause in e.clauses:
            if isinstance(clause, A.CompFor):
                inner[clause.var] = self.iterate(self.expr(clause.iterable, inner), clause.iterable)
            else:
                self.expr(clause.cond, inner)
        return T.ListT(T.widen(self.expr(e.element, inner)))


def _statement_names(body: list[A.Stmt], out: set[str], whole_only: bool) -> None:
    """Names that statements in ``body`` (at any block depth) bind: assignment targets
    (only whole-variable ones if ``whole_only``) and ``for`` variables."""
    for s in body:
        if isinstance(s, A.Assign):
            if not (whole_only and s.steps):
                out.add(s.name)
        elif isinstance(s, A.For):
            if not whole_only:
                out.add(s.var)
            _statement_names(s.body.body, out, whole_only)
        elif isinstance(s, A.While):
            _statement_names(s.body.body, out, whole_only)
        elif isinstance(s, A.If):
            while True:
                _statement_names(s.then.body, out, whole_only)
                other = s.otherwise
                if isinstance(other, A.If):
                    s = other
                    continue
                if isinstance(other, A.Block):
                    _statement_names(other.body, out, whole_only)
                break


def _merge(target: Env, a: Env, b: Env) -> None:
    for name in set(a) | set(b):
        if name in a and name in b:
            target[name] = a[name] if a[name] == b[name] else T.join([a[name], b[name]])
        else:
            target[name] = T.ANY


def _index_type(obj: T.SType) -> T.SType:
    """What indexing a value of type ``obj`` gives: a list's item, else unknown."""
    if isinstance(obj, T.ListT):
        return obj.item
    if isinstance(obj, T.UnionT):
        return T.join(_index_type(m) for m in obj.members)
    return T.ANY


def _field_of(t: T.SType, name: str) -> T.SType | None:
    """Field ``name`` of type ``t``: None if ``t`` is an object type without it, or a
    union none of whose members has it; unknown if only some lack it."""
    if isinstance(t, T.Obj):
        f = t.get(name)
        if f is None:
            return T.ANY if t.open else None
        return T.join([f.type, T.NULL]) if f.optional else f.type
    if isinstance(t, T.UnionT):
        found = [_field_of(m, name) for m in t.members]
        present = [f for f in found if f is not None]
        if not present:
            return None
        return T.join(present) if len(present) == len(found) else T.ANY
    return T.ANY


def _unchecked(t: T.SType) -> bool:
    """Gradual, or a module value (alone or in a union): the run decides, not the linker."""
    if isinstance(t, T.Resource):
        return True
    if isinstance(t, T.UnionT):
        return any(_unchecked(m) for m in t.members)
    return T.is_gradual(t)


def _has_field(t: T.SType, name: str) -> bool:
    if isinstance(t, T.Obj):
        return t.open or t.get(name) is not None
    if isinstance(t, T.UnionT):
        return any(_has_field(m, name) for m in t.members)
    return T.is_gradual(t)


class _NoField(Exception):
    def __init__(self, step: A.FieldStep) -> None:
        super().__init__(step.name)
        self.step = step


def _updated(t: T.SType, steps: list[Any], value: T.SType) -> T.SType:
    """``t`` with the value at ``steps`` now of type ``value``; raises ``_NoField`` for a
    field step into a union none of whose members has the field."""
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    if isinstance(t, T.Obj) and isinstance(step, A.FieldStep):
        f = t.get(step.name)
        if f is None:
            if t.open:
                return t
            raise _NoField(step)
        fields = tuple(T.Field(x.name, _updated(x.type, rest, value), x.optional) if x is f else x
                       for x in t.fields)
        return T.Obj(fields, t.open)
    if isinstance(t, T.ListT) and isinstance(step, A.IndexStep):
        return T.ListT(_updated(t.item, rest, value))
    if isinstance(t, T.UnionT):
        if isinstance(step, A.IndexStep):
            return T.join(_updated(m, steps, value) for m in t.members)
        members, updated, missing = [], False, None
        for m in t.members:
            if not _has_field(m, step.name):
                members.append(m)
                continue
            try:
                members.append(_updated(m, steps, value))
                updated = True
            except _NoField as exc:
                missing = exc
                members.append(m)
        if not updated:
            raise missing or _NoField(step)
        return T.join(members)
    return t


def _comparable(left: T.SType, right: T.SType) -> bool:
    """``==`` takes two values of one category; a union takes what any member takes."""
    if isinstance(left, T.UnionT):
        return any(_comparable(m, right) for m in left.members)
    if isinstance(right, T.UnionT):
        return any(_comparable(left, m) for m in right.members)
    return T.is_gradual(left) or T.is_gradual(right) or T.category(left) == T.category(right)


def _awaited(t: T.SType) -> T.SType:
    """What ``await`` of a list or record of calls gives: their results are unknown."""
    if isinstance(t, (T.Wrapper, T.Handle)):
        return T.ANY
    if isinstance(t, T.ListT):
        return T.ListT(_awaited(t.item))
    if isinstance(t, T.Obj):
        return T.Obj(tuple(T.Field(f.name, _awaited(f.type), f.optional) for f in t.fields), t.open)
    if isinstance(t, T.UnionT):
        return T.join(_awaited(m) for m in t.members)
    return t


def _is_bool(t: T.SType) -> bool:
    if t == T.BOOL:
        return True
    return isinstance(t, T.UnionT) and all(_is_bool(m) for m in t.members)


def _is_text(t: T.SType) -> bool:
    return t == T.STR or isinstance(t, (T.StrLit, T.Enum))


def path_of(node: Any) -> str | None:  # also where the language server finds tool calls
    """``a.b.c`` as a dotted path if ``node`` is a plain name or a chain of fields."""
    parts: list[str] = []
    while isinstance(node, A.Field):
        parts.append(node.name)
        node = node.obj
    if not isinstance(node, A.Name):
        return None
    parts.append(node.name)
    return ".".join(reversed(parts))
