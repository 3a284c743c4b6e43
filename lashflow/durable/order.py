"""How a run's steps are told apart and listed: which fan-out batch a step belongs to,
whether it succeeded, and the order ``show`` numbers them in (the journal's order, with
the members of a batch together under their first member, in index order). ``fork
--from N`` and ``retry --from N`` read row numbers in the same order."""

from __future__ import annotations

from typing import Sequence

from ..states import StepStatus
from ..tools.outcome import OutcomeStatus
from ..store import StepRecord


def batch_of(step: StepRecord) -> str | None:
    """The fan-out batch a member belongs to (its key without the member index); None
    for a step that is no fan-out member."""
    if step.detail.get("width") is None:
        return None
    head, _, index = step.step_key.rpartition(":")
    return head if head and index.isdigit() else None


def member_index(step: StepRecord) -> int:
    return int(step.step_key.rpartition(":")[2])


def succeeded(step: StepRecord) -> bool:
    """Done, and (for a tool call) done with an ``ok`` outcome."""
    if step.status != StepStatus.DONE:
        return False
    return not (step.kind == "tool" and isinstance(step.outcome, dict)
                and step.outcome.get("status") != OutcomeStatus.OK)


def display_order(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """The steps by sequence number, each batch's members together at the place of the
    first of them to be recorded, ordered by their index in the batch."""
    members: dict[str, list[StepRecord]] = {}
    for step in steps:
        batch = batch_of(step)
        if batch is not None:
            members.setdefault(batch, []).append(step)
    ordered: list[StepRecord] = []
    placed: set[str] = set()
    for step in sorted(steps, key=lambda s: s.seq):
        batch = batch_of(step)
        if batch is None:
            ordered.append(step)
        elif batch not in placed:
            placed.add(batch)
            ordered.extend(sorted(members[batch], key=member_index))
    return ordered


__all__ = ["batch_of", "display_order", "member_index", "succeeded"]
