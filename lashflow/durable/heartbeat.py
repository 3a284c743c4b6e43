"""The leases of the runs this process drives, renewed by one task.

A drive holds its run's lease for ``lease_ttl`` seconds from its claim; while it lasts
the lease is renewed every ``lease_ttl / 3`` seconds. One task per drive did that (a task,
a timer and their cancellation for every run, most of which end long before their first
renewal); here one task renews every drive under way, as the cancel watcher looks for
all of them at once. A drive that started just after a round is renewed at the next one,
at most ``2 * lease_ttl / 3`` after its claim: within its lease.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping

from ..store import Store


class LeaseKeeper:
    def __init__(self, store: Store, active: Mapping[str, Any], owner: str,
                 ttl: Callable[[], float], now: Callable[[], float]) -> None:
        self.store = store
        self.active = active  # run id -> drive (its ``generation``; ``lease_lost`` is set here)
        self.owner = owner
        self.ttl = ttl  # read at each round: the engine's lease_ttl
        self.now = now
        self._task: asyncio.Task[None] | None = None

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._renew())

    async def stop(self) -> None:
        """Stop renewing, and wait for it: a renewal under way holds a connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _renew(self) -> None:
        while self.active:
            ttl = self.ttl()
            await asyncio.sleep(ttl / 3)
            for run_id in list(self.active):
                drive = self.active.get(run_id)
                if drive is None or drive.lease_lost:
                    continue  # ended meanwhile, or lost before (it stops at its next write)
                if not await self.store.renew(run_id, self.owner, drive.generation, ttl,
                                              self.now()):
                    drive.lease_lost = True  # another worker has it: no more renewals


__all__ = ["LeaseKeeper"]
