"""What the Engine hands back to users: run outcomes, waits, journal views."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..states import RunStatus


@dataclass(slots=True)
class RunError:
    code: str
    message: str
    kind: str | None = None
    line: int | None = None
    column: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "RunError | None":
        if not data:
            return None
        return cls(data["code"], data["message"], data.get("kind"), data.get("line"),
                   data.get("column"))


@dataclass(slots=True)
class Wait:
    """One thing a parked run waits on, with the CLI command that would resolve it."""

    kind: str  # completion | sleep | signal | child
    step: str
    resolve: str
    tool: str | None = None
    key: str | None = None
    until: float | None = None
    signal: str | None = None
    child_run_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Wait":
        return cls(**data)


@dataclass(slots=True)
class RunOutcome:
    run_id: str
    status: RunStatus
    result: Any = None
    error: RunError | None = None
    waiting: list[Wait] = field(default_factory=list)
    prints: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"run_id": self.run_id, "status": self.status.value}
        if self.status is RunStatus.FINISHED:
            data["result"] = self.result
        if self.error is not None:
            data["error"] = self.error.to_json()
        if self.waiting:
            data["waiting"] = [wait.to_json() for wait in self.waiting]
        if self.prints:
            data["prints"] = list(self.prints)
        return data


@dataclass(slots=True)
class AttemptView:
    attempt: int
    status: str
    code: str | None
    message: str | None
    started_at: float | None
    finished_at: float | None
    usage: dict[str, Any] | None = None


@dataclass(slots=True)
class StepView:
    """``Engine.steps()`` rows: the journal in order, outcome full and projected."""

    step_key: str
    kind: str
    tool: str | None
    status: str
    attempts: list[AttemptView]
    outcome: Any
    projected: str | None
