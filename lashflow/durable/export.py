"""Exported runs: a stable JSON document of runs' sources, inputs and journals.

A project keeps such documents as test fixtures and replays them against its edited
workflows (``lashflow.testing.Replayer``), the way it would verify the runs in flight.
The format is versioned (``format``/``version``) and documented in docs/operations.md.
It holds no completion key (a pending outcome's key is dropped, any string shaped like
a key is replaced) and nothing of the database's secret, leases or worker notes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..states import ATTEMPT_STATUS, RUN_STATUS, STEP_STATUS
from ..store.base import AttemptRecord, RunRecord, StepRecord
from .programs import source_digest

FORMAT = "lashflow-runs"
VERSION = 1
KEY_PREFIX = "lfk_"
REDACTED_KEY = "lfk_<redacted>"


@dataclass(slots=True)
class ExportedRun:
    """One run read back from a document: what verification needs of it."""

    run: RunRecord
    source: str
    steps: list[StepRecord]
    attempts: list[AttemptRecord]


def _scrub(value: Any) -> Any:
    """``value`` with every string shaped like a completion key replaced."""
    if isinstance(value, str):
        return REDACTED_KEY if value.startswith(KEY_PREFIX) else value
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    if isinstance(value, dict):
        return {key: _scrub(item) for key, item in value.items()}
    return value


def _step(step: StepRecord) -> dict[str, Any]:
    outcome = step.outcome
    if step.kind == "tool" and isinstance(outcome, dict):
        outcome = {k: v for k, v in outcome.items() if k not in ("key", "traceback")}
    detail = {k: v for k, v in step.detail.items() if k in ("args", "width", "retry",
                                                              "wake_at", "mode")}
    return {"step_key": step.step_key, "seq": step.seq, "kind": step.kind, "tool": step.tool,
            "args_hash": step.args_hash, "status": step.status, "outcome": _scrub(outcome),
            "detail": _scrub(detail), "created_at": step.created_at,
            "updated_at": step.updated_at}


def _attempt(attempt: AttemptRecord) -> dict[str, Any]:
    return {"step_key": attempt.step_key, "attempt": attempt.attempt, "status": attempt.status,
            "code": attempt.code, "message": _scrub(attempt.message),
            "started_at": attempt.started_at, "finished_at": attempt.finished_at}


def run_entry(run: RunRecord, source: str, steps: list[StepRecord],
              attempts: list[AttemptRecord]) -> dict[str, Any]:
    """One run of a document."""
    return {"run_id": run.run_id, "process": run.process, "status": run.status,
            "parent_run_id": run.parent_run_id, "created_at": run.created_at,
            "updated_at": run.updated_at, "version": run.meta.get("version"),
            "input": _scrub(run.input), "source_hash": run.source_hash, "source": source,
            "retries": run.meta.get("retries", []),
            "steps": [_step(step) for step in sorted(steps, key=lambda s: s.seq)],
            "attempts": [_attempt(attempt) for attempt in attempts]}


def document(runs: list[dict[str, Any]], exported_at: float) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "exported_at": exported_at, "runs": runs}


def _bad(why: str) -> UsageError:
    return UsageError(f"not a lashflow runs export: {why}", code="bad_export",
                      hint="make one with `lashflow export RUN... > runs.json`")


def load_document(document_or_path: Any) -> list[ExportedRun]:
    """The runs of a document (a parsed dict, JSON text, or a path to a JSON file)."""
    data = document_or_path
    if isinstance(data, (str, os.PathLike)) and not str(data).lstrip().startswith("{"):
        try:
            with open(data, encoding="utf-8") as handle:
                data = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {data}: {exc.strerror or exc}",
                             code="file_not_found") from None
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise _bad(f"invalid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _bad(f"its `format` is not {FORMAT!r}")
    if data.get("version") != VERSION:
        raise _bad(f"version {data.get('version')!r}; this lashflow reads version {VERSION}")
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise _bad("`runs` is not a list")
    return [_read_run(entry, index) for index, entry in enumerate(runs)]


def _read_run(entry: Any, index: int) -> ExportedRun:
    try:
        run_id, source = entry["run_id"], entry["source"]
        run = RunRecord(run_id, source_digest(source), entry.get("process"), entry["input"],
                        "", RUN_STATUS[entry.get("status", "waiting")],
                        parent_run_id=entry.get("parent_run_id"),
                        created_at=entry.get("created_at") or 0.0,
                        updated_at=entry.get("updated_at") or 0.0,
                        meta={"retries": entry.get("retries") or []})
        steps = [StepRecord(run_id, s["step_key"], s["kind"], s.get("tool"), s.get("args_hash"),
                            STEP_STATUS[s["status"]], s.get("outcome"), dict(s.get("detail") or {}), s["seq"],
                            s.get("created_at") or 0.0, s.get("updated_at") or 0.0)
                 for s in entry["steps"]]
        attempts = [AttemptRecord(run_id, a["step_key"], a["attempt"], ATTEMPT_STATUS[a["status"]], a.get("code"),
                                  a.get("message"), {}, a.get("started_at"), a.get("finished_at"))
                    for a in entry.get("attempts", [])]
    except (KeyError, TypeError, AttributeError) as exc:
        raise _bad(f"run {index + 1} lacks a field or has one of the wrong kind ({exc})") from None
    return ExportedRun(run, source, steps, attempts)


__all__ = ["FORMAT", "VERSION", "ExportedRun", "document", "load_document", "run_entry"]
