"""Instruction factories: each symbolic op becomes a closure ``ins(env, stack, vm) -> pc``.

The VM loop is ``while pc >= 0: pc = code[pc](env, stack, vm)``: an instruction
returns the next pc, or ``~next_pc`` (negative) after it has handed an effect to the VM
(``vm.suspend``), which stops the loop. State between instructions lives only in
``env`` (slots), ``stack`` (values, loop cursors, await joins) and the VM's counters,
all plain data.
"""

from __future__ import annotations

from typing import Any, Callable

from lashflow.errors import LimitExceeded
from lashflow.interp import effects as fx
from lashflow.interp import ops
from lashflow.interp.builtins import push as push_builtin
from lashflow.interp.builtins import range_bounds
from lashflow.interp.errors import LashRuntimeError, type_error, value_error
from lashflow.interp.exprs import call_builtin
from lashflow.interp.limits import ACTIVE, check_seq, steps_exhausted
from lashflow.interp.stmts import BREAK
from lashflow.interp.values import UNSET, Resource, display, failure_text, to_json, truthy

# What the VM does with the host's answer to the pending effect.
WRAPPER, BATCH, HANDLE, PAYLOAD, NONE, DISCARD, TERMINAL = range(7)

Instruction = Callable[[list[Any], list[Any], Any], int]


class Label:
    """A jump target, resolved to a pc when the entry is materialised."""

    __slots__ = ("pc",)

    def __init__(self) -> None:
        self.pc = -1


# --------------------------------------------------------------------------- stack objects


class ListCursor:
    """``for`` over a list/tuple: the items (a snapshot of the iterable), the next index
    and the loop variable's previous value (restored when the loop ends)."""

    __slots__ = ("items", "i", "n", "saved")

    def __init__(self, items: Any, i: int, saved: Any) -> None:
        self.items, self.i, self.n, self.saved = items, i, len(items), saved


class RangeCursor:
    """``for`` over ``range(...)`` without building the list."""

    __slots__ = ("start", "step", "i", "n", "saved")

    def __init__(self, start: int, step: int, n: int, i: int, saved: Any) -> None:
        self.start, self.step, self.n, self.i, self.saved = start, step, n, i, saved


class AwaitJoin:
    """A recursive ``await`` in progress: the awaited value and the answers so far
    (one per handle leaf, in traversal order)."""

    __slots__ = ("value", "leaves", "results")

    def __init__(self, value: Any, results: list[Any]) -> None:
        self.value = value
        self.leaves = join_leaves(value, [])
        self.results = results

    def rebuild(self) -> Any:
        return _rebuild(self.value, iter(self.results))


def _is_handle_record(v: dict[str, Any]) -> bool:
    return "__handle__" in v or "handle" in v


def join_leaves(v: Any, out: list[Any]) -> list[Any]:
    t = type(v)
    if t is list or t is tuple:
        for x in v:
            join_leaves(x, out)
    elif t is dict and not _is_handle_record(v):
        for x in v.values():
            join_leaves(x, out)
    else:
        out.append(v)
    return out


def _rebuild(v: Any, answers: Any) -> Any:
    t = type(v)
    if t is list:
        return [_rebuild(x, answers) for x in v]
    if t is tuple:
        return tuple(_rebuild(x, answers) for x in v)
    if t is dict and not _is_handle_record(v):
        return {k: _rebuild(x, answers) for k, x in v.items()}
    return next(answers)


class BatchCall:
    """One member of an aggregate await: receiver closure (resource receivers only),
    module, operation, argument closures, whether it is unwrapped with ``?``. A fan-out
    (``[call for x in xs]``) is one ``BatchCall`` whose ``each(env)`` lists, per element,
    ``(module, argument values)``."""

    __slots__ = ("receiver", "module", "operation", "args", "unwrap", "span", "each")

    def __init__(self, receiver: Any, module: str | None, operation: str, args: list[Any],
                 unwrap: bool, span: Any, each: Any = None) -> None:
        self.receiver, self.module, self.operation = receiver, module, operation
        self.args, self.unwrap, self.span, self.each = args, unwrap, span, each

    def target(self, env: list[Any]) -> tuple[str, list[Any]]:
        """The module this call goes to and its argument values, in ``env``."""
        mod = self.module if self.module is not None else receiver_module(self.receiver(env),
                                                                          self.operation)
        return mod, [a(env) for a in self.args]


class BatchPlan:
    """The literal shape of an aggregate await: a tree of ("list"|"tuple", items),
    ("record", [(key, item)]), ("pure", closure), ("call", index), ("fanout", index)."""

    __slots__ = ("tree", "calls")

    def __init__(self, tree: Any, calls: list[BatchCall]) -> None:
        self.tree, self.calls = tree, calls


# --------------------------------------------------------------------------- helpers


def tool_input(args: list[Any]) -> Any:
    """A call's tool input: one record argument is sent as that record; anything else as
    ``{"args": [...]}`` (a tool always receives one JSON object)."""
    if len(args) == 1 and type(args[0]) is dict:
        return to_json(args[0])
    if not args:
        return {}
    return {"args": [to_json(a) for a in args]}


def receiver_module(receiver: Any, operation: str) -> str:
    if type(receiver) is Resource:
        return receiver.alias
    raise type_error(f"receiver for operation `{operation}` is not a module authority")


def _take(stack: list[Any], n: int) -> list[Any]:
    if n == 0:
        return []
    items = stack[-n:]
    del stack[-n:]
    return items


# --------------------------------------------------------------------------- factories

def i_pure(pc: int, span: Any, fn: Any, brk: int | None, cont: int | None) -> Instruction:
    nxt = pc + 1
    if brk is None:
        def run(env: list[Any], stack: list[Any], vm: Any) -> int:
            fn(env)
            return nxt
        return run

    assert cont is not None  # a loop gives both of its labels

    def run_in_loop(env: list[Any], stack: list[Any], vm: Any) -> int:
        r = fn(env)
        if r is None:
            return nxt
        return brk if r == BREAK else cont
    return run_in_loop


def i_jump(pc: int, span: Any, target: int) -> Instruction:
    return lambda env, stack, vm: target


def i_loop(pc: int, span: Any, target: int) -> Instruction:
    def back(env: list[Any], stack: list[Any], vm: Any) -> int:
        m = ACTIVE
        n = m.steps - 1
        m.steps = n
        if n < 0:
            raise steps_exhausted()
        return target
    return back


def i_jump_if_not(pc: int, span: Any, cond: Any, target: int) -> Instruction:
    nxt = pc + 1
    return lambda env, stack, vm: nxt if cond(env) else target


def i_pop_jump_if_not(pc: int, span: Any, target: int) -> Instruction:
    nxt = pc + 1
    return lambda env, stack, vm: nxt if truthy(stack.pop()) else target


def i_push(pc: int, span: Any, fn: Any) -> Instruction:
    nxt = pc + 1

    def push(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.append(fn(env))
        return nxt
    return push


def i_pop(pc: int, span: Any) -> Instruction:
    nxt = pc + 1

    def pop(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.pop()
        return nxt
    return pop


def i_store(pc: int, span: Any, slot: int) -> Instruction:
    nxt = pc + 1

    def store(env: list[Any], stack: list[Any], vm: Any) -> int:
        env[slot] = stack.pop()
        return nxt
    return store


def i_store_path(pc: int, span: Any, slot: int, name: str, steps: list[tuple[bool, Any]]) -> Instruction:
    nxt = pc + 1
    n_index = sum(1 for is_field, _ in steps if not is_field)

    def store_path(env: list[Any], stack: list[Any], vm: Any) -> int:
        value = stack.pop()
        indexes = iter(_take(stack, n_index))
        keys = [(f, k if f else next(indexes)) for f, k in steps]
        ops.assign_path(env, slot, name, keys, value)
        return nxt
    return store_path


def i_grow(pc: int, span: Any, slot: int, name: str, pushing: bool) -> Instruction:
    """``xs = xs + x`` / ``xs = push(xs, x)`` with ``x`` on the stack (see ``growth_of``)."""
    nxt = pc + 1
    fn = push_builtin if pushing else ops.add

    def grow(env: list[Any], stack: list[Any], vm: Any) -> int:
        x = stack.pop()
        xs = env[slot]
        if xs is UNSET:
            raise ops.undefined(name)
        env[slot] = fn(xs, x)
        return nxt
    return grow


def i_binop(pc: int, span: Any, fn: Any) -> Instruction:
    nxt = pc + 1

    def binop(env: list[Any], stack: list[Any], vm: Any) -> int:
        b = stack.pop()
        stack[-1] = fn(stack[-1], b)
        return nxt
    return binop


def i_unop(pc: int, span: Any, fn: Any) -> Instruction:
    nxt = pc + 1

    def unop(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack[-1] = fn(stack[-1])
        return nxt
    return unop


def i_short_circuit(pc: int, span: Any, is_and: bool, target: int) -> Instruction:
    nxt = pc + 1

    def short(env: list[Any], stack: list[Any], vm: Any) -> int:
        t = truthy(stack.pop())
        if t is not is_and:  # `and` stops on false, `or` on true
            stack.append(t)
            return target
        return nxt
    return short


def i_to_bool(pc: int, span: Any) -> Instruction:
    nxt = pc + 1

    def to_bool(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack[-1] = truthy(stack[-1])
        return nxt
    return to_bool


def i_build_tuple(pc: int, span: Any, n: int) -> Instruction:
    nxt = pc + 1

    def build(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.append(tuple(_take(stack, n)))
        return nxt
    return build


def i_build_list(pc: int, span: Any, n: int) -> Instruction:
    nxt = pc + 1

    def build(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.append(_take(stack, n))
        return nxt
    return build


def i_build_record(pc: int, span: Any, keys: list[str]) -> Instruction:
    nxt = pc + 1
    n = len(keys)

    def build(env: list[Any], stack: list[Any], vm: Any) -> int:
        record: dict[str, Any] = {}
        for k, v in zip(keys, _take(stack, n)):
            record[k] = v
        stack.append(record)
        return nxt
    return build


def i_field(pc: int, span: Any, name: str) -> Instruction:
    nxt = pc + 1

    def field(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack[-1] = ops.get_field(stack[-1], name)
        return nxt
    return field


def i_index(pc: int, span: Any) -> Instruction:
    nxt = pc + 1

    def index(env: list[Any], stack: list[Any], vm: Any) -> int:
        i = stack.pop()
        stack[-1] = ops.get_index(stack[-1], i)
        return nxt
    return index


def i_builtin(pc: int, span: Any, name: str, n: int) -> Instruction:
    nxt = pc + 1

    def builtin(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.append(call_builtin(name, _take(stack, n)))
        return nxt
    return builtin


def i_unwrap(pc: int, span: Any, prefix: str) -> Instruction:
    nxt = pc + 1

    def unwrap(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack[-1] = ops.unwrap(stack[-1], prefix)
        return nxt
    return unwrap


def i_new_acc(pc: int, span: Any) -> Instruction:
    nxt = pc + 1

    def new_acc(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.append([])
        return nxt
    return new_acc


def i_append_acc(pc: int, span: Any, depth: int) -> Instruction:
    nxt = pc + 1
    where = -1 - depth

    def append_acc(env: list[Any], stack: list[Any], vm: Any) -> int:
        item = stack.pop()
        stack[where].append(item)
        return nxt
    return append_acc


def i_check_acc(pc: int, span: Any) -> Instruction:
    nxt = pc + 1

    def check_acc(env: list[Any], stack: list[Any], vm: Any) -> int:
        check_seq(stack[-1])
        return nxt
    return check_acc


# -- loops ------------------------------------------------------------------------------

def i_for_items(pc: int, span: Any, slot: int) -> Instruction:
    nxt = pc + 1

    def for_items(env: list[Any], stack: list[Any], vm: Any) -> int:
        items = stack.pop()
        if type(items) is not list and type(items) is not tuple:
            raise LashRuntimeError("NonListIteration", "`for` expects a list or tuple")
        stack.append(ListCursor(items, 0, env[slot]))
        return nxt
    return for_items


def i_for_range(pc: int, span: Any, slot: int, n: int) -> Instruction:
    nxt = pc + 1

    def for_range(env: list[Any], stack: list[Any], vm: Any) -> int:
        r = range_bounds(_take(stack, n))
        stack.append(RangeCursor(r.start, r.step, len(r), 0, env[slot]))
        return nxt
    return for_range


def i_for_next(pc: int, span: Any, slot: int, done: int) -> Instruction:
    nxt = pc + 1

    def for_next(env: list[Any], stack: list[Any], vm: Any) -> int:
        c = stack[-1]
        i = c.i
        if i >= c.n:
            return done
        m = ACTIVE
        left = m.steps - 1
        m.steps = left
        if left < 0:
            raise steps_exhausted()
        c.i = i + 1
        if type(c) is ListCursor:
            env[slot] = c.items[i]
        else:
            env[slot] = float(c.start + i * c.step)
        return nxt
    return for_next


def i_for_end(pc: int, span: Any, slot: int) -> Instruction:
    nxt = pc + 1

    def for_end(env: list[Any], stack: list[Any], vm: Any) -> int:
        env[slot] = stack.pop().saved
        return nxt
    return for_end


# -- effects ----------------------------------------------------------------------------

def i_call(pc: int, span: Any, site: str, module: str | None, operation: str, nargs: int) -> Instruction:
    resume = ~(pc + 1)

    def call(env: list[Any], stack: list[Any], vm: Any) -> int:
        args = _take(stack, nargs)
        mod = module if module is not None else receiver_module(stack.pop(), operation)
        # ``vm.suspend``, inline: one call a step fewer
        vm._effect = fx.ToolCall(vm.step(site), mod, operation, tool_input(args), span)
        vm.expect = WRAPPER
        return resume
    return call


def i_batch(pc: int, span: Any, site: str, plan: BatchPlan) -> Instruction:
    resume = ~(pc + 1)

    def batch(env: list[Any], stack: list[Any], vm: Any) -> int:
        pure: list[Any] = []  # pure values, and each fan-out's width, in walk order
        calls: list[Any] = []
        widths: list[int | None] = []

        def walk(node: Any) -> None:
            kind, data = node
            if kind == "pure":
                pure.append(data(env))
            elif kind == "call":
                c = plan.calls[data]
                calls.append((c, *c.target(env)))
                widths.append(None)
            elif kind == "fanout":
                c = plan.calls[data]
                targets = c.each(env)
                limit = vm.limits.max_batch_width
                if len(targets) > limit:
                    raise LimitExceeded(f"a fan-out formed {len(targets)} calls, more than "
                                        f"the limit of {limit} per batch (max_batch_width)")
                calls.extend((c, mod, args) for mod, args in targets)
                widths.extend([len(targets)] * len(targets))
                pure.append(len(targets))
            elif kind == "record":
                for _, item in data:
                    walk(item)
            else:
                for item in data:
                    walk(item)

        walk(plan.tree)
        step = vm.step(site)
        members = [fx.ToolCall(f"{step}:{i}", mod, c.operation, tool_input(args), c.span or span,
                               width)
                   for i, ((c, mod, args), width) in enumerate(zip(calls, widths))]
        stack.append(pure)
        vm.suspend(fx.ToolBatch(step, members, span), BATCH)
        return resume
    return batch


def i_batch_done(pc: int, span: Any, plan: BatchPlan) -> Instruction:
    nxt = pc + 1

    def batch_done(env: list[Any], stack: list[Any], vm: Any) -> int:
        answers = iter(stack.pop())
        pure = iter(stack.pop())
        failure: list[LashRuntimeError] = []

        def answer(call: BatchCall) -> Any:
            wrapper = next(answers)
            if not call.unwrap:
                return wrapper
            try:
                return ops.unwrap(wrapper, ops.MODULE_FAILURE)
            except LashRuntimeError as e:
                if not failure:
                    e.span = call.span
                    failure.append(e)
                return None

        def build(node: Any) -> Any:
            kind, data = node
            if kind == "pure":
                return next(pure)
            if kind == "call":
                return answer(plan.calls[data])
            if kind == "fanout":
                return [answer(plan.calls[data]) for _ in range(next(pure))]
            if kind == "record":
                out = {}
                for k, item in data:
                    out[k] = build(item)
                return out
            items = [build(item) for item in data]
            return items if kind == "list" else tuple(items)

        result = build(plan.tree)
        if failure:
            raise failure[0]
        stack.append(result)
        return nxt
    return batch_done


def i_await_start(pc: int, span: Any) -> Instruction:
    nxt = pc + 1

    def await_start(env: list[Any], stack: list[Any], vm: Any) -> int:
        stack.append(AwaitJoin(stack.pop(), []))
        return nxt
    return await_start


def i_await_next(pc: int, span: Any, site: str) -> Instruction:
    collect, after = ~(pc + 1), pc + 2

    def await_next(env: list[Any], stack: list[Any], vm: Any) -> int:
        join = stack[-1]
        k = len(join.results)
        if k < len(join.leaves):
            vm.suspend(fx.AwaitHandles([fx.AwaitHandle(vm.step(site), to_json(leaf), span)
                                        for leaf in join.leaves[k:]]), BATCH)
            return collect
        stack[-1] = join.rebuild()
        return after
    return await_next


def i_await_collect(pc: int, span: Any) -> Instruction:
    back = pc - 1

    def await_collect(env: list[Any], stack: list[Any], vm: Any) -> int:
        answers = stack.pop()
        stack[-1].results.extend(answers)
        return back
    return await_collect


def i_start(pc: int, span: Any, site: str, process: str, names: list[str]) -> Instruction:
    resume = ~(pc + 1)
    n = len(names)

    def start(env: list[Any], stack: list[Any], vm: Any) -> int:
        args = {k: to_json(v) for k, v in zip(names, _take(stack, n))}
        vm.suspend(fx.StartProcess(vm.step(site), process, args, span), HANDLE)
        return resume
    return start


def i_sleep(pc: int, span: Any, site: str, mode: str) -> Instruction:
    resume = ~(pc + 1)

    def sleep(env: list[Any], stack: list[Any], vm: Any) -> int:
        value = to_json(stack.pop())
        vm.suspend(fx.SleepEffect(vm.step(site), mode, value, span), NONE)
        return resume
    return sleep


def i_wait_signal(pc: int, span: Any, site: str, name: str) -> Instruction:
    resume = ~(pc + 1)

    def wait_signal(env: list[Any], stack: list[Any], vm: Any) -> int:
        ordinal = vm.signals.get(name, 0) + 1
        vm.signals[name] = ordinal
        vm.suspend(fx.WaitSignalEffect(vm.step(site), name, ordinal, span), PAYLOAD)
        return resume
    return wait_signal


def i_signal_run(pc: int, span: Any, site: str, name: str) -> Instruction:
    resume = ~(pc + 1)

    def signal_run(env: list[Any], stack: list[Any], vm: Any) -> int:
        payload = stack.pop()
        handle = stack.pop()
        if type(handle) is not dict or type(handle.get("id")) is not str or not _is_handle_record(handle):
            raise value_error("signal_run expects a process handle")
        vm.suspend(fx.SignalRunEffect(vm.step(site), to_json(handle), name, to_json(payload), span),
                   NONE)
        return resume
    return signal_run


def i_observe(pc: int, span: Any, site: str, kind: str) -> Instruction:
    resume = ~(pc + 1)

    def observe(env: list[Any], stack: list[Any], vm: Any) -> int:
        v = stack.pop()
        vm.suspend(fx.Observe(vm.step(site), kind, to_json(v), display(v), span), DISCARD)
        return resume
    return observe


def i_cancel(pc: int, span: Any, site: str) -> Instruction:
    resume = ~(pc + 1)

    def cancel(env: list[Any], stack: list[Any], vm: Any) -> int:
        handle = stack.pop()
        vm.suspend(fx.CancelHandle(vm.step(site), to_json(handle), span), DISCARD)
        return resume
    return cancel


def i_finish(pc: int, span: Any) -> Instruction:
    stop = ~pc

    def finish(env: list[Any], stack: list[Any], vm: Any) -> int:
        vm.suspend(fx.Finish(to_json(stack.pop()), span), TERMINAL)
        return stop
    return finish


def i_fail(pc: int, span: Any) -> Instruction:
    stop = ~pc

    def fail(env: list[Any], stack: list[Any], vm: Any) -> int:
        value = stack.pop()
        vm.suspend(fx.Fail(to_json(value), span, failure_text(value)), TERMINAL)
        return stop
    return fail


def i_end(pc: int, span: Any) -> Instruction:
    stop = ~pc

    def end(env: list[Any], stack: list[Any], vm: Any) -> int:
        vm.suspend(fx.Finish(None, span or (0, 0)), TERMINAL)
        return stop
    return end


FACTORIES: dict[str, Callable[..., Instruction]] = {
    name[2:]: fn for name, fn in list(globals().items()) if name.startswith("i_") and callable(fn)
}


def materialise(symbolic: list[tuple[Any, ...]], spans: list[Any]) -> list[Instruction]:
    """Resolve labels and build the closures of one entry."""
    code = []
    for pc, (name, *args) in enumerate(symbolic):
        args = [a.pc if isinstance(a, Label) else a for a in args]
        code.append(FACTORIES[name](pc, spans[pc], *args))
    return code


__all__ = ["materialise", "Label", "ListCursor", "RangeCursor", "AwaitJoin", "BatchCall",
           "BatchPlan", "WRAPPER", "BATCH", "HANDLE", "PAYLOAD", "NONE", "DISCARD", "TERMINAL"]
