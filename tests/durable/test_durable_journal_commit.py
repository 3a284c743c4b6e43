"""``RunJournal.commit`` (ADR 0048): held outcomes go first in the write, the held lists
are taken (not copied), the caller's lists are written as they are, and a tuple becomes
a list; ``GroupCommit`` hands a queued writer its future itself."""

from __future__ import annotations

import asyncio
from typing import Any

from lashflow.durable.events import Events
from lashflow.durable.journal import RunJournal
from lashflow.durable.replay import ReplayMachine
from lashflow.store import AttemptRecord, Commit, StepRecord
from lashflow.store.group_commit import GroupCommit
from lashflow.tools.clock import RealClock


class Recording:
    """A store that keeps the commits it is given."""

    def __init__(self) -> None:
        self.commits: list[Commit] = []

    async def commit(self, change: Commit) -> None:
        self.commits.append(change)


def journal() -> tuple[RunJournal, Recording, ReplayMachine]:
    store, machine = Recording(), ReplayMachine("r", [], [])
    return RunJournal(store, machine, 3, RealClock(), Events()), store, machine  # type: ignore[arg-type]


def step(key: str) -> StepRecord:
    return StepRecord("r", key, "tool", seq=1)


async def test_held_outcomes_lead_the_write_and_are_taken() -> None:
    j, store, machine = journal()
    held_step, held_attempt = step("a"), AttemptRecord("r", "a", 1, "ok")
    machine.hold([held_step], [held_attempt])
    mine = [step("b")]
    await j.commit(mine, (AttemptRecord("r", "b", 1, "ok"),))
    [change] = store.commits
    assert (change.run_id, change.generation) == ("r", 3)
    assert [s.step_key for s in change.steps] == ["a", "b"]
    assert [a.step_key for a in change.attempts] == ["a", "b"]
    assert [s.step_key for s in mine] == ["b"]  # the caller's list is untouched
    assert machine.held_steps == [] and machine.held_attempts == []
    assert change.steps is not machine.held_steps  # the machine holds anew, apart

    machine.hold([], [AttemptRecord("r", "c", 1, "ok")])  # attempts alone are held too
    await j.commit()
    assert [a.step_key for a in store.commits[1].attempts] == ["c"]
    assert store.commits[1].steps == []


async def test_without_held_outcomes_the_callers_lists_are_written_as_they_are() -> None:
    j, store, _ = journal()
    steps: list[StepRecord] = [step("a")]
    await j.commit(steps)
    assert store.commits[0].steps is steps and store.commits[0].attempts == []
    await j.commit((step("b"),), ())
    assert type(store.commits[1].steps) is list and type(store.commits[1].attempts) is list


async def test_a_queued_write_is_awaited_as_its_future() -> None:
    written: list[list[Any]] = []

    async def apply_group(ops: list[Any]) -> list[tuple[bool, Any]]:
        written.append(ops)
        return [(True, op * 2) for op in ops]

    group = GroupCommit(apply_group, inline=lambda op: (True, "inline"))
    first, second = group.submit(1), group.submit(2)  # queued by the call, one group
    assert isinstance(first, asyncio.Future) and group.flusher is not None
    assert await asyncio.gather(first, second) == [2, 4] and written == [[1, 2]]
    assert await group.submit(3, alone=True) == "inline"  # the lone writer, nothing queued
    queued = group.submit(4)
    assert await group.submit(5, alone=True) == 10  # something queued: the queue, not inline
    assert await queued == 8 and written[-1] == [4, 5]
