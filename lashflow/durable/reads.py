"""The read side: what the engine tells about runs, built from as few store reads as
possible. The CLI and the HTTP service present what these return and compute nothing."""

from __future__ import annotations

from typing import Any

from ..errors import JournalCorrupt, UnknownRun
from ..states import RunStatus
from ..store import RunRecord, StepRecord, Store
from .journal import check_journal
from .prints import Prints
from .outcome import AttemptView, RunError, RunOutcome, StepView, Wait
from .tool_runner import ToolRunner


class Reads:
    def __init__(self, store: Store, tools: ToolRunner) -> None:
        self.store = store
        self.tools = tools

    async def require(self, run_id: str) -> RunRecord:
        run = await self.store.get_run(run_id)
        if run is None:
            raise UnknownRun(f"no run with id {run_id!r}")
        return run

    def outcome_of(self, run: RunRecord, prints: list[str] | None = None) -> RunOutcome:
        return RunOutcome(
            run_id=run.run_id, status=RunStatus(run.status),
            result=run.result if run.status == "finished" else None,
            error=RunError.from_json(run.error),
            waiting=[Wait.from_json(w) for w in run.waiting] if run.status == "waiting" else [],
            prints=list(prints or ()))

    async def get(self, run_id: str) -> RunOutcome:
        run = await self.require(run_id)
        try:
            steps, _ = await self.store.load_journal(run_id)
            check_journal(run_id, steps)
        except JournalCorrupt:
            steps = []  # the run's own row still reads; steps() reports the corruption
        prints = [s.outcome["text"] for s in steps if s.kind == "print" and s.outcome]
        return self.outcome_of(run, prints=Prints.of(prints, self.tools.project).texts(run_id))

    async def list(self, status: str | None = None) -> list[RunOutcome]:
        return [self.outcome_of(r) for r in await self.store.list_runs(status)]

    async def steps(self, run_id: str) -> list[StepView]:
        await self.require(run_id)
        steps, attempts = await self.store.load_journal(run_id)
        check_journal(run_id, steps)
        by_step: dict[str, list[AttemptView]] = {}
        for a in attempts:
            by_step.setdefault(a.step_key, []).append(AttemptView(
                a.attempt, a.status, a.code, a.message, a.started_at, a.finished_at,
                a.detail.get("usage")))
        return [StepView(s.step_key, s.kind, s.tool, s.status, by_step.get(s.step_key, []),
                         s.outcome, self.preview(s)) for s in steps]

    def preview(self, step: StepRecord) -> str | None:
        """What the run history shows of a step, through the output budget."""
        outcome: Any = step.outcome
        if outcome is None:
            return None
        if step.kind == "tool":
            if outcome.get("status") == "ok":
                return self.tools.project(outcome.get("value"), tool=step.tool,
                                          run_id=step.run_id, step_key=step.step_key)
            return outcome.get("message") or outcome.get("status")
        if step.kind in ("print", "yield", "wake"):
            return self.tools.project(outcome.get("text", ""))
        return self.tools.project(outcome)

    async def waiting(self) -> list[tuple[str, Wait]]:
        out = []
        for run in await self.store.list_runs("waiting"):
            out.extend((run.run_id, Wait.from_json(w)) for w in run.waiting)
        return out


__all__ = ["Reads"]
