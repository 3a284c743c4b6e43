"""`recover` drives every orphaned run it can: one taken by another process between the
listing and the claim is left to it, and the rest are still driven."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from lashflow import Engine, RunStatus


async def test_a_run_taken_meanwhile_does_not_stop_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'r.db'}") as engine:
        for run_id in ("a", "b", "c"):
            await engine.create("finish 7", run_id=run_id)
        # "b" is driven by a live process of this host (this pid, another nonce) whose
        # lease has not run out: it was taken after recover listed it
        owner = f"{socket.gethostname()}:{os.getpid()}:elsewhere"
        assert await engine.store.claim("b", owner, 600.0, engine.clock.now()) is not None

        async def listed(now: float) -> list[str]:
            return ["a", "b", "c"]
        monkeypatch.setattr(engine.store, "orphaned_runs", listed)
        outcomes: Any = await engine.recover()
        assert sorted(o.run_id for o in outcomes) == ["a", "c"]
        assert all(o.status is RunStatus.FINISHED for o in outcomes)
        assert (await engine.get("b")).status is RunStatus.QUEUED  # left to its owner
