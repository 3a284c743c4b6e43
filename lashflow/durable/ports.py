"""The narrow interfaces the durable host is wired through (implemented elsewhere in
the package), so the host never holds the engine and no module imports its user."""

from __future__ import annotations

from typing import Any, Protocol

from ..store import RunRecord
from .outcome import Wait


class ChildRuns(Protocol):
    """What a run may do to other runs: start children, join them, cancel, signal."""

    def child_id(self, parent_run_id: str, step: str) -> str:
        """The id of the child a ``start`` at ``step`` creates (the same on every replay)."""

    async def create(self, parent: RunRecord, source_hash: str, child_id: str, process: str,
                     args: dict[str, Any], depth: int) -> None:
        """Store the child run (queued, running ``source_hash``, ``depth`` runs below the
        top of its family) unless it exists."""

    def spawn(self, child_id: str) -> None:
        """Make sure the child is being driven (here, or later by a worker)."""

    async def join_all(self, child_ids: list[str]) -> list[tuple[Any, list[Wait]]]:
        """For each child at once: its result wrapper once settled, else ``None`` and what
        it waits on."""

    async def cancel(self, run_id: str) -> None: ...

    async def signal(self, run_id: str, name: str, payload: Any, *, sender: str) -> None: ...


class Family(ChildRuns, Protocol):
    """Child runs, plus what the driver owes a parent when one of them settles."""

    async def wake_parent(self, parent_id: str) -> None:
        """A child settled: move its parent on if it was parked waiting for a child."""


__all__ = ["ChildRuns", "Family"]
