"""``WorkflowEnv``: run workflows in a test, against a real store, with time skipped.

Everything goes through a real ``Engine`` on a real database (SQLite in the test's
folder, or PostgreSQL): the journal, replay, completion keys and leases are the
production ones. What the environment adds is control:

- time: a ``SkippingClock``. A retry delay inside a drive ends at once at its simulated
  moment; a run parked only on timers (``sleep for``) is moved on to its next timer
  straight away; ``advance`` lets time pass through every timer and deadline due within
  it, in order; ``skip`` jumps to the next one.
- tools: ``mock`` replaces a tool by name; every call is recorded (``calls``).
- crashes: ``crash_after`` kills the drive at a point as SIGKILL would; ``resume`` takes
  the run over with a new engine once the killed one's lease has expired.

The API is synchronous (it works in plain and in async tests alike): the engine lives on
an event loop in a thread of its own, and each method waits for its work there.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Iterable, TypeVar

from ..states import ACTIVE, RunStatus
from .crash import CrashPlan, GatedStore, SimulatedCrash
from .mocks import BEHAVIOURS, Call, MockingRegistry, ToolMock, mock_of
from .timeskip import SkippingClock, seconds_of

if TYPE_CHECKING:
    from lashflow.durable.engine import Engine
    from lashflow.durable.outcome import RunDetail, RunError, RunOutcome, StepView, Wait
    from lashflow.interp.limits import Limits
    from lashflow.tools import RetryPolicy

T = TypeVar("T")

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the same timestamps in every test run
MAX_SKIPS = 1_000  # timers one command moves through before it calls the run endless
_UNSET: Any = object()
_TIMERS = frozenset({"sleep", "child", "rate"})  # waits that time alone resolves (a child's own
# waits are listed beside its ``child`` wait, so a child parked on anything else blocks)


class EnvError(AssertionError):
    """A test asked the environment for something its runs do not offer (a call that is
    not pending, a run that never stops sleeping). An ``AssertionError``: pytest shows
    it as the test's failure, with the journal."""


@dataclass(frozen=True, slots=True)
class Run:
    """A run started by the environment. Every property reads the database afresh."""

    env: "WorkflowEnv"
    run_id: str

    @property
    def outcome(self) -> "RunOutcome":
        return self.env.call(lambda engine: engine.get(self.run_id))

    @property
    def status(self) -> str:
        return self.outcome.status.value

    @property
    def result(self) -> Any:
        return self.outcome.result

    @property
    def error(self) -> "RunError | None":
        return self.outcome.error

    @property
    def prints(self) -> list[str]:
        return list(self.outcome.prints)

    @property
    def waiting(self) -> "list[Wait]":
        return list(self.outcome.waiting)

    @property
    def detail(self) -> "RunDetail":
        return self.env.call(lambda engine: engine.run_detail(self.run_id))

    @property
    def steps(self) -> "list[StepView]":
        """The journal's rows, as ``lashflow show`` reads them."""
        return self.detail.steps

    def step(self, which: str | int) -> "StepView":
        """A journal row: by its number (as ``lashflow show`` prints it), its step key,
        or the tool it called (the last call of that tool)."""
        steps = self.steps
        if isinstance(which, int):
            if 1 <= which <= len(steps):
                return steps[which - 1]
        else:
            for step in reversed(steps):
                if step.step_key == which or _tool_matches(step.tool, which):
                    return step
        from .assertions import journal_text

        raise EnvError(f"run {self.run_id} has no step {which!r}\n{journal_text(self)}")

    def journal(self) -> str:
        """The journal as ``lashflow show`` prints it."""
        from .assertions import journal_text

        return journal_text(self)

    def __repr__(self) -> str:
        return f"Run({self.run_id!r})"


def _tool_matches(tool: str | None, name: str) -> bool:
    return tool is not None and (tool == name or tool == f"tools.{name}")


class WorkflowEnv:
    """A test's workflow environment (the ``lashflow_env`` fixture). ``db``: a SQLite
    path or a database URL. ``tools``/``modules``: tools loaded for every run (a
    ``.lash`` file's ``.py`` beside it is loaded anyway). ``start``: the simulated
    moment the test begins (epoch seconds). ``max_timers``: timers one command moves
    through before it calls the run endless."""

    def __init__(self, db: str, *, tools: Iterable[Any] = (), modules: Iterable[str] = (),
                 start: float = START, limits: "Limits | None" = None,
                 lease_ttl: float = 30.0, max_timers: int = MAX_SKIPS) -> None:
        self.db = db
        self.max_timers = max_timers
        self.clock = SkippingClock(start, busy=self._writing)
        self.started_at = start
        self.limits = limits
        self.lease_ttl = lease_ttl
        self.mocks: dict[str, ToolMock] = {}
        self.calls: list[Call] = []
        self.crashes = 0
        self._tools = list(tools)
        self._modules = [str(m) for m in modules]
        self._plan: CrashPlan | None = None
        self._current: tuple[Engine, GatedStore] | None = None
        self._ids = itertools.count(1)
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lashflow-env",
                                        daemon=True)
        self._thread.start()
        self._closed = False

    # -- the loop ----------------------------------------------------------------------------
    def call(self, work: Callable[["Engine"], Awaitable[T]]) -> T:
        """Run ``work(engine)`` on the environment's loop and return what it returns (the
        way to reach any ``Engine`` method the environment does not wrap)."""
        return self._submit(self._with_engine(work))

    def _submit(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            raise RuntimeError("this workflow environment is closed")
        if threading.current_thread() is self._thread:
            raise RuntimeError("the workflow environment cannot be used from inside a tool "
                               "or a mock it runs")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _with_engine(self, work: Callable[["Engine"], Awaitable[T]]) -> T:
        return await work(await self._engine())

    def _writing(self) -> bool:
        """Whether the engine has journal writes queued or in flight."""
        return self._current is not None and not self._current[1].group_commit.idle

    async def _engine(self) -> "Engine":
        if self._current is None:
            from lashflow.durable.engine import Engine
            from lashflow.store import open_store

            store = GatedStore(open_store(self.db), self._after_commit)
            engine = Engine(self.db, tools=self._tools, modules=self._modules, clock=self.clock,
                            limits=self.limits, lease_ttl=self.lease_ttl, telemetry=False,
                            # a Store by its methods, not its class: it forwards each call
                            store=store)  # type: ignore[arg-type]
            engine.tools.registry = MockingRegistry(self.mocks, self.calls, self._observe)
            await engine.__aenter__()
            self._current = (engine, store)
        return self._current[0]

    def close(self) -> None:
        """Close the engine and stop the loop (the fixture does it after each test)."""
        if self._closed:
            return
        try:
            self._submit(self._close_engine())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    async def _close_engine(self) -> None:
        for task in self._tasks.values():
            if not task.done():
                task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        if self._current is not None:
            engine, _ = self._current
            self._current = None
            await engine.__aexit__(None, None, None)

    def __enter__(self) -> "WorkflowEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- crashes -----------------------------------------------------------------------------
    def crash_after(self, tool: str | None = None, *, step: int | None = None,
                    recorded: bool = False, call: int = 1) -> CrashPlan:
        """Kill the next drive that reaches the point, as SIGKILL would: right after
        ``tool``'s code returns (its ``call``-th call), before anything about it is
        written; with ``recorded``, right after its outcome is committed; or, with
        ``step=N``, right after journal row N is first written. Once."""
        self._plan = CrashPlan(tool, step, recorded, call)
        return self._plan

    def _observe(self, call: Call) -> None:
        plan = self._plan
        if plan is not None and plan.tool_returned(call):
            assert self._current is not None
            self._current[1].kill()
            raise SimulatedCrash(plan.describe())

    def _after_commit(self, change: Any) -> bool:
        return self._plan is not None and self._plan.committed(change)

    async def _bury(self) -> None:
        """The engine died: forget it without letting it write (its lease stays held)."""
        assert self._current is not None
        engine, store = self._current
        self._current = None
        store.kill()
        self.crashes += 1
        try:
            await engine.__aexit__(None, None, None)
        except (SimulatedCrash, Exception):
            pass  # its drives end on the gate; what it was writing then is lost

    async def _guarded(self, work: Callable[["Engine"], Awaitable[T]]) -> T | None:
        """``work`` on the current engine; None if the engine was killed during it."""
        try:
            return await work(await self._engine())
        except SimulatedCrash:
            await self._bury()
            return None

    @property
    def crashed(self) -> bool:
        """Whether the crash asked for with ``crash_after`` has happened."""
        return self._plan is not None and self._plan.fired

    # -- tools -------------------------------------------------------------------------------
    def mock(self, name: str, *, returns: Any = _UNSET, raises: Any = _UNSET,
             outcomes: Any = _UNSET, pending: Any = _UNSET, fn: Any = _UNSET,
             retry: "RetryPolicy | None" = None, idempotent: bool | None = None) -> ToolMock:
        """Replace tool ``name`` (``tools.charge``, or ``charge`` for the ``tools``
        module) for this test: ``returns`` a value, ``raises`` an exception, one of
        ``outcomes`` per call, ``pending`` (a ``Pending``: the call parks on its key) or
        ``fn`` (a function of the input). ``retry``/``idempotent`` override the tool's
        own. Returns the mock; its ``calls`` list every call it took."""
        given = dict(returns=returns, raises=raises, outcomes=outcomes, pending=pending, fn=fn)
        behaviour = {key: value for key, value in given.items() if value is not _UNSET}
        mock = mock_of(name, behaviour, retry=retry, idempotent=idempotent)
        self.mocks[mock.name] = mock
        return mock

    def calls_of(self, name: str) -> list[Call]:
        """Every call tool ``name`` took (mocked or not), in order."""
        return [call for call in self.calls if _tool_matches(call.tool, name)]

    def load_tools(self, module_or_path: str) -> None:
        """Load a tool module (name or ``.py`` path) for every run from now on."""
        self._modules.append(str(module_or_path))
        if self._current is not None:
            self._current[0].load_tools(str(module_or_path))

    # -- runs --------------------------------------------------------------------------------
    def run(self, source: str | os.PathLike[str], input: Any = None, *,
            process: str | None = None, run_id: str | None = None) -> Run:
        """Start a run of a ``.lash`` file or of source text and drive it until it
        settles or waits on something other than time (a completion, a signal)."""
        run_id = run_id or f"run-{next(self._ids)}"

        async def go(engine: "Engine") -> None:
            await engine.run(source, process, input, run_id)
            await self._settle(engine, run_id)

        self._submit(self._guarded(go))
        return Run(self, run_id)

    def start(self, source: str | os.PathLike[str], input: Any = None, *,
              process: str | None = None, run_id: str | None = None) -> Run:
        """Start a run and drive it in the background; ``wait`` joins it."""
        run_id = run_id or f"run-{next(self._ids)}"

        async def go(engine: "Engine") -> None:
            handle = await engine.start(source, process, input, run_id)
            assert handle.task is not None
            self._tasks[run_id] = handle.task

        self._submit(self._guarded(go))
        return Run(self, run_id)

    def wait(self, run: Run | str) -> Run:
        """Wait for a started run's drive, then drive it as ``run`` would."""
        run_id = _id_of(run)

        async def go(engine: "Engine") -> None:
            task = self._tasks.pop(run_id, None)
            if task is not None:
                await task
            await self._settle(engine, run_id)

        self._submit(self._guarded(go))
        return Run(self, run_id)

    async def _settle(self, engine: "Engine", run_id: str) -> None:
        """Drive the run on through the timers it waits on alone, jumping the clock."""
        from lashflow.errors import RunBusy

        last = None
        for _ in range(self.max_timers):
            status, waits = await _state(engine, run_id)
            if status in ACTIVE:  # a follow-up drive under way here
                try:
                    await engine.resume(run_id)
                except RunBusy:
                    return  # held by a killed engine's lease: `resume` takes it over
                status, waits = await _state(engine, run_id)
            if status != RunStatus.WAITING:
                return
            timers = [w.until for w in waits if w.until is not None]
            if not timers or any(w.kind not in _TIMERS for w in waits) or min(timers) == last:
                return  # (the same moment twice: driving it moved nothing, do not spin)
            last = min(timers)
            self.clock.advance_to(last)
            await self._drive_due(engine)
        raise EnvError(f"run {run_id} was still sleeping after {self.max_timers} timers")

    async def _drive_due(self, engine: "Engine") -> None:
        """Drive every run due now (timers, deadlines, taken-over leases) and the drives
        they set off."""
        from lashflow.errors import RunBusy

        for outcome in await engine.recover():
            if outcome.status in ACTIVE:
                try:
                    await engine.resume(outcome.run_id)
                except RunBusy:
                    pass

    # -- outside events ----------------------------------------------------------------------
    def complete(self, run: Run | str, call: str, result: Any = None) -> Run:
        """Resolve the pending call of tool ``call`` (or of step key ``call``) of the run
        or of a child it waits on, with ``result`` (a value, or a ``ToolResult``), then
        drive the run on."""
        run_id = _id_of(run)

        async def go(engine: "Engine") -> None:
            _, waits = await _state(engine, run_id)
            keys = [w.key for w in waits if w.kind == "completion" and w.key
                    and (w.step == call or _tool_matches(w.tool, call))]
            if not keys:
                await self._refuse(engine, run_id, f"run {run_id} has no pending call of {call}")
            await engine.complete(keys[0], result)
            await self._settle(engine, run_id)

        self._submit(self._guarded(go))
        return Run(self, run_id)

    async def _refuse(self, engine: "Engine", run_id: str, message: str) -> None:
        from .assertions import render_detail

        raise EnvError(f"{message}\n{render_detail(await engine.run_detail(run_id))}")

    def signal(self, run: Run | str, name: str, payload: Any = None) -> Run:
        """Send signal ``name`` to the run and drive it on."""
        run_id = _id_of(run)

        async def go(engine: "Engine") -> None:
            await engine.signal(run_id, name, payload)
            await self._settle(engine, run_id)

        self._submit(self._guarded(go))
        return Run(self, run_id)

    def cancel(self, run: Run | str, reason: str | None = None) -> Run:
        run_id = _id_of(run)
        self._submit(self._guarded(lambda engine: engine.cancel(run_id, reason)))
        return Run(self, run_id)

    def resume(self, run: Run | str, *, retry_interrupted: bool = False) -> Run:
        """Continue the run with a fresh engine, as another worker would after a crash:
        once the killed engine's lease has expired (the clock is moved on to then)."""
        run_id = _id_of(run)

        async def go(engine: "Engine") -> None:
            record = await engine.get_record(run_id)
            if record.status == RunStatus.RUNNING and record.lease_owner != engine.owner \
                    and record.lease_expires is not None:
                self.clock.advance_to(record.lease_expires + 0.001)  # held through its last instant
            await engine.resume(run_id, retry_interrupted=retry_interrupted)
            await self._settle(engine, run_id)

        self._submit(self._guarded(go))
        return Run(self, run_id)

    def export(self, *runs: Run | str) -> dict[str, Any]:
        """The runs as ``lashflow export`` writes them (source, input, journal; no
        completion key): a fixture for ``assert_replays``."""
        run_ids = [_id_of(run) for run in runs]
        return self.call(lambda engine: engine.export(run_ids))

    # -- time --------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        """The simulated time (epoch seconds)."""
        return self.clock.now()

    @property
    def elapsed(self) -> timedelta:
        """Simulated time since the test began."""
        return timedelta(seconds=self.clock.now() - self.started_at)

    def advance(self, duration: float | timedelta | str) -> None:
        """Let ``duration`` pass (seconds, a ``timedelta`` or text: ``"24h"``, ``"30d"``):
        every timer and deadline due within it fires in order, each run driven on at its
        moment."""
        target = self.clock.now() + seconds_of(duration)
        if target < self.clock.now():
            raise ValueError("time cannot go backwards")
        self._submit(self._guarded(lambda engine: self._pass_until(engine, target)))

    def skip(self) -> float:
        """Jump to the next moment any run waits for (a timer or a deadline) and drive
        what falls due; returns the simulated seconds skipped (0 if nothing waits)."""
        async def go(engine: "Engine") -> float:
            due = await self._next_due(engine)
            if due is None:
                return 0.0
            before = self.clock.now()
            await self._pass_until(engine, max(due, before))
            return self.clock.now() - before

        skipped = self._submit(self._guarded(go))
        return skipped or 0.0

    async def _pass_until(self, engine: "Engine", target: float) -> None:
        last = None
        for _ in range(self.max_timers):
            due = await self._next_due(engine)
            if due is None or due > target or due == last:
                break  # (the same moment twice: driving it moved nothing, do not spin)
            last = due
            self.clock.advance_to(max(due, self.clock.now()))
            await self._drive_due(engine)
        else:
            raise EnvError(f"more than {self.max_timers} timers fell due while time advanced")
        self.clock.advance_to(target)
        await self._drive_due(engine)

    async def _next_due(self, engine: "Engine") -> float | None:
        """The earliest moment a waiting run is due (its timer or deadline)."""
        moments = [w.until for outcome in await engine.list(RunStatus.WAITING)
                   for w in outcome.waiting if w.until is not None]
        return min(moments) if moments else None


async def _state(engine: "Engine", run_id: str) -> "tuple[str, list[Wait]]":
    """The run's status and waits, from its row alone (no journal read)."""
    from lashflow.durable.outcome import Wait

    record = await engine.get_record(run_id)
    return record.status, [Wait.from_json(wait) for wait in record.waiting]


def _id_of(run: Run | str) -> str:
    return run.run_id if isinstance(run, Run) else run


__all__ = ["BEHAVIOURS", "EnvError", "MAX_SKIPS", "Run", "START", "WorkflowEnv"]
