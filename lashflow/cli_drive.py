"""Driving a run from the CLI until it settles: through short sleeps (``--max-wait``),
with ``--follow`` through any wait, and a live status line on a terminal.

``Engine.run``/``resume`` return as soon as a run parks; a person at a terminal usually
wants more: a 2-second sleep should not end the command, and ``--follow`` should sit
there until someone else signals or completes the run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import replace
from typing import Any

from .cli_render import is_terminal, seconds, wait_what, when
from .errors import RunBusy
from .states import STOPPED

POLL = 0.25            # seconds between looks at the run row while following
FOLLOW_RESUME = 2.0    # a follower re-drives this often: resolutions stored without --resume


class LiveStatus:
    """An engine listener that keeps a one-line rich status on stderr while a command
    drives runs: steps recorded, tools in flight (and for how long), elapsed, waits.

    Disabled (a no-op) unless stderr is a terminal and the output is not ``--json``.
    """

    def __init__(self, enabled: bool, label: str = "") -> None:
        self.enabled = enabled
        self.label = label
        self.started = time.monotonic()
        self.steps = 0
        self.runs: dict[str, None] = {}  # in the order first seen
        self.in_flight: dict[str, list[float]] = {}
        self.last = ""
        self.phase = "driving"
        self.until: float | None = None
        self._live: Any = None
        self._spinner: Any = None

    @classmethod
    def for_command(cls, as_json: bool, label: str = "") -> "LiveStatus":
        return cls(not as_json and is_terminal(sys.stderr), label)

    # -- engine events ------------------------------------------------------------------
    def on_event(self, event: dict[str, Any]) -> None:
        """``Engine.notify`` events: ``tools`` (a batch starts), ``step`` (a step recorded),
        ``run`` (a drive ended)."""
        kind = event.get("type")
        now = time.monotonic()
        if event.get("run_id"):
            self.runs.setdefault(event["run_id"], None)
        if kind == "tools":
            for name in event.get("tools", []):
                self.in_flight.setdefault(name, []).append(now)
            self.phase = "driving"
        elif kind == "step":
            tool = event.get("tool")
            if event.get("kind") == "tool" and tool in self.in_flight and \
                    event.get("status") in ("done", "pending"):
                started = self.in_flight[tool]
                started.pop(0)
                if not started:
                    del self.in_flight[tool]
            if event.get("status") == "done":
                self.steps += 1
            self.last = f"{event.get('kind')} {tool or ''}".strip() + f" {event.get('status')}"
        elif kind == "run":
            self.in_flight.clear()

    def set_phase(self, phase: str, until: float | None = None) -> None:
        self.phase, self.until = phase, until

    # -- rendering ------------------------------------------------------------------------
    def text(self) -> str:
        """The status line (also what tests read)."""
        now = time.monotonic()
        first = next(iter(self.runs), None)  # the run this command drives, once known
        named = f" (run {first})" if first and first not in self.label else ""
        parts = [f"{self.label}{named} {self.phase}".strip(), f"{self.steps} step(s) recorded"]
        if len(self.runs) > 1:
            parts.append(f"{len(self.runs)} runs")
        if self.in_flight:
            flying = ", ".join(f"{name}" + (f" x{len(v)}" if len(v) > 1 else "")
                               + f" ({seconds(now - min(v))})"
                               for name, v in sorted(self.in_flight.items()))
            parts.append(f"in flight: {flying}")
        elif self.last:
            parts.append(f"last: {self.last}")
        if self.until is not None:
            parts.append(f"{seconds(max(0.0, self.until - time.time()))} left")
        parts.append(f"elapsed {seconds(now - self.started)}")
        return " · ".join(parts)

    def __rich__(self) -> Any:
        if self._spinner is None:
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", style="cyan")
        self._spinner.update(text=self.text())
        return self._spinner

    def __enter__(self) -> "LiveStatus":
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self, console=Console(stderr=True), refresh_per_second=8,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


async def _resume(engine: Any, run_id: str) -> Any:
    """Resume, tolerating another worker holding the run (then report what it shows)."""
    try:
        return await engine.resume(run_id)
    except RunBusy:
        return await engine.get(run_id)


async def _family(engine: Any, root: Any) -> list[Any]:
    """The run and every run it waits on through child waits, transitively, each read
    fresh (a parent's record of its children's waits is as of when it parked)."""
    members = [root]
    seen = {root.run_id}
    index = 0
    while index < len(members):
        for wait in members[index].waiting:
            child = wait.child_run_id if wait.kind == "child" else None
            if child and child not in seen:
                seen.add(child)
                members.append(await engine.get(child))
        index += 1
    return members


def _family_waits(family: list[Any]) -> list[Any]:
    """Every wait of every waiting member: the root's own and its child waits, then each
    descendant's own waits, tagged with the child run they belong to."""
    root, *descendants = family
    waits = [w for w in root.waiting if w.kind == "child" or not w.child_run_id]
    for member in descendants:
        for wait in member.waiting:
            if wait.kind != "child" and not wait.child_run_id:
                wait = replace(wait, child_run_id=member.run_id)
            if wait.kind != "child" or wait not in waits:
                waits.append(wait)
    return waits


async def _due_members(engine: Any, family: list[Any]) -> list[str]:
    """Members this process should drive now, deepest first: queued, due (a timer ran
    out, something was delivered, a child settled) or orphaned; never one another live
    worker holds."""
    now = engine.clock.now()
    due = []
    for member in reversed(family):
        if member.status.value not in ("waiting", "running", "queued"):
            continue
        record = await engine.get_record(member.run_id)
        if record.status == "queued":
            due.append(record.run_id)
        elif record.status == "waiting" and record.wake_at is not None and record.wake_at <= now:
            due.append(record.run_id)
        elif record.status == "running" and member is not family[0] and (
                record.lease_owner == engine.owner or (record.lease_expires or 0) <= now):
            due.append(record.run_id)
    return due


async def settle(engine: Any, outcome: Any, max_wait: float, follow: bool,
                 live: LiveStatus | None = None) -> Any:
    """Keep driving ``outcome``'s run, and the child runs it waits on, through sleeps
    ending within ``max_wait`` seconds and, with ``follow``, through any wait until it is
    resolved from elsewhere. A run left waiting lists every wait of its family."""
    live = live or LiveStatus(False)
    run_id = outcome.run_id
    seen: float | None = None
    last_drive = time.monotonic()
    while outcome.status.value in ("waiting", "running"):
        now = engine.clock.now()
        if outcome.status.value == "waiting":
            family = await _family(engine, outcome)
            due = await _due_members(engine, family)
            if due:
                live.set_phase("driving")
                for member in due:
                    driven = await _resume(engine, member)
                    if member == run_id:
                        outcome = driven
                if run_id not in due:
                    outcome = await engine.get(run_id)
                last_drive, seen = time.monotonic(), None
                continue
            waits = _family_waits(family)
            own = [w for w in waits if w.kind != "child"]
            sleeps = [w.until for w in own if w.kind == "sleep" and w.until is not None]
            only_sleeps = bool(sleeps) and len(sleeps) == len(own)
            if only_sleeps and min(sleeps) - now <= max_wait:
                wake = min(sleeps)
                live.set_phase(f"sleeping until {when(wake)}", until=wake)
                await asyncio.sleep(max(0.0, wake - now))
                continue
            if not follow:
                return replace(outcome, waiting=waits)
            live.set_phase(f"following: waiting on {'; '.join(wait_what(w) for w in own)}")
        else:
            live.set_phase(f"{outcome.status.value} in another worker")
        await asyncio.sleep(POLL)
        record = await engine.get_record(run_id)
        if record.status in STOPPED:
            return await engine.get(run_id)
        changed = seen is not None and record.updated_at != seen
        seen = record.updated_at
        due_now = record.wake_at is not None and record.wake_at <= engine.clock.now()
        if record.status == "running" and record.lease_owner not in (None, engine.owner) and \
                (record.lease_expires or 0) > engine.clock.now():
            outcome = await engine.get(run_id)
            continue
        if due_now or changed or record.status == "queued" or \
                time.monotonic() - last_drive >= FOLLOW_RESUME:
            live.set_phase("driving")
            outcome = await _resume(engine, run_id)
            last_drive, seen = time.monotonic(), None
        else:
            outcome = await engine.get(run_id)
    return outcome
