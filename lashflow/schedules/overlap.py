"""What a tick does while the schedule's last run is still going (the overlap policy),
and when a buffered tick may start. Pure: the scheduler says whether the last run has
settled and what is buffered; these functions say what to do."""

from __future__ import annotations

from dataclasses import dataclass, field

from .spec import POLICIES


@dataclass(slots=True)
class Decision:
    """What a pass does with its due ticks: ``start`` runs for these ticks now,
    ``buffered`` is the buffer afterwards, ``skipped`` ticks were dropped by the policy
    and ``cancel`` asks the running run to stop (``cancel-other``)."""

    start: list[float] = field(default_factory=list)
    buffered: list[float] = field(default_factory=list)
    skipped: int = 0
    cancel: bool = False


def decide(policy: str, busy: bool, buffered: list[float], ticks: list[float]) -> Decision:
    """Apply ``policy`` to ``ticks`` (oldest first). ``busy``: the schedule's last run
    has not settled. A buffered tick starts only once nothing runs, so at most one run
    of the schedule runs at a time under every policy but ``allow``."""
    assert policy in POLICIES, policy
    result = Decision(buffered=list(buffered))
    if not busy and result.buffered:  # the run that held the buffer back has settled
        result.start.append(result.buffered.pop(0))
        busy = True
    for tick in ticks:
        if policy == "allow" or not busy:
            result.start.append(tick)
            busy = True
        elif policy == "skip":
            result.skipped += 1
        elif policy == "buffer-one":
            if result.buffered:
                result.skipped += 1
            else:
                result.buffered.append(tick)
        elif policy == "buffer-all":
            result.buffered.append(tick)
        else:  # cancel-other: the running run is asked to stop; this tick starts after it
            result.skipped += len(result.buffered)
            result.buffered = [tick]
            result.cancel = True
    return result


__all__ = ["Decision", "POLICIES", "decide"]
