"""Deferred completion: first writer wins between resolver, deadline and cancel."""

import asyncio
from datetime import timedelta

import pytest

from lashflow.testing import FakeClock
from lashflow.tools import (
    CompletionBook, CompletionError, DispatchCall, Dispatcher, InMemoryCompletionStorage, MemoryJournal,
    PendingCompletion, ResolutionKind, ToolCall, ToolRegistry, ToolResult, derive_key, tool,
)

SECRET = b"k" * 32


def make_book(clock=None, runs=None, cancel_external=None):
    storage = InMemoryCompletionStorage(runs)
    return CompletionBook(storage, SECRET, clock=clock or FakeClock(), cancel_external=cancel_external), storage


async def test_resolve_before_wait_is_stored_and_delivered():
    book, storage = make_book()
    key = book.key_for("r1", "s:0")
    accepted = await book.resolve(key, ToolResult.ok({"approved": True}))
    assert accepted.kind == ResolutionKind.OK
    assert (await storage.get("r1", "s:0")).waiting is False  # buffered, nobody waits yet
    delivered = await book.begin_wait("r1", "s:0", pending=PendingCompletion().with_deadline(60), deadline_at=60.0)
    assert delivered is not None and delivered.value == {"approved": True}


async def test_double_resolution_first_wins():
    book, _ = make_book()
    key = book.key_for("r1", "s:0")
    await book.begin_wait("r1", "s:0")
    await book.resolve(key, ToolResult.ok(1))
    with pytest.raises(CompletionError) as info:
        await book.resolve(key, ToolResult.err("late"))
    assert info.value.code == "completion_already_resolved"
    assert info.value.winner.kind == ResolutionKind.OK and info.value.winner.value == 1
    assert (await book.poll("r1", "s:0")).value == 1


async def test_unknown_keys_write_nothing():
    book, storage = make_book(runs={"r1", "r2"})
    storage.mark_cancelled("r2")
    good = book.key_for("r1", "s:0")
    bad = [
        "lfk_forged.key", good[:-2], derive_key(b"o" * 32, "r1", "s:0"),  # other database's secret
        book.key_for("r2", "s:0"),  # cancelled run
        book.key_for("nope", "s:0"),  # unknown run
        "not-a-key",
    ]
    for key in bad:
        with pytest.raises(CompletionError) as info:
            await book.resolve(key, ToolResult.ok(1))
        assert info.value.code == "unknown_completion_key" and str(info.value) == "unknown completion key"
    assert await storage.get("r1", "s:0") is None and await storage.get("r2", "s:0") is None
    assert await storage.get("nope", "s:0") is None


async def test_expired_wins_even_after_timeout_recorded_and_over_already_resolved():
    clock = FakeClock()
    book, _ = make_book(clock)
    key = book.key_for("r1", "s:0")
    assert await book.begin_wait("r1", "s:0", deadline_at=10.0) is None
    clock.advance(10.0)
    # nobody recorded the timeout yet (no worker alive): the late resolve records it
    with pytest.raises(CompletionError) as info:
        await book.resolve(key, ToolResult.ok("late"))
    assert info.value.code == "completion_expired" and info.value.winner.kind == ResolutionKind.TIMEOUT
    assert info.value.winner.at == 10.0
    with pytest.raises(CompletionError) as again:
        await book.resolve(key, ToolResult.ok("later"))
    assert again.value.code == "completion_expired"
    assert (await book.poll("r1", "s:0")).kind == ResolutionKind.TIMEOUT

    # a resolver that won before the deadline: after it, expired wins over already-resolved
    key2 = book.key_for("r1", "s:1")
    await book.begin_wait("r1", "s:1", deadline_at=clock.now() + 5)
    await book.resolve(key2, ToolResult.ok("in time"))
    with pytest.raises(CompletionError) as before_deadline:
        await book.resolve(key2, ToolResult.ok("twice"))
    assert before_deadline.value.code == "completion_already_resolved"
    clock.advance(5)
    with pytest.raises(CompletionError) as after_deadline:
        await book.resolve(key2, ToolResult.ok("thrice"))
    assert after_deadline.value.code == "completion_expired"
    assert (await book.poll("r1", "s:1")).value == "in time"  # the outcome stays what won


async def test_deadline_is_journaled_once_and_survives_resume():
    clock = FakeClock()
    book, _ = make_book(clock)
    await book.begin_wait("r1", "s:0", deadline_at=30.0)
    clock.advance(20)
    # a resumed run registers the wait again with a later deadline: the first one holds
    assert await book.begin_wait("r1", "s:0", deadline_at=50.0) is None
    clock.advance(10)
    assert (await book.poll("r1", "s:0")).kind == ResolutionKind.TIMEOUT


async def test_resolution_while_no_waiter_is_stored():
    clock = FakeClock()
    book, _ = make_book(clock)
    await book.begin_wait("r1", "s:0", deadline_at=100.0)
    await book.resolve(book.key_for("r1", "s:0"), ToolResult.err({"why": "declined"}, code="declined"))
    clock.advance(1000)  # the worker comes back after the deadline: the resolution was first
    resolution = await book.poll("r1", "s:0")
    assert resolution.kind == ResolutionKind.ERR and resolution.code == "declined"


async def test_timeout_then_cancel_then_resolver():
    clock = FakeClock()
    hooks = []

    async def cancel_external(module, tool_name, key):
        hooks.append((module, tool_name, key))

    book, _ = make_book(clock, cancel_external=cancel_external)
    await book.begin_wait("r1", "s:0", deadline_at=1.0, module="tools", tool="t")
    clock.advance(1)
    assert (await book.cancel_wait("r1", "s:0")).kind == ResolutionKind.TIMEOUT
    assert hooks == []  # the cancel lost: no external cancel

    await book.begin_wait("r1", "s:1", module="tools", tool="t")
    assert (await book.cancel_wait("r1", "s:1")).kind == ResolutionKind.CANCELLED
    assert hooks == [("tools", "t", book.key_for("r1", "s:1"))]
    with pytest.raises(CompletionError) as info:
        await book.resolve(book.key_for("r1", "s:1"), ToolResult.ok(1))
    assert info.value.code == "completion_already_resolved" and info.value.winner.kind == ResolutionKind.CANCELLED

    await book.begin_wait("r1", "s:2", module="tools", tool="t")
    await book.resolve(book.key_for("r1", "s:2"), ToolResult.ok(2))
    assert (await book.cancel_wait("r1", "s:2")).value == 2
    assert len(hooks) == 1


async def test_cancel_run_follows_on_cancel():
    hooks = []

    async def cancel_external(module, tool_name, key):
        hooks.append(key)

    book, storage = make_book(cancel_external=cancel_external)
    await book.begin_wait("r1", "a", pending=PendingCompletion(), module="tools", tool="t")
    await book.begin_wait("r1", "b", pending=PendingCompletion().ignore_on_cancel(), module="tools", tool="t")
    await book.begin_wait("r2", "a", module="tools", tool="t")
    storage.mark_cancelled("r1")
    settled = await book.cancel_run("r1")
    assert {k: v.kind for k, v in settled.items()} == {"a": ResolutionKind.CANCELLED, "b": ResolutionKind.CANCELLED}
    assert hooks == [book.key_for("r1", "a")]  # IGNORE leaves the external work alone
    with pytest.raises(CompletionError) as info:
        await book.resolve(book.key_for("r1", "a"), ToolResult.ok(1))
    assert info.value.code == "unknown_completion_key"  # a cancelled run's key
    assert await book.poll("r2", "a") is None


# -- through the dispatcher -------------------------------------------------------------


def approval_tool(pending, hooks=None, keys=None):
    async def hook(key):
        hooks.append(key)

    @tool(name="approve", cancel_external=hook if hooks is not None else None)
    async def approve(call: ToolCall) -> ToolResult:
        key = await call.context.completion_key()
        if keys is not None:
            await keys.put(key)
        return ToolResult.pending(pending)

    return approve


def setup(pending, hooks=None, keys=None):
    clock = FakeClock()
    registry = ToolRegistry([approval_tool(pending, hooks, keys)])
    book = CompletionBook(InMemoryCompletionStorage(), SECRET, clock=clock, cancel_external=registry.cancel_external)
    return clock, book, Dispatcher(registry, clock=clock, completions=book)


@pytest.mark.parametrize("fail_turn", [False, True])
async def test_timeout_modes(fail_turn):
    pending = PendingCompletion().with_deadline(timedelta(seconds=30))
    if fail_turn:
        pending = pending.fail_turn_on_timeout()
    clock, book, dispatcher = setup(pending)
    journal = MemoryJournal()
    task = asyncio.ensure_future(dispatcher.call(DispatchCall("tools", "approve", {}, "s:0"), run_id="r",
                                                 journal=journal, wait_pending=True))
    await clock.wait_for_sleepers(1)
    clock.advance(29.9)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.1)
    result = await asyncio.wait_for(task, 5)
    outcome = result.outcome
    assert outcome.status == "failed" and outcome.code == "tool_completion_timeout"
    assert outcome.fail_run is fail_turn
    assert result.wrapper == {"ok": False, "error": "pending tool completion timed out"}
    assert journal.attempts("s:0")[0].outcome == outcome  # the settled outcome replaced the pending record


@pytest.mark.parametrize("ignore", [False, True])
async def test_cancel_modes(ignore):
    pending = PendingCompletion().ignore_on_cancel() if ignore else PendingCompletion()
    hooks: list[str] = []
    clock, book, dispatcher = setup(pending, hooks)
    cancel = asyncio.Event()
    task = asyncio.ensure_future(dispatcher.call(DispatchCall("tools", "approve", {}, "s:0"), run_id="r",
                                                 cancel=cancel, wait_pending=True))
    for _ in range(100):
        if (await book.storage.get("r", "s:0")) is not None:
            break
        await asyncio.sleep(0)
    cancel.set()
    result = await asyncio.wait_for(task, 5)
    assert result.outcome.status == "cancelled"
    assert result.wrapper == {"ok": False, "error": "pending tool completion cancelled"}
    assert hooks == ([] if ignore else [book.key_for("r", "s:0")])


async def test_resolution_racing_the_pending_return():
    keys: asyncio.Queue = asyncio.Queue()
    resolved = asyncio.Event()
    clock = FakeClock()
    registry = ToolRegistry()
    book = CompletionBook(InMemoryCompletionStorage(), SECRET, clock=clock)

    @tool(name="approve")
    async def approve(call: ToolCall) -> ToolResult:
        await keys.put(await call.context.completion_key())
        await resolved.wait()  # the resolver answers before this attempt returns Pending
        return ToolResult.pending(PendingCompletion().with_deadline(60))

    registry.add(approve)
    dispatcher = Dispatcher(registry, clock=clock, completions=book)

    async def resolver():
        key = await keys.get()
        await book.resolve(key, ToolResult.ok({"approved": "early"}))
        resolved.set()

    resolving = asyncio.ensure_future(resolver())
    # no wait_pending: the resolution must be picked up when the wait begins
    result = await asyncio.wait_for(dispatcher.call(DispatchCall("tools", "approve", {}, "s:0"), run_id="r"), 5)
    await resolving
    assert result.outcome.status == "ok" and result.outcome.value == {"approved": "early"}
    assert result.projected == '{"approved":"early"}'


async def test_resolver_wakes_a_waiting_call():
    keys: asyncio.Queue = asyncio.Queue()
    clock, book, dispatcher = setup(PendingCompletion(), keys=keys)
    task = asyncio.ensure_future(dispatcher.call(DispatchCall("tools", "approve", {}, "s:0"), run_id="r",
                                                 wait_pending=True))
    key = await keys.get()
    for _ in range(100):
        record = await book.storage.get("r", "s:0")
        if record is not None and record.waiting:
            break
        await asyncio.sleep(0)
    assert not task.done()
    await book.resolve(key, ToolResult.ok("yes"))
    result = await asyncio.wait_for(task, 5)
    assert result.outcome.value == "yes" and result.outcome.key == key


async def test_parked_pending_outcome_without_waiting():
    clock, book, dispatcher = setup(PendingCompletion().with_deadline(10))
    result = await dispatcher.call(DispatchCall("tools", "approve", {}, "s:0"), run_id="r")
    assert result.outcome.status == "pending" and result.projected is None
    record = await book.storage.get("r", "s:0")
    assert record.waiting and record.deadline_at == 10.0 and (record.module, record.tool) == ("tools", "approve")
