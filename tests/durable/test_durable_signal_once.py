"""`signal_run` delivers once per sender step: a sender that crashed after delivering but
before journaling its step sends again when resumed, and the target must not receive the
payload twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lashflow import Engine, RunStatus
from lashflow.durable.journal import RunJournal
from lashflow.testing import FakeClock

SOURCE = """
process target() signals { x: any } {
  a = wait_signal("x")
  b = wait_signal("x")
  finish [a, b]
}
h = start target()
signal_run(h, "x", 1)
signal_run(h, "x", 2)
finish await h
"""


class Crash(BaseException):
    """The process dies here: nothing after this point of the drive happens."""


async def test_a_resumed_sender_does_not_deliver_twice(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 'signals.db'}"
    original = RunJournal.commit
    crashed: list[bool] = []

    async def commit(self: RunJournal, steps: Any = (), attempts: Any = ()) -> None:
        if not crashed and any(step.kind == "signal_run" for step in steps):
            crashed.append(True)  # the signal is in the target's inbox; the step is not
            raise Crash()
        await original(self, steps, attempts)

    monkeypatch.setattr(RunJournal, "commit", commit)
    with pytest.raises(Crash):
        async with Engine(db=db, clock=FakeClock(1000.0), lease_ttl=30) as engine:
            await engine.run(SOURCE, run_id="sender")
    assert crashed

    # another process, once the dead one's lease has run out, resumes the sender
    async with Engine(db=db, clock=FakeClock(5000.0), lease_ttl=30) as engine:
        outcome = await engine.resume("sender")
        assert outcome.status is RunStatus.FINISHED, outcome
        # was [1, 1]: the first payload delivered twice
        assert outcome.result == {"ok": True, "value": [1, 2]}
