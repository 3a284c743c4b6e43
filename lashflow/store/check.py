"""Journal consistency checker: the journal's data-level invariants, run over a store.

``check_store(store)`` walks every run's journal (one ``load_journal`` each) and
returns the problems it finds; an empty list means the journal is consistent. It
knows nothing of the language: whether a finished run's steps are the effects its
program asks for, in order, is checked by replaying the program (tests/hardening).

Rules (each ``Problem.rule``):

* ``unreadable``: the run's journal cannot be loaded (a corrupt row).
* ``step_status``: a step is ``done``, ``pending`` or ``started``, nothing else.
* ``seq``: step sequence numbers are unique within a run.
* ``no_outcome``: a ``done`` tool step has an outcome with a final status.
* ``attempt_numbers``: a tool step's attempts are numbered 1..n without gap or repeat.
* ``attempt_orphan``: every attempt belongs to a step of its run.
* ``final_attempt``: only the last attempt may have a final status (ok, err, cancelled,
  exhausted); every earlier one failed or was interrupted, so a retry followed it.
* ``outcome_attempts``: a done tool step's last attempt has the outcome's status and the
  outcome counts as many attempts as the journal holds.
* ``unsettled_step``: a finished or failed run has no step in flight or pending.
* ``after_end``: no step was written after the run settled (step times <= run time).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import LashflowError
from ..states import SETTLED, STEP_STATUSES, AttemptStatus, RunStatus, StepStatus
from .base import AttemptRecord, RunRecord, StepRecord, Store

__all__ = ["Problem", "check_run", "check_store"]

FINAL_TOOL_STATUSES = frozenset({"ok", "err", "failed", "exhausted", "cancelled"})
RETRIED_ATTEMPT_STATUSES = frozenset({AttemptStatus.FAILED, AttemptStatus.INTERRUPTED})
CLOCK_SLACK = 1.0  # seconds: steps and runs are stamped by the same clock, different calls


@dataclass(frozen=True, slots=True)
class Problem:
    run_id: str
    step_key: str | None
    rule: str
    message: str

    def __str__(self) -> str:
        where = f"{self.run_id}/{self.step_key}" if self.step_key else self.run_id
        return f"{where}: [{self.rule}] {self.message}"


def _attempt_problems(run_id: str, step: StepRecord,
                      rows: list[AttemptRecord]) -> Iterable[Problem]:
    numbers = sorted(a.attempt for a in rows)
    if numbers != list(range(1, len(numbers) + 1)):
        yield Problem(run_id, step.step_key, "attempt_numbers",
                      f"attempts numbered {numbers}, expected 1..{len(numbers)}")
        return
    ordered = sorted(rows, key=lambda a: a.attempt)
    for row in ordered[:-1]:
        if row.status not in RETRIED_ATTEMPT_STATUSES:
            yield Problem(run_id, step.step_key, "final_attempt",
                          f"attempt {row.attempt} is {row.status} but attempt "
                          f"{ordered[-1].attempt} followed it")
    if step.status != StepStatus.DONE or not isinstance(step.outcome, dict):
        return
    last = ordered[-1] if ordered else None
    status = step.outcome.get("status")
    if last is not None and last.status != status:
        yield Problem(run_id, step.step_key, "outcome_attempts",
                      f"the outcome is {status} but the last attempt is {last.status}")
    counted = step.outcome.get("attempts")
    if ordered and isinstance(counted, int) and counted != len(ordered):
        yield Problem(run_id, step.step_key, "outcome_attempts",
                      f"the outcome counts {counted} attempts, the journal holds {len(ordered)}")


def check_run(run: RunRecord, steps: list[StepRecord], attempts: list[AttemptRecord], *,
              check_times: bool = True) -> list[Problem]:
    """The problems of one run's journal (see the module doc for the rules)."""
    problems: list[Problem] = []
    run_id = run.run_id
    by_step: dict[str, list[AttemptRecord]] = defaultdict(list)
    for attempt in attempts:
        by_step[attempt.step_key].append(attempt)
    known = {s.step_key for s in steps}
    for step_key in by_step:
        if step_key not in known:
            problems.append(Problem(run_id, step_key, "attempt_orphan",
                                    "attempts recorded for a step the journal does not hold"))
    seqs = [s.seq for s in steps]
    if len(seqs) != len(set(seqs)):
        problems.append(Problem(run_id, None, "seq", "two steps share a sequence number"))
    for step in steps:
        if step.status not in STEP_STATUSES:
            problems.append(Problem(run_id, step.step_key, "step_status",
                                    f"unknown step status {step.status!r}"))
        if step.kind == "tool":
            outcome = step.outcome
            if step.status == StepStatus.DONE and (not isinstance(outcome, dict)
                                          or outcome.get("status") not in FINAL_TOOL_STATUSES):
                problems.append(Problem(run_id, step.step_key, "no_outcome",
                                        f"a done tool step has no final outcome: {outcome!r:.80}"))
            problems.extend(_attempt_problems(run_id, step, by_step.get(step.step_key, [])))
        if run.status in (RunStatus.FINISHED, RunStatus.FAILED) and step.status != StepStatus.DONE:
            problems.append(Problem(run_id, step.step_key, "unsettled_step",
                                    f"the run is {run.status} but this step is {step.status}"))
        if (check_times and run.status in SETTLED
                and step.updated_at > run.updated_at + CLOCK_SLACK):
            problems.append(Problem(run_id, step.step_key, "after_end",
                                    f"written at {step.updated_at:.3f}, after the run settled "
                                    f"at {run.updated_at:.3f}"))
    return problems


async def check_store(store: Store, run_ids: Iterable[str] | None = None, *,
                      check_times: bool = True) -> list[Problem]:
    """Check every run (or ``run_ids``); a journal that cannot be read is a problem too."""
    runs: list[Any]
    if run_ids is None:
        runs = await store.list_runs()
    else:
        runs = [r for r in [await store.get_run(i) for i in run_ids] if r is not None]
    problems: list[Problem] = []
    for run in runs:
        try:
            steps, attempts = await store.load_journal(run.run_id)
        except LashflowError as exc:
            problems.append(Problem(run.run_id, exc.details.get("step"), "unreadable", exc.message))
            continue
        problems.extend(check_run(run, steps, attempts, check_times=check_times))
    return problems
