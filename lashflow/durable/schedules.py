"""Schedules at run time: the Python API (``engine.schedules``) and the firing that every
worker does (``Scheduler.fire_due``, looped by ``Scheduler.loop`` beside the worker).

A schedule's row holds its definition (the spec and what to start: a stored source, a
process, an input) and its state (the next tick, the buffer of held-back ticks, the
last run it started, counts of fired, missed and skipped ticks). Every change is a
compare-and-swap on the row's version that also inserts the runs it starts, whose ids
are derived from the schedule and the tick (``tick_id``): any number of workers may
fire the same schedule and each tick gets exactly one run (see ``store.schedules``).

Ticks are written ahead (ADR 0030, amendment): a schedule whose overlap policy is
``allow`` has the runs of its ticks due in the next ``ahead`` seconds stored early, as
queued runs not claimable before their fire time (``wake_at``, the "not before" a
debounced run uses too), so at the tick they are there to claim. Other policies must
see the last run at the tick, so they fire at the tick. Pausing, updating or deleting a
schedule takes back its runs written ahead for ticks that have not come.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

from ..errors import DbError, LashflowError, ScheduleExists, ScheduleInvalid, UnknownSchedule
from ..schedules import ScheduleSpec, decide, plan, tick_id
from ..schedules.spec import check_name, parse_duration, parse_moment, zone_of
from ..schedules.ticks import fire_at, next_ticks, tick_after, ticks_from
from ..slotted import replace
from ..states import SETTLED, RunStatus
from ..store import RunRecord, RunSummary, ScheduleRow, Store
from ..tools.clock import Clock

log = logging.getLogger("lashflow.engine")

BUFFER_RECHECK = 1.0  # seconds between looks at a schedule whose next tick waits in its buffer
MAX_BACKFILL = 10_000  # ticks one backfill may cover
SWAP_TRIES = 20  # an API change retried this often when a worker moves the row meanwhile
AHEAD = 10.0  # seconds before their fire time the runs of ``allow`` schedules are written
Cancel = Callable[[str, "str | None"], Awaitable[Any]]


@dataclass(slots=True)
class ScheduleInfo:
    """A schedule as ``show`` and the HTTP API present it. Times are epoch seconds;
    ``next_fires`` are the next ticks' fire times (jitter included)."""

    name: str
    spec: ScheduleSpec
    process: str | None
    file: str | None
    input: Any
    paused: bool
    note: str | None
    next_fires: list[float]
    last_run: str | None
    fired: int
    missed: int
    skipped: int
    buffered: int
    created_at: float
    updated_at: float
    runs: list[RunSummary] = field(default_factory=list)
    queue: dict[str, Any] | None = None  # the queue its runs enter (name, key, priority)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "spec": self.spec.to_json(), "describe": self.spec.describe(),
            "process": self.process, "file": self.file, "input": self.input,
            "paused": self.paused, "note": self.note,
            "next_fires": [_iso(t, self.spec.tz) for t in self.next_fires],
            "last_run": self.last_run, "fired": self.fired, "missed": self.missed,
            "skipped": self.skipped, "buffered": self.buffered,
            "created_at": self.created_at, "updated_at": self.updated_at,
            "runs": [{"run_id": r.run_id, "status": r.status, "created_at": r.created_at}
                     for r in self.runs],
            "queue": self.queue,
        }


def _iso(moment: float, zone: str) -> str:
    return datetime.fromtimestamp(moment, zone_of(zone)).isoformat()


@dataclass(slots=True)
class FireReport:
    """What one pass over the due schedules did (this worker's share of it)."""

    started: int = 0
    missed: int = 0
    skipped: int = 0
    lags: list[float] = field(default_factory=list)  # tick -> its run claimable, seconds
    fire_times: list[float] = field(default_factory=list)  # of the ticks of ``lags``
    write_seconds: float = 0.0  # spent in the transactions that stored the runs
    lost_races: int = 0  # schedules another worker fired first
    looked_at: int = 0  # due schedules read (the pass's limit reached: more may be due)


@dataclass(slots=True)
class _Firing:
    """One schedule's part of a pass: the row to swap in, the runs to insert, the fire
    times of the ticks that start now, counts, and a run to cancel (cancel-other)."""

    row: ScheduleRow
    changed: ScheduleRow
    runs: list[RunRecord]
    fired: list[float]
    missed: int
    skipped: int
    cancel: str | None
    window: float


@dataclass(slots=True)
class BackfillReport:
    started: int
    buffered: int
    skipped: int


def spec_from_options(*, cron: str | None = None, every: str | float | None = None,
                      tz: str = "UTC", jitter: str | float = 0,
                      overlap: str = "skip", catchup_window: str | float = 60,
                      start: str | float | None = None,
                      end: str | float | None = None) -> ScheduleSpec:
    """A spec from what a user typed (durations as ``"5m"``, times as RFC 3339)."""
    return ScheduleSpec(
        cron=cron, every=None if every is None else parse_duration(every, "--every"), tz=tz,
        jitter=parse_duration(jitter, "--jitter"), overlap=overlap,
        catchup_window=parse_duration(catchup_window, "--catchup-window"),
        start=None if start is None else parse_moment(start, tz, "--start"),
        end=None if end is None else parse_moment(end, tz, "--end"))


def _state(row: ScheduleRow) -> dict[str, Any]:
    state = dict(row.state)
    state.setdefault("buffer", [])
    for counter in ("fired", "missed", "skipped"):
        state.setdefault(counter, 0)
    return state


def _due_at(name: str, spec: ScheduleSpec, state: dict[str, Any], now: float,
            ahead: float) -> float | None:
    """When a pass has work for the schedule: ``ahead`` seconds before its next tick
    fires for an ``allow`` schedule (written ahead), at the fire time for the others."""
    following = state.get("next_tick")
    due = None if following is None else fire_at(name, spec, following) - (
        ahead if spec.overlap == "allow" else 0.0)
    if state["buffer"]:
        due = now + BUFFER_RECHECK if due is None else min(due, now + BUFFER_RECHECK)
    return due


class Scheduler:
    """Fires due ticks and carries out what the API asks of schedules. ``cancel`` is the
    engine's cancel (``cancel-other`` stops the running run through it)."""

    def __init__(self, store: Store, clock: Clock, cancel: Cancel, metrics: Any = None,
                 ahead: float = AHEAD) -> None:
        self.store = store
        self.clock = clock
        self.cancel = cancel
        self.ahead = ahead
        self.metrics = metrics  # telemetry.Metrics, when the engine counts
        self._specs: dict[tuple[Any, ...], ScheduleSpec] = {}

    def _spec(self, row: ScheduleRow) -> ScheduleSpec:
        """The row's spec, parsed (and checked) once per distinct spec: a pass over
        thousands of schedules that tick alike parses one."""
        data = row.definition["spec"]
        key = tuple(sorted(data.items()))
        spec = self._specs.get(key)
        if spec is None:
            if len(self._specs) > 10_000:
                self._specs.clear()
            spec = self._specs[key] = ScheduleSpec.from_json(data)
        return spec

    # -- firing ----------------------------------------------------------------------------
    async def fire_due(self, *, limit: int = 500, batch: int = 250) -> FireReport:
        """One pass: fire every due tick of up to ``limit`` due schedules, ``batch``
        schedules to a transaction (a schedule another worker fired meanwhile is left to
        it). The schedules go in name order, so two workers' transactions lock their
        rows in the same order and never deadlock."""
        now = self.clock.now()
        rows = sorted(await self.store.due_schedules(now, limit), key=lambda r: r.name)
        report = FireReport(looked_at=len(rows))
        if not rows:
            return report
        # whether the last run has settled matters only where a policy holds ticks back
        lasts = [str(r.state["last_run"]) for r in rows if r.state.get("last_run") and (
            r.state.get("buffer") or r.definition["spec"].get("overlap") != "allow")]
        statuses = await self.store.run_statuses(lasts)
        firings = []
        for row in rows:
            try:
                firings.append(self._firing(row, now, statuses))
            except LashflowError as exc:  # one schedule's trouble must not stop the rest
                log.error("schedule %s: %s", row.name, exc.message)
        for start in range(0, len(firings), batch):
            chunk = firings[start:start + batch]
            began = self.clock.now()
            done = await self.store.swap_schedules(
                [(f.changed, f.row.version, f.runs) for f in chunk])
            stored = self.clock.now()
            report.write_seconds += stored - began
            for firing, won in zip(chunk, done):
                if won:
                    await self._fired(firing, stored, report)
                else:
                    report.lost_races += 1
        return report

    def _firing(self, row: ScheduleRow, now: float, statuses: dict[str, str]) -> "_Firing":
        """What firing ``row`` at ``now`` writes (decided, not yet written)."""
        spec = self._spec(row)
        state = _state(row)
        due = plan(row.name, spec, state.get("next_tick"), now)
        last = state.get("last_run")
        busy = last is not None and statuses.get(last, RunStatus.FINISHED) not in SETTLED
        decision = decide(spec.overlap, busy, state["buffer"], due.fire)
        runs = [self._run_for(row, tick, now) for tick in decision.start]
        following, fired = due.next_tick, [fire_at(row.name, spec, tick)
                                           for tick in decision.start if tick in due.fire]
        while spec.overlap == "allow" and following is not None and len(runs) < 1000:
            at = fire_at(row.name, spec, following)  # in the future: plan stopped there
            if at > now + self.ahead:
                break
            runs.append(self._run_for(row, following, now, not_before=at))
            fired.append(at)
            following = tick_after(spec, following)
        state.update(next_tick=following, buffer=decision.buffered,
                     fired=state["fired"] + len(runs), missed=state["missed"] + due.missed,
                     skipped=state["skipped"] + decision.skipped)
        if runs:
            state["last_run"] = runs[-1].run_id
        changed = replace_row(row, state=state,
                              due_at=_due_at(row.name, spec, state, now, self.ahead),
                              updated_at=now)
        cancel = None
        if decision.cancel:  # the run going when the newer tick came: this pass's or the last
            cancel = runs[-1].run_id if runs and not busy else last
        return _Firing(row, changed, runs, fired, due.missed, decision.skipped, cancel,
                       spec.catchup_window)

    async def _fired(self, firing: "_Firing", stored: float, report: FireReport) -> None:
        """Account for a firing once written; ``stored``: when its transaction committed."""
        name = firing.row.name
        lags = [max(0.0, stored - due) for due in firing.fired]
        report.started += len(firing.runs)
        report.missed += firing.missed
        report.skipped += firing.skipped
        report.lags += lags
        report.fire_times += firing.fired
        if self.metrics is not None:
            self.metrics.schedule_fired(name, lags, len(firing.runs), firing.missed,
                                        firing.skipped)
        if firing.missed:
            log.warning("schedule %s: %d tick(s) missed (more than %gs late)", name,
                        firing.missed, firing.window)
        if firing.cancel is not None:
            await self.cancel(firing.cancel, f"schedule {name}: a newer tick (cancel-other)")

    def _run_for(self, row: ScheduleRow, tick: float, now: float, run_id: str | None = None,
                 not_before: float | None = None) -> RunRecord:
        """The queued run of a tick, ready to insert (its id derived from the tick);
        ``not_before``: written ahead, claimable from then on."""
        target = row.definition
        return RunRecord(
            run_id=run_id or tick_id(row.name, tick), source_hash=target["source_hash"],
            process=target["process"], input=target["input"], input_hash=target["input_hash"],
            status=RunStatus.QUEUED, created_at=now, updated_at=now, wake_at=not_before,
            meta={"file": target.get("file"), "tool_modules": target.get("tool_modules", []),
                  "schedule": row.name, "tick": tick,
                  **({"queue": target["queue"]} if target.get("queue") else {})})

    async def loop(self, stop: asyncio.Event, *, every: float = 1.0) -> None:
        """Fire due ticks until ``stop`` is set. After a pass it sleeps until the next
        schedule is due, ``every`` seconds at most (a schedule made meanwhile by another
        process is seen then); a pass that found a full batch goes again at once."""
        while not stop.is_set():
            pause = every
            try:
                report = await self.fire_due(limit=500)
                if report.looked_at >= 500:
                    continue
                following = await self.store.next_due_at()
                if following is not None:
                    pause = min(every, max(0.0, following - self.clock.now() + 0.001))
            except DbError as exc:  # the database is away: say so and keep trying
                log.error("schedules: %s", exc.message)
            try:
                await asyncio.wait_for(stop.wait(), pause)
            except asyncio.TimeoutError:
                pass

    # -- the API ---------------------------------------------------------------------------
    async def _require(self, name: str) -> ScheduleRow:
        row = await self.store.get_schedule(name)
        if row is None:
            raise UnknownSchedule(f"no schedule named {name!r} (lashflow schedule list "
                                  "shows them)", schedule=name)
        return row

    async def _change(self, name: str,
                      edit: Callable[[ScheduleRow, float], tuple[ScheduleRow, list[RunRecord]]],
                      *, take_back: bool = False) -> tuple[ScheduleRow, list[RunRecord]]:
        """Read, ``edit`` and swap, again while a worker moves the row in between;
        ``take_back``: the runs written ahead for ticks not come yet are deleted with
        the swap (``edit`` moved the next tick back to the first of them)."""
        for _ in range(SWAP_TRIES):
            row = await self._require(name)
            now = self.clock.now()
            changed, runs = edit(row, now)
            changed.version = row.version + 1
            if await self.store.swap_schedule(changed, row.version, runs,
                                              take_back=now if take_back else None):
                return changed, runs
        raise DbError(f"schedule {name}: changed by others {SWAP_TRIES} times in a row; "
                      "try again")

    async def create(self, name: str, spec: ScheduleSpec, target: dict[str, Any]) -> ScheduleRow:
        check_name(name)
        now = self.clock.now()
        following = next(iter(ticks_from(spec, math.floor(now))), None)
        state: dict[str, Any] = {"next_tick": following, "buffer": [], "fired": 0,
                                 "missed": 0, "skipped": 0, "last_run": None}
        row = ScheduleRow(name, {"spec": spec.to_json(), **target}, state,
                          due_at=_due_at(name, spec, _state(ScheduleRow(name, {}, state)), now,
                                         self.ahead),
                          version=1, created_at=now, updated_at=now)
        if not await self.store.swap_schedule(row, None):
            raise ScheduleExists(f"a schedule named {name!r} exists already (update or "
                                 "delete it)", schedule=name)
        return row

    async def pause(self, name: str, note: str | None = None) -> ScheduleRow:
        """No tick fires until ``resume``; the runs written ahead for ticks that have
        not come are taken back (their ticks are the paused schedule's next)."""
        def edit(row: ScheduleRow, now: float) -> tuple[ScheduleRow, list[RunRecord]]:
            state = _take_back(row.name, self._spec(row), _state(row), now)
            return replace_row(row, paused=True, note=note, state=state, updated_at=now), []
        return (await self._change(name, edit, take_back=True))[0]

    async def resume(self, name: str) -> ScheduleRow:
        """Ticks that passed while paused fire only if they are inside the catch-up
        window; the older ones are passed over (not counted as missed: nothing was down)."""
        def edit(row: ScheduleRow, now: float) -> tuple[ScheduleRow, list[RunRecord]]:
            spec = self._spec(row)
            state = _state(row)
            following = state.get("next_tick")
            if following is not None and following < now - spec.catchup_window - spec.jitter:
                state["next_tick"] = next(iter(ticks_from(
                    spec, math.floor(now - spec.catchup_window - spec.jitter))), None)
            return replace_row(row, paused=False, note=None, state=state,
                               due_at=_due_at(row.name, spec, state, now, self.ahead),
                               updated_at=now), []
        return (await self._change(name, edit))[0]

    async def trigger(self, name: str) -> str:
        """Start a run now, whatever the overlap policy; returns its run id."""
        def edit(row: ScheduleRow, now: float) -> tuple[ScheduleRow, list[RunRecord]]:
            stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y%m%dT%H%M%S.%f")[:-3]
            run = self._run_for(row, now, now, run_id=f"{row.name}@{stamp}Z-trigger")
            run.meta["trigger"] = "manual"
            state = _state(row)
            state.update(last_run=run.run_id, fired=state["fired"] + 1)
            return replace_row(row, state=state, updated_at=now), [run]
        return (await self._change(name, edit))[1][0].run_id

    async def backfill(self, name: str, start: float, end: float) -> BackfillReport:
        """A run for every tick in ``[start, end)`` under the overlap policy (the ticks
        already fired keep their runs: their ids are the same)."""
        if end <= start:
            raise ScheduleInvalid("backfill: --to must come after --from")
        row = await self._require(name)
        spec = self._spec(row)
        ticks: list[float] = []
        for tick in ticks_from(spec, start):
            if tick >= end:
                break
            if len(ticks) == MAX_BACKFILL:
                raise ScheduleInvalid(f"backfill: more than {MAX_BACKFILL} ticks in that "
                                      "range; backfill a shorter one at a time")
            ticks.append(tick)
        counts: list[int] = []

        def edit(row: ScheduleRow, now: float) -> tuple[ScheduleRow, list[RunRecord]]:
            state = _state(row)
            last = state.get("last_run")
            busy = last is not None and statuses.get(last, RunStatus.FINISHED) not in SETTLED
            decision = decide(spec.overlap, busy, state["buffer"], ticks)
            runs = [self._run_for(row, tick, now) for tick in decision.start]
            state.update(buffer=decision.buffered, fired=state["fired"] + len(runs),
                         skipped=state["skipped"] + decision.skipped)
            if runs:
                state["last_run"] = runs[-1].run_id
            counts[:] = [len(runs), len(decision.buffered), decision.skipped]
            return replace_row(row, state=state,
                               due_at=_due_at(row.name, spec, state, now, self.ahead),
                               updated_at=now), runs
        last = row.state.get("last_run")
        statuses = await self.store.run_statuses([last] if last else [])
        await self._change(name, edit)
        return BackfillReport(*counts)

    async def update(self, name: str, spec: ScheduleSpec | None = None,
                     target: dict[str, Any] | None = None) -> ScheduleRow:
        """A new spec starts counting ticks from now; a new target (process, input)
        applies from the next run on (runs written ahead are taken back and written
        again)."""
        def edit(row: ScheduleRow, now: float) -> tuple[ScheduleRow, list[RunRecord]]:
            definition = dict(row.definition)
            state = _take_back(row.name, self._spec(row), _state(row), now)
            new_spec = self._spec(row) if spec is None else spec
            if spec is not None:
                definition["spec"] = spec.to_json()
                state["next_tick"] = next(iter(ticks_from(spec, math.floor(now))), None)
            definition.update(target or {})
            return replace_row(row, definition=definition, state=state,
                               due_at=_due_at(row.name, new_spec, state, now, self.ahead),
                               updated_at=now), []
        return (await self._change(name, edit, take_back=True))[0]

    async def delete(self, name: str) -> None:
        if not await self.store.delete_schedule(name, self.clock.now()):
            raise UnknownSchedule(f"no schedule named {name!r}", schedule=name)

    async def info(self, name: str, *, runs: int = 10, fires: int = 5) -> ScheduleInfo:
        row = await self._require(name)
        return self._info(row, await self.store.schedule_runs(name, runs) if runs else [],
                          fires)

    async def infos(self) -> list[ScheduleInfo]:
        return [self._info(row, [], 1) for row in await self.store.list_schedules()]

    def _info(self, row: ScheduleRow, runs: list[RunSummary], fires: int) -> ScheduleInfo:
        spec = self._spec(row)
        state = _state(row)
        following = state.get("next_tick")
        upcoming = [] if following is None or fires <= 0 else \
            [following] + next_ticks(spec, following, fires - 1)
        return ScheduleInfo(
            row.name, spec, row.definition.get("process"), row.definition.get("file"),
            row.definition.get("input"), row.paused, row.note,
            [fire_at(row.name, spec, t) for t in upcoming[:fires]], state.get("last_run"),
            state["fired"], state["missed"], state["skipped"], len(state["buffer"]),
            row.created_at, row.updated_at, runs, row.definition.get("queue"))


def _take_back(name: str, spec: ScheduleSpec, state: dict[str, Any],
               now: float) -> dict[str, Any]:
    """``state`` with its next tick moved back to the first tick written ahead (fire
    time after ``now``, before the next tick), and those ticks no longer counted fired:
    the store deletes their runs in the same swap."""
    following = state.get("next_tick")
    first, count = None, 0
    for tick in ticks_from(spec, math.floor(now - spec.jitter)):
        if (following is not None and tick >= following) or count >= 1000:
            break
        if following is None and fire_at(name, spec, tick) > now + AHEAD * 10:
            break  # an ended schedule: nothing is written further ahead than that
        if fire_at(name, spec, tick) > now:
            first = tick if first is None else first
            count += 1
    if first is not None:
        state.update(next_tick=first, fired=max(0, state["fired"] - count))
    return state


def replace_row(row: ScheduleRow, **changes: Any) -> ScheduleRow:
    """A copy of ``row`` with ``changes`` and the next version."""
    return replace(row, **{**changes, "version": row.version + 1})


__all__ = ["BackfillReport", "FireReport", "ScheduleInfo", "Scheduler", "replace_row",
           "spec_from_options"]
