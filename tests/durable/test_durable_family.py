"""Parents and children: handles name only a run's own children, a parent waiting for
its children holds no slot, nesting is bounded, one process never drives a run twice."""

from __future__ import annotations

import asyncio
import logging

import pytest

from lashflow import Engine, RunStatus, tool
from lashflow.interp.limits import Limits
from lashflow.testing import FakeClock

RUNS: list[str] = []
GATE: asyncio.Event | None = None


@tool
async def mark(name: str) -> str:
    RUNS.append(name)
    return name


@tool
async def gated(name: str) -> str:
    """Counts its concurrent callers, then waits for the test to open the gate."""
    RUNS.append(name)
    assert GATE is not None
    await GATE.wait()
    return name


@pytest.fixture(autouse=True)
def fresh() -> None:
    global GATE
    RUNS.clear()
    GATE = None



async def test_a_forged_handle_to_another_run_is_refused_and_names_it_not(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[mark]) as engine:
        victim = await engine.run('process p() { x = await tools.mark({name: "secret"})?\n'
                                  ' finish x }')
        assert victim.status is RunStatus.FINISHED
        for action, line in [("await", "r = await h"), ("cancel", "cancel h"),
                             ("signal_run", 'signal_run(h, "go", 1)')]:
            forged = f'h = {{ __handle__: "process", id: "{victim.run_id}" }}\n{line}\nfinish 1'
            outcome = await engine.run(forged)
            assert outcome.status is RunStatus.FAILED, (action, outcome)
            assert outcome.error is not None and outcome.error.code == "runtime_error"
            assert outcome.error.message == (f"{action} failed: not a handle of a run this "
                                             "process started")
            assert victim.run_id not in outcome.error.message
        # the victim was neither read, cancelled nor signalled
        assert (await engine.get(victim.run_id)).status is RunStatus.FINISHED
        assert (await engine.get_record(victim.run_id)).cancel_requested is False


async def test_a_run_awaiting_its_own_id_is_refused(backend_url: str) -> None:
    async with Engine(db=backend_url) as engine:
        outcome = await engine.run('h = { __handle__: "process", id: "me" }\nfinish await h',
                                   run_id="me")
        assert outcome.status is RunStatus.FAILED
        assert outcome.error is not None and "not a handle of a run this process started" in \
            outcome.error.message


async def test_own_children_are_awaited_cancelled_and_signalled(backend_url: str) -> None:
    source = """
process child(n: int) signals { go: any } {
  x = wait_signal("go")
  finish n + x
}
process sleeper() { sleep for "1h"
  finish 0 }
a = start child(n: 1)
b = start sleeper()
signal_run(a, "go", 41)
cancel b
finish [await a, await b]
"""
    async with Engine(db=backend_url) as engine:
        outcome = await engine.run(source)
        assert outcome.status is RunStatus.FINISHED, outcome
        assert outcome.result == [{"ok": True, "value": 42},
                                  {"ok": False, "error": "lashlang process was cancelled"}]


async def test_signal_run_to_a_finished_child_is_a_runtime_error(backend_url: str) -> None:
    source = 'process quick() { finish 1 }\nh = start quick()\nr = await h\n' \
             'signal_run(h, "go", 1)\nfinish r'
    async with Engine(db=backend_url) as engine:
        outcome = await engine.run(source)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error is not None and outcome.error.code == "runtime_error"
        assert outcome.error.message.startswith("signal_run failed: ")


async def test_parents_waiting_on_children_do_not_starve_them_of_slots(backend_url: str) -> None:
    """Two slots, four parents that each start and await a child: with parents holding
    their slots the children could never start."""
    source = ('process kid(n: int) { x = await tools.mark({name: "kid"})?\n finish n }\n'
              'process parent(n: int) { h = start kid(n: n)\n finish await h }')
    async with Engine(db=backend_url, tools=[mark], concurrency=2) as engine:
        outcomes = await asyncio.wait_for(asyncio.gather(
            *(engine.run(source, "parent", {"n": n}) for n in range(4))), timeout=60)
        assert [o.result for o in outcomes] == [{"ok": True, "value": n} for n in range(4)]
        assert RUNS == ["kid"] * 4


async def test_children_of_one_await_are_joined_together_and_all_named_in_the_waits(
        backend_url: str) -> None:
    source = """
process approval(req: str) signals { decision: any } {
  d = wait_signal("decision")
  finish d
}
h1 = start approval(req: "r1")
h2 = start approval(req: "r2")
finish await [h1, h2]
"""
    async with Engine(db=backend_url) as engine:
        outcome = await engine.run(source)
        assert outcome.status is RunStatus.WAITING
        kinds = sorted((w.kind, w.child_run_id or "") for w in outcome.waiting)
        children = sorted({w.child_run_id for w in outcome.waiting})
        assert len(children) == 2
        assert kinds == sorted([("child", c) for c in children] + [("signal", c) for c in children])
        for child in children:  # both children parked properly: nothing left running
            assert (await engine.get(child)).status is RunStatus.WAITING


async def test_nesting_by_start_is_bounded(backend_url: str) -> None:
    source = 'process deep(n: int) { h = start deep(n: n + 1)\n finish await h }'
    async with Engine(db=backend_url, limits=Limits(max_child_depth=8)) as engine:
        outcome = await asyncio.wait_for(engine.run(source, "deep", {"n": 0}), timeout=60)
        # the innermost allowed run fails at its `start`; each parent gets a failed child
        assert outcome.status is RunStatus.FINISHED
        inner = outcome.result
        depth = 0
        while isinstance(inner, dict) and inner.get("ok") is True:
            inner = inner["value"]
            depth += 1
        assert depth == 7 and inner["ok"] is False
        assert "more than 8 runs nested by `start`" in inner["error"]


async def test_a_self_starting_process_stops_at_the_default_depth(backend_url: str) -> None:
    source = 'process forever() { h = start forever()\n finish await h }'
    async with Engine(db=backend_url) as engine:
        outcome = await asyncio.wait_for(engine.run(source, "forever"), timeout=120)
        assert outcome.status is RunStatus.FINISHED
        runs = await engine.list()
        assert len(runs) == 65  # the top run and 64 nested below it


async def test_a_parent_cancelling_its_own_child_logs_no_lease_takeover(
        backend_url: str, caplog: pytest.LogCaptureFixture) -> None:
    source = 'process sleeper() { sleep for "1h"\n finish 0 }\n' \
             's = start sleeper()\ncancel s\nr = await s\nfinish r'
    async with Engine(db=backend_url) as engine:
        with caplog.at_level(logging.WARNING, logger="lashflow.engine"):
            outcome = await engine.run(source)
        assert outcome.status is RunStatus.FINISHED
        assert outcome.result == {"ok": False, "error": "lashlang process was cancelled"}
        assert "lease moved" not in caplog.text


async def test_one_process_never_drives_a_child_twice(backend_url: str) -> None:
    """``recover`` joins every orphan while the replayed parent's ``start`` spawns the same
    child: both go through one task registry, so the child's step runs once."""
    global GATE
    source = ('process kid() { x = await tools.gated({name: "kid"})?\n finish x }\n'
              'process parent() { h = start kid()\n finish await h }')
    path = backend_url
    clock = FakeClock(start=1_000.0)
    async with Engine(db=path, tools=[gated], clock=clock) as first:
        GATE = asyncio.Event()
        handle = await first.start(source, "parent")
        while RUNS != ["kid"]:
            await asyncio.sleep(0.01)
        # the process "dies": its leases are left to expire
        await first.driver.close(grace=0)
        assert handle.task is not None and handle.task.done()
    RUNS.clear()
    clock.advance(first.driver.lease_ttl + 1)  # the dead owner's leases have expired
    async with Engine(db=path, tools=[gated], clock=clock) as second:
        GATE.set()
        outcomes = await asyncio.wait_for(second.recover(), timeout=60)
        assert {o.status for o in outcomes} == {RunStatus.FINISHED}
        assert RUNS == ["kid"]  # one drive of the child, not two


async def test_a_child_gets_its_record_arguments_and_fails_with_its_own_text(
        backend_url: str) -> None:
    """A child's record argument keeps the order its parent wrote it in, as a value passed
    in the language does (a run's own input, JSON from outside, has its keys sorted), and
    a child that fails with a tuple is seen failing with the tuple's text."""
    source = ('process keys_of(b: dict) { finish keys(b) }\n'
              'process fails() { fail (1, "a") }\n'
              'process main(x: dict) {\n'
              '  r = await start keys_of(b: { z: 1, a: { y: 2, b: 3 }, m: 3 })?\n'
              '  f = await start fails()\n'
              '  finish [r, keys(x), f.error] }')
    async with Engine(db=backend_url) as engine:
        outcome = await engine.run(source, "main", {"x": {"z": 1, "a": 2}})
        assert outcome.status is RunStatus.FINISHED, outcome
        assert outcome.result == [["z", "a", "m"], ["a", "z"], '(1, "a")']
