"""Pausing runs by hand: a paused run is claimed by no worker until it is unpaused.

The pause is the run's status (``paused``), written at once whatever the run was doing:
a drive under way keeps its lease, its attempts in flight finish and are recorded, and
its next status change leaves the run paused; it stops at its next effect (the watcher
beside the drives tells it). Unpausing puts the run back in the queue: a worker replays it
to where it stood, so a timer or a completion deadline that passed meanwhile is met then
(ADR 0032). Who paused it, when and why are kept in the run's meta (``paused``).
"""

from __future__ import annotations

import getpass
import socket
from typing import Any

from ..errors import RunSettled, UsageError
from ..states import PAUSABLE, SETTLED, RunStatus
from ..store import RunRecord, Store
from ..tools.clock import Clock
from .reads import Reads


def operator_name() -> str:
    """Who acts from this process, as an operator action records it: ``user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def paused_message(run: RunRecord) -> str:
    """Why a paused run is not driven, with who paused it and how to go on."""
    info = run.meta.get("paused") or {}
    by = f" by {info['by']}" if info.get("by") else ""
    why = f" ({info['reason']})" if info.get("reason") else ""
    return (f"run {run.run_id} is paused{by}{why}: no worker takes it until "
            f"`lashflow unpause {run.run_id}`")


class Pauses:
    def __init__(self, store: Store, clock: Clock, reads: Reads, active: Any) -> None:
        self.store = store
        self.clock = clock
        self.reads = reads
        self.active = active  # run id -> the drive under way in this process, if any

    async def pause(self, run_id: str, reason: str | None = None, *,
                    by: str | None = None) -> RunStatus:
        """Pause a queued, running or waiting run (a paused one is left as it is)."""
        run = await self.reads.require(run_id)
        if run.status == RunStatus.PAUSED:
            return RunStatus.PAUSED
        if run.status in SETTLED:
            raise RunSettled(f"run {run_id} is {run.status}; there is nothing to pause")
        if run.status not in PAUSABLE:
            raise UsageError(f"run {run_id} is {run.status}: it is stopped already; "
                             f"`lashflow retry {run_id}` continues it", code="run_not_pausable")
        info = pause_info(self.clock.now(), by, reason)
        await self.store.pause_runs([run_id], info["at"], info)
        self.tell_drive(run_id)
        return RunStatus((await self.reads.require(run_id)).status)

    def tell_drive(self, run_id: str) -> None:
        drive = self.active(run_id)
        if drive is not None:  # driven here: it stops at its next effect
            drive.flags.pause_requested = True

    async def unpause(self, run_id: str) -> RunStatus:
        """Put a paused run back in the queue (it replays to where it stood)."""
        run = await self.reads.require(run_id)
        if run.status != RunStatus.PAUSED:
            raise UsageError(f"run {run_id} is {run.status}, not paused; nothing to unpause",
                             code="run_not_paused")
        if "step" in (run.meta.get("paused") or {}):  # its retry policy paused it
            raise UsageError(f"run {run_id} was paused by the retry policy of step "
                             f"{run.meta['paused']['step']}: `lashflow retry {run_id}` runs "
                             "that call again", code="run_not_paused")
        await self.store.unpause_runs([run_id], self.clock.now())
        return RunStatus((await self.reads.require(run_id)).status)


def pause_info(now: float, by: str | None, reason: str | None) -> dict[str, Any]:
    info: dict[str, Any] = {"by": by or operator_name(), "at": now}
    if reason:
        info["reason"] = reason
    return info


__all__ = ["Pauses", "operator_name", "pause_info", "paused_message"]
