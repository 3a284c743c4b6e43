"""Tools' rate limits and global concurrency, as a run's calls meet them (ADR 0036).

Before a batch of fresh calls runs, each call of a rate-limited tool *reserves* its
slot in the store's bucket (one statement per bucket and batch, ``store.ratelimits``).
A slot within ``RATE_HOLD`` is waited for inside the call; a later one parks the run
(a ``rate`` wait, ``until`` the slot) so it holds no worker slot meanwhile, and comes
due ``RATE_LEAD`` before the slot; the reservation rides in the run's waits, so the
next drive starts the call at its slot without taking again. A retry takes a slot of
its own after its backoff, and parks the run the same way when that slot is later
(ADR 0043): the attempts before it are in the journal, so the next drive goes on with
the retry.

A tool with ``global_concurrency`` takes one of its slots in the store for each attempt
and gives it back after; while none is free the attempt looks again (with a growing
pause, or as soon as a call of this process gives one back) for at most ``GLOBAL_HOLD``,
then parks its run with a ``rate`` wait in state ``global`` that comes due
``GLOBAL_RECHECK`` later: a call that must wait holds no worker slot.
"""

from __future__ import annotations

import asyncio
from shlex import quote
from typing import Any, Iterable

from ..store import Store
from ..tools.clock import Clock
from ..tools.definition import ToolDefinition
from .outcome import Wait
from ..slotted import Slotted

RATE_LEAD = 0.25  # a run parked for a slot comes due this long before it
# a slot this near is waited for in the call (the run keeps its worker slot); never less
# than the lead, or a run come due would park again
RATE_HOLD = RATE_LEAD
UNDEFINED_RECHECK = 30.0  # a call of a named limit nobody defined looks again after this
SLOT_POLL_MAX = 1.0  # the longest pause between looks for a free global slot
GLOBAL_HOLD = RATE_HOLD  # how long a call looks for a free global slot before it parks
GLOBAL_RECHECK = 1.0  # a run parked for a global slot looks again after this


def due_at(wait: Wait) -> float | None:
    """When a wait makes its run due: a rate wait a little before its slot."""
    if wait.until is None:
        return None
    if wait.kind == "rate" and wait.state is None:
        return wait.until - RATE_LEAD
    return wait.until


def reservations(waiting: Iterable[Any]) -> dict[str, float]:
    """Slots a run reserved before it parked: step key -> slot (from its stored waits)."""
    found: dict[str, float] = {}
    for wait in waiting:
        data = wait if isinstance(wait, dict) else wait.to_json()
        if data.get("kind") == "rate" and data.get("state") is None and data.get("until"):
            found[data["step"]] = float(data["until"])
    return found


class Plan(Slotted):
    """What a batch's limits decided: when each limited call may start (step key ->
    its slot), and the waits of calls that park the run."""

    __slots__ = ("slots", "waits")

    def __init__(
            self,
            slots: dict[str, float] | None = None,
            waits: list[Wait] | None = None,
    ) -> None:
        self.slots = {} if slots is None else slots
        self.waits = [] if waits is None else waits


async def _sleep_until(clock: Clock, until: float, cancel: asyncio.Event | None,
                       woken: asyncio.Event | None = None) -> bool:
    """Sleep until ``until`` (or ``woken``); False if ``cancel`` was set meanwhile."""
    while (seconds := until - clock.now()) > 0:  # a timer may fire a hair early
        if cancel is not None and cancel.is_set():
            return False
        if cancel is None and woken is None:
            await clock.sleep(seconds)
            continue
        sleeper = asyncio.ensure_future(clock.sleep(seconds))
        others = [asyncio.ensure_future(event.wait()) for event in (cancel, woken) if event]
        try:
            await asyncio.wait([sleeper, *others], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, *others):
                task.cancel()
        if woken is not None and woken.is_set():
            break
    return cancel is None or not cancel.is_set()


class CallLimiter:
    """Engine-wide: takes slots from the store for the calls of every run driven here."""

    def __init__(self, store: Store, clock: Clock, owner: str) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.metrics: Any = None  # the engine's Metrics, or None (nothing counted)
        self._freed: dict[str, asyncio.Event] = {}  # tool -> set when a slot comes back here

    async def plan(self, run_id: str, calls: list[tuple[str, ToolDefinition]],
                   reserved: dict[str, float]) -> Plan:
        """Reserve a slot for each rate-limited call of a batch (``calls``: step key and
        tool); those whose slot is beyond ``RATE_HOLD`` become waits."""
        plan = Plan()
        groups: dict[str, list[tuple[str, ToolDefinition]]] = {}
        tools: dict[str, tuple[str, str]] = {}  # step -> (tool, bucket)
        counted: set[str] = set()  # calls counted when they parked: not again
        for step, definition in calls:
            bucket = definition.bucket
            if bucket is None:
                continue
            tools[step] = (definition.qualified_name, bucket)
            if step in reserved:  # taken before the run parked
                plan.slots[step] = reserved.pop(step)
                counted.add(step)
            else:
                groups.setdefault(bucket, []).append((step, definition))
        for bucket, members in groups.items():
            take = await self.store.take_rate(bucket, members[0][1].rate, len(members),
                                              self.clock.now())
            if take is None:
                now = self.clock.now()  # a named limit nobody defined: look again later
                plan.waits += [Wait(kind="rate", step=step, tool=tools[step][0], limit=bucket,
                                    until=now + UNDEFINED_RECHECK, state="undefined",
                                    resolve=f"lashflow ratelimit set {quote(bucket)} N/PERIOD")
                               for step, _ in members]
                continue
            for index, (step, _) in enumerate(members):
                plan.slots[step] = take.first + index * take.spacing
        now = self.clock.now()
        for step, slot in list(plan.slots.items()):
            tool, bucket = tools[step]
            if slot - now <= RATE_HOLD:
                if step not in counted:
                    self._count(tool, "held" if slot > now else None)
                continue
            del plan.slots[step]
            if step not in counted:
                self._count(tool, "parked")
            plan.waits.append(Wait(kind="rate", step=step, tool=tool, until=slot, limit=bucket,
                                   resolve=f"lashflow resume {quote(run_id)}"))
        return plan

    def _count(self, tool: str, how: str | None) -> None:
        if how is not None and self.metrics is not None:
            self.metrics.add("lashflow_rate_limited_calls_total", (("tool", tool),
                                                                   ("how", how)))

    def gate(self, definition: ToolDefinition, run_id: str, step: str, generation: int,
             slot: float | None) -> "StoreGate | None":
        """The gate of one call's attempts, if its tool has a limit held in the store."""
        if definition.bucket is None and definition.global_concurrency is None:
            return None
        return StoreGate(self, definition, run_id, step, generation, slot)

    async def slot_for_retry(self, definition: ToolDefinition) -> float | None:
        """A retry's own rate slot (None: its named limit is not defined: no wait)."""
        bucket = definition.bucket
        assert bucket is not None
        take = await self.store.take_rate(bucket, definition.rate, 1, self.clock.now())
        return None if take is None else take.first

    async def hold(self, definition: ToolDefinition, run_id: str, step: str, generation: int,
                   cancel: asyncio.Event | None, give_up: float) -> bool | None:
        """Take one of the tool's global slots, waiting while none is free: False if
        cancelled first, None if none came free by ``give_up``."""
        name = definition.qualified_name
        limit = definition.global_concurrency
        assert limit is not None
        pause = 0.02
        while True:
            if await self.store.take_slot(name, limit, run_id, step, self.owner, generation,
                                          self.clock.now()):
                return True
            now = self.clock.now()
            if now >= give_up:
                return None
            freed = self._freed.setdefault(name, asyncio.Event())
            if not await _sleep_until(self.clock, min(now + pause, give_up), cancel, freed):
                return False
            if freed.is_set():
                self._freed.pop(name, None)
            pause = min(pause * 2, SLOT_POLL_MAX)

    async def release(self, definition: ToolDefinition, run_id: str, step: str) -> None:
        name = definition.qualified_name
        await self.store.release_slot(name, run_id, step, self.owner)
        freed = self._freed.pop(name, None)
        if freed is not None:
            freed.set()


class StoreGate:
    """``tools.limits.CallGate`` over the store: a call's rate slot (reserved before it
    started, or taken by a retry) and, per attempt, a slot of global concurrency."""

    __slots__ = ("limiter", "definition", "run_id", "step", "generation", "slot", "holding",
                 "taken", "parked")

    def __init__(self, limiter: CallLimiter, definition: ToolDefinition, run_id: str,
                 step: str, generation: int, slot: float | None) -> None:
        self.limiter = limiter
        self.definition = definition
        self.run_id = run_id
        self.step = step
        self.generation = generation
        self.slot = slot  # the first attempt's, reserved by ``CallLimiter.plan``
        self.holding = False
        self.taken: float | None = None  # the slot of the attempt let in last
        # the wait of a call that parks its run instead of its next attempt (``enter``
        # said no without a cancel): the tool runner parks the run on it
        self.parked: Wait | None = None

    async def enter(self, attempt: int, cancel: asyncio.Event | None) -> bool:
        """Let the attempt in at its slot, holding a global slot; False: it is not to
        run (cancelled, or ``parked`` says until when its run parks)."""
        slot, self.slot = self.slot, None
        definition, limiter = self.definition, self.limiter
        tool = definition.qualified_name
        if slot is None and definition.bucket is not None:  # a retry: a slot of its own
            slot = await limiter.slot_for_retry(definition)
            if slot is not None:
                later = slot - limiter.clock.now()
                if later > RATE_HOLD:
                    limiter._count(tool, "parked")
                    return self._park(Wait(kind="rate", step=self.step, tool=tool, until=slot,
                                           limit=definition.bucket,
                                           resolve=f"lashflow resume {quote(self.run_id)}"))
                limiter._count(tool, "held" if later > 0 else None)
        if slot is not None:
            if not await _sleep_until(limiter.clock, slot, cancel):
                return False
            self.taken = slot
        if definition.global_concurrency is not None:
            held = await limiter.hold(definition, self.run_id, self.step, self.generation,
                                      cancel, limiter.clock.now() + GLOBAL_HOLD)
            if held is None:
                return self._park(Wait(
                    kind="rate", step=self.step, tool=tool, state="global",
                    until=limiter.clock.now() + GLOBAL_RECHECK,
                    resolve=f"lashflow resume {quote(self.run_id)}"))
            if not held:
                return False
            self.holding = True
        return True

    def _park(self, wait: Wait) -> bool:
        self.parked = wait
        return False

    async def leave(self) -> None:
        if self.holding:
            self.holding = False
            await self.limiter.release(self.definition, self.run_id, self.step)


__all__ = ["GLOBAL_HOLD", "GLOBAL_RECHECK", "RATE_HOLD", "RATE_LEAD", "CallLimiter", "Plan",
           "StoreGate", "due_at", "reservations"]
