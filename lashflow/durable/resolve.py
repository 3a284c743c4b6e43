"""Recording a step's outcome by hand (``lashflow resolve-step``): the missing piece for
a non-idempotent call that was cut off but did happen, a failed call whose effect an
operator made by other means, or a pending one answered out of band (ADR 0032).

The step's row becomes ``done`` with the given result (checked against the tool's output
schema) or error, and a new attempt records the operator's action (who, when, why); the
attempts it had stay. Then the run goes on: a stopped run is queued (its replay takes
the recorded outcome and continues after it), a waiting one is woken through the step's
completion row (settled with the same answer, so its key is spent).
"""

from __future__ import annotations

from typing import Any

from ..errors import RunBusy, UsageError
from ..interp.schema import first_failure
from ..json_kinds import check_json_text
from ..states import STOPPED, AttemptStatus, RunStatus, StepStatus
from ..store import AttemptRecord, Commit, Reopening, StepRecord, Store
from ..store.leases import may_claim
from ..tools import ToolOutcome, ToolResult
from ..tools.completion import Resolution
from ..tools.outcome import OutcomeStatus
from ..tools.clock import Clock
from .operator import _find_step
from .order import display_order
from .pauses import operator_name
from .reads import Reads
from .replay import retired
from .tool_runner import ToolRunner

RESOLVABLE_RUNS = (STOPPED - {RunStatus.FINISHED}) | {RunStatus.WAITING}
MISSING: Any = object()


class Resolver:
    def __init__(self, store: Store, clock: Clock, reads: Reads, tools: ToolRunner) -> None:
        self.store = store
        self.clock = clock
        self.reads = reads
        self.tools = tools

    async def resolve(self, run_id: str, step: str, *, result: Any = MISSING,
                      error: str | None = None, reason: str | None = None,
                      by: str | None = None) -> StepRecord:
        """Record ``result`` (or ``error``) as the outcome of ``step`` (a step key or the
        row number ``show`` prints) and send the run on; the step as now recorded."""
        if (result is MISSING) == (error is None):
            raise UsageError("give exactly one of a result or an error message")
        run = await self.reads.require(run_id)
        if run.status not in RESOLVABLE_RUNS:
            raise UsageError(f"run {run_id} is {run.status}: only the step of a stopped "
                             "(needs_attention, failed, cancelled, paused) or waiting run "
                             "can be resolved by hand", code="run_not_resolvable")
        if not may_claim(run.lease_owner, run.lease_expires, None, self.clock.now(),
                         steal_from_dead=False):
            raise RunBusy(f"run {run_id} is being driven by a worker right now; pause it "
                          "first, or wait until it stops")
        steps, attempts = await self.store.load_journal(run_id)
        shown = [s for s in display_order(steps) if not retired(s, run.meta.get("retries")
                                                                 or [])]
        record = shown[_find_step(shown, step, run_id)]
        self._check_step(run.status, record)
        now = self.clock.now()
        if error is not None:
            outcome = ToolOutcome.from_result(ToolResult.err(error), started_at=now,
                                              finished_at=now)
        else:
            check_json_text(result)
            self.tools.load_for_run(run)
            self._check_output(record, result)
            outcome = ToolOutcome.from_result(ToolResult.ok(result), started_at=now,
                                              finished_at=now)
        action = {"by": by or operator_name(), "at": now, "action": "resolve_step"}
        if reason:
            action["reason"] = reason
        if run.status == RunStatus.WAITING:  # its key is spent first: a late answer loses to this one
            answer = ToolResult.err(error) if error is not None else ToolResult.ok(result)
            _, verdict = await self.store.completion_settle(
                run_id, record.step_key, Resolution.from_result(answer, at=now).to_json(),
                now=now, respect_deadline=False)
            if verdict != "won":
                raise UsageError(f"step {record.step_key} was answered through its key "
                                 f"meanwhile; `lashflow resume {run_id}` takes that answer",
                                 code="completion_already_resolved")
        mine = [a for a in attempts if a.step_key == record.step_key]
        # its attempts as rows of their own first: the step row one may ride in is rewritten
        kept = [AttemptRecord(a.run_id, a.step_key, a.attempt, a.status, a.code, a.message,
                              a.detail, a.started_at, a.finished_at) for a in mine]
        if kept:
            await self.store.commit(Commit(run_id, None, attempts=kept))
        done = StepRecord(run_id, record.step_key, record.kind, record.tool, record.args_hash,
                          StepStatus.DONE, outcome.to_json(), dict(record.detail, resolved=action),
                          record.seq, record.created_at, now)
        said = f"resolved by hand by {action['by']}" + (f": {reason}" if reason else "")
        attempt = AttemptRecord(run_id, record.step_key,
                                max((a.attempt for a in mine), default=0) + 1,
                                AttemptStatus.ERR if error is not None else AttemptStatus.OK,
                                "resolved_by_operator" if error is None else "tool_error",
                                said if error is None else f"{error} ({said})",
                                {"operator": action}, now, now)
        await self.store.commit(Commit(run_id, None, steps=[done], attempts=[attempt]))
        await self._go_on(run_id, run.status, record, action, now)
        return done

    @staticmethod
    def _check_step(status: RunStatus, record: StepRecord) -> None:
        where = f"step {record.step_key} ({record.tool or record.kind})"
        if record.kind != "tool":
            raise UsageError(f"{where} is no tool call: only a tool step's outcome can be "
                             "recorded by hand", code="step_not_resolvable")
        failed = record.status == StepStatus.DONE and not (isinstance(record.outcome, dict)
                                                  and record.outcome.get("status") == OutcomeStatus.OK)
        if record.status not in (StepStatus.STARTED, StepStatus.PENDING) and not failed:
            raise UsageError(f"{where} succeeded; only an interrupted, failed or pending "
                             "step can be resolved by hand", code="step_not_resolvable")
        if status == RunStatus.WAITING and record.status != StepStatus.PENDING:
            raise UsageError(f"{where} is not what the run waits on; a waiting run's "
                             "pending step can be resolved", code="step_not_resolvable")

    def _check_output(self, record: StepRecord, result: Any) -> None:
        module, _, name = (record.tool or "").rpartition(".")
        found = self.tools.catalog().operation(module, name)
        if found is None:
            raise UsageError(f"tool {record.tool} is not loaded here, so the result cannot be "
                             "checked against its output schema", code="missing_tools",
                             hint="pass the module that defines it with --tools")
        failure = first_failure(result, found.output_schema) if found.output_schema else None
        if failure is not None:
            path, why = failure
            raise UsageError(f"the result does not fit the output schema of {record.tool}: "
                             f"{path}: {why}", code="input_invalid", path=path)

    async def _go_on(self, run_id: str, status: str, record: StepRecord,
                     action: dict[str, Any], now: float) -> None:
        def note(meta: dict[str, Any]) -> None:
            meta.setdefault("operator_actions", []).append(dict(action, step=record.step_key))

        if status == RunStatus.WAITING:  # parked: due now, its replay takes the recorded outcome
            await self.store.update_meta(run_id, note)
            await self.store.mark_due(run_id, now)
            return
        if not await self.store.reopen_runs([Reopening(run_id, note, [record.step_key])], now):
            raise RunBusy(f"run {run_id} changed while its step was being resolved; look "
                          "again (the step's outcome is recorded)")


__all__ = ["RESOLVABLE_RUNS", "Resolver"]
