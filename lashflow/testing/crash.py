"""Crash injection: stop a drive the way SIGKILL would, at a chosen point, in process.

The engine of a test runs on a ``GatedStore``: the real store behind a gate. When the
``CrashPlan``'s point is reached the gate shuts (every later call of the store raises
``SimulatedCrash`` before touching the database) and ``SimulatedCrash`` is raised where
the drive stands. It is a ``BaseException``: the engine's handlers for a tool's or a
program's errors do not catch it, so nothing of the drive is written after the point,
not even a failure. The environment then discards that engine (its lease is left held,
as a killed worker's is) and a new one, on the same database, resumes the run.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from lashflow.store import Commit

from ..states import StepStatus
from .mocks import Call

# Store methods a dead engine may still call: closing lets the writes queued *before*
# the crash finish (they were in flight when the process died).
_ALLOWED_WHEN_DEAD = frozenset({"close"})


class SimulatedCrash(BaseException):
    """The test's SIGKILL: the drive stops here and the process it ran in is gone."""


@dataclass(slots=True)
class CrashPlan:
    """Where to crash, once. ``tool``: right after that tool's code returns, before
    lashflow writes anything about the call (its ``call``-th call), or with
    ``recorded`` right after the commit that records its outcome. ``step``: right after
    the commit that first writes the journal's row ``step`` (as ``lashflow show``
    numbers them)."""

    tool: str | None = None
    step: int | None = None
    recorded: bool = False
    call: int = 1
    fired: bool = False
    _seen_calls: int = 0

    def __post_init__(self) -> None:
        if (self.tool is None) == (self.step is None):
            raise TypeError("crash_after takes a tool name or step=N, not both")
        if self.step is not None and self.step < 1:
            raise ValueError("steps are numbered from 1, as `lashflow show` prints them")
        if self.call < 1:
            raise ValueError("call= counts calls from 1")
        if self.tool is not None and "." not in self.tool:
            self.tool = f"tools.{self.tool}"

    def describe(self) -> str:
        if self.step is not None:
            return f"after journal row {self.step} was written"
        nth = f" (call {self.call})" if self.call > 1 else ""
        if self.recorded:
            return f"after the outcome of {self.tool}{nth} was written"
        return f"after {self.tool}{nth} returned, before its outcome was written"

    def tool_returned(self, call: Call) -> bool:
        """True when this call's return is the crash point."""
        if self.fired or self.recorded or call.tool != self.tool:
            return False
        self._seen_calls += 1
        self.fired = self._seen_calls == self.call
        return self.fired

    def committed(self, change: Commit) -> bool:
        """True when this commit is the crash point."""
        if self.fired:
            return False
        if self.step is not None:
            self.fired = any(step.seq == self.step for step in change.steps)
        elif self.recorded:
            for step in change.steps:
                if step.kind == "tool" and step.tool == self.tool and step.status == StepStatus.DONE:
                    self._seen_calls += 1
                    self.fired = self.fired or self._seen_calls == self.call
        return self.fired


class GatedStore:
    """A store behind a gate: everything passes until ``kill``; after it, any call but
    ``close`` raises ``SimulatedCrash``. ``after_commit`` is asked after each commit
    whether the process dies right there."""

    def __init__(self, inner: Any, after_commit: Callable[[Commit], bool]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_after_commit", after_commit)
        object.__setattr__(self, "dead", False)

    def kill(self) -> None:
        object.__setattr__(self, "dead", True)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(value) or name in _ALLOWED_WHEN_DEAD:
            return value

        async def gated(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise SimulatedCrash("the engine was killed")
            return await value(*args, **kwargs)

        return gated

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)  # e.g. the engine's ``on_commit`` report

    async def commit(self, change: Commit) -> None:
        if self.dead:
            raise SimulatedCrash("the engine was killed")
        await self._inner.commit(change)
        if self._after_commit(change):
            self.kill()
            raise SimulatedCrash("crashed right after a commit")


__all__ = ["CrashPlan", "GatedStore", "SimulatedCrash"]
