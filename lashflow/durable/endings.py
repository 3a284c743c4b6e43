"""How a drive stops early: raised by the durable host at an effect boundary and turned
into the run's new status by the driver. None of them reaches a user as such."""

from __future__ import annotations

from ..errors import LashflowError


class ReplayMismatch(LashflowError):
    """A recorded step is not what the code asks now: the run needs an operator."""

    code = "replay_mismatch"


class NeedsAttention(LashflowError):
    """lashflow will not go on by itself (e.g. a non-idempotent call was interrupted)."""

    code = "needs_attention"


class RunCancelled(LashflowError):
    code = "cancelled"


class Drained(LashflowError):
    """The worker is shutting down: stop at this effect boundary, keep the journal, hand
    the run back to the queue."""

    code = "drained"


class FailTurn(LashflowError):
    """A pending completion timed out with ``OnTimeout.FAIL_TURN``: the run fails."""

    code = "tool_completion_timeout"


class PausedOnExhausted(LashflowError):
    """A call's retries ran out and its tool (or the run) says pause: the run waits for
    an operator, the last error shown."""

    code = "retries_exhausted"

    def __init__(self, message: str, *, step: str, tool: str) -> None:
        super().__init__(message)
        self.step, self.tool = step, tool


__all__ = ["PausedOnExhausted", "Drained", "FailTurn", "NeedsAttention", "ReplayMismatch", "RunCancelled"]
