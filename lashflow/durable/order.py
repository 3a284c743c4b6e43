"""How a run's steps are told apart and listed: which fan-out batch a step belongs to,
whether it succeeded, and the order ``show`` numbers them in (the journal's order, with
the members of a batch together under their first member, in index order). ``fork
--from N`` and ``retry --from N`` read row numbers in the same order."""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import JournalCorrupt
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
    if step.status != "done":
        return False
    return not (step.kind == "tool" and isinstance(step.outcome, dict)
                and step.outcome.get("status") != "ok")


def check_sequence(run_id: str, steps: Sequence[StepRecord], meta: dict[str, Any]) -> None:
    """A run's steps are numbered 1, 2, 3... as they are recorded, so a number missing
    between two recorded steps is a row deleted from the journal: ``JournalCorrupt``,
    never a step to run again. Only a fan-out member's row can go missing honestly (a
    crash while its batch ran; the members on either side of it are then members too),
    and retried or forked runs number with gaps of their own, so they are not checked."""
    if meta.get("retries") or meta.get("forked_from"):
        return
    by_seq = {step.seq: step for step in steps}
    for seq in range(1, max(by_seq, default=0)):
        if seq in by_seq:
            continue
        around = [by_seq.get(seq - 1), by_seq.get(seq + 1)]
        if any(step is not None and batch_of(step) is not None for step in around):
            continue
        after = next(by_seq[n] for n in range(seq + 1, max(by_seq) + 1) if n in by_seq)
        raise JournalCorrupt.of(run_id, after.step_key, f"the step recorded before it "
                                f"(number {seq}) is missing from the journal (deleted "
                                "in the database?)")


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


__all__ = ["batch_of", "check_sequence", "display_order", "member_index", "succeeded"]
