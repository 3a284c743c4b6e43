"""Cancels and pauses requested from other processes reach the runs this process drives.

A cancel or pause from the same process reaches its drive at once (``Commands``); one
from another process is only written on the run's row, so while anything is being driven
here a watcher asks the store, every ``poll`` seconds, which of exactly those runs were
asked to stop (one query for both).
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from ..errors import LashflowError
from ..store import Store

CANCEL_POLL = 0.5  # seconds between looks


class CancelWatcher:
    def __init__(self, store: Store, active: Mapping[str, Any], poll: float = CANCEL_POLL) -> None:
        self.store = store
        self.active = active  # run id -> drive (its ``flags`` take the cancel)
        self.poll = poll
        self._task: asyncio.Task[None] | None = None

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        """Stop watching, and wait for it: a look under way holds a connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self) -> None:
        while self.active:
            await asyncio.sleep(self.poll)
            ids = [run_id for run_id, drive in self.active.items()
                   if not drive.flags.cancel_requested]
            if not ids:
                continue
            try:
                requested = await self.store.stop_requests(ids)
            except LashflowError:
                continue  # a busy or failing store: look again next time
            for run_id, how in requested.items():
                drive = self.active.get(run_id)
                if drive is None:
                    continue
                if how == "cancel":
                    drive.flags.request_cancel()
                else:  # its attempts in flight finish and are recorded; then it stops
                    drive.flags.pause_requested = True


__all__ = ["CANCEL_POLL", "CancelWatcher"]
