"""A run's journal as the rows and plain lines ``lashflow show`` prints.

Shared by the CLI (which adds colour on a terminal) and ``lashflow.testing`` (whose failed
assertions print the journal): one place decides what a row says. Plain text only: no
terminal, no rich; times are written by the ``when`` the caller passes.
"""

from __future__ import annotations

from typing import Any, Callable

from ..states import RunStatus, StepStatus
from ..tools.outcome import OutcomeStatus

PREVIEW_WIDTH = 72


def seconds(value: float | None) -> str:
    """``0.8 ms`` / ``12 ms`` / ``1.24 s`` / ``3m 05s`` / ``2h 01m``."""
    if value is None:
        return "-"
    if value < 0.001:
        return f"{value * 1000:.1f} ms"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.2f} s"
    if value < 3600:
        return f"{int(value // 60)}m {int(value % 60):02d}s"
    return f"{int(value // 3600)}h {int(value % 3600 // 60):02d}m"


def one_line(text: str, width: int = PREVIEW_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def preview(value: Any, width: int = PREVIEW_WIDTH) -> str:
    """A table cell's view of a value: through the output budget, then to one line."""
    if value is None:
        return ""
    from ..tools import ToolOutputBudgetConfig, project_output

    text = value if isinstance(value, str) else project_output(
        value, ToolOutputBudgetConfig(limit=width * 4, max_lines=4), hint="")
    return one_line(text, width)


def wait_what(wait: Any, when: Callable[[float | None], str]) -> str:
    """What a wait is, in words (the ``Wait`` objects of ``RunOutcome.waiting``), times
    through ``when``."""
    child = f" in child run {wait.child_run_id}" if wait.child_run_id and wait.kind != "child" else ""
    if wait.kind == "completion":
        if getattr(wait, "state", None) == "resolved":
            return f"completion key for {wait.tool}: answered, the run has not resumed yet{child}"
        until = f", deadline {when(wait.until)}" if wait.until else ""
        return f"completion key for {wait.tool}{until}{child}"
    if wait.kind == "sleep":
        return f"timer until {when(wait.until)}{child}"
    if wait.kind == "signal":
        return f"signal `{wait.signal}`{child}"
    if wait.kind == "child":
        return f"child run {wait.child_run_id}"
    if wait.kind == "rate":
        limit = getattr(wait, "limit", None)
        if getattr(wait, "state", None) == "global":
            return (f"{wait.tool}: every global concurrency slot is taken (looks again "
                    f"{when(wait.until)}){child}")
        if getattr(wait, "state", None) == "undefined":
            return (f"rate limit `{limit}` of {wait.tool}, which is not defined (looked at "
                    f"again {when(wait.until)}){child}")
        named = f" (limit `{limit}`)" if limit and not limit.startswith("tool:") else ""
        return f"{wait.tool}: rate limited until {when(wait.until)}{named}{child}"
    return str(wait.kind) + child


def step_target(step: Any) -> str:
    if step.kind == "tool":
        return step.tool or ""
    if step.kind == "wait_signal":
        return f"signal {step.tool}" if step.tool else "signal"
    if step.kind == "start":
        return f"start {step.tool}" if step.tool else "start"
    if step.kind == "await" and isinstance(step.outcome, dict):
        return "await child"
    return step.tool or ""


def step_preview_value(step: Any) -> Any:
    """What a step produced, for the preview: tool values, failure messages, payloads."""
    outcome = step.outcome
    if step.kind == "tool" and isinstance(outcome, dict):
        if outcome.get("status") == OutcomeStatus.OK:
            return outcome.get("value")
        return outcome.get("message") or outcome.get("value") or outcome.get("status")
    if step.projected is not None:
        return step.projected
    return outcome


def _tail_kept(projected: Any) -> str | None:
    """The kept tail of a budgeted text laid out tail-first (``@tool(output_tail=True)``:
    marker, hint, then the tail), else None."""
    if not isinstance(projected, str) or not projected.startswith("..."):
        return None
    marker, _, rest = projected.partition("\n\n")
    if not marker.endswith("truncated...") or "\n\n" not in rest:
        return None
    return rest.partition("\n\n")[2]


def step_cell(step: Any, width: int = PREVIEW_WIDTH) -> tuple[str, bool]:
    """A step's outcome cell and whether something of it was cut: a tool whose output
    keeps its tail shows the end (``…`` first), any other the start (``…`` last)."""
    kept = _tail_kept(getattr(step, "projected", None)) if step.kind == "tool" else None
    if kept is not None:
        flat = " ".join(kept.split())
        return ("…" + flat[-(width - 1):] if len(flat) >= width else "…" + flat), True
    value = step_preview_value(step)
    text = preview(value, width)
    whole = value if isinstance(value, str) else None
    cut = text.endswith("…") or "truncated..." in text or (
        whole is not None and " ".join(whole.split()) != text)
    return text, cut


def status_text(summary: Any) -> str:
    """A run's status as an operator needs it: a ``running`` run nobody drives says so."""
    if summary.owner_gone:
        return f"{summary.status.value} (owner gone: lashflow recover)"
    return str(summary.status.value)


def journal_rows(detail: Any) -> list[tuple[str, ...]]:
    """One row per step: number, key, kind, target, state, attempts, took, at, outcome.
    ``at`` is the time since the run was created; a step a fork copied from its original
    was recorded before that, and says ``copied``."""
    run = detail.summary
    rows: list[tuple[str, ...]] = []
    for i, step in enumerate(detail.steps, 1):
        started, finished = step.timing()
        offset = None if started is None else started - run.created_at
        at = "" if offset is None else ("copied" if offset < 0 else f"+{seconds(offset)}")
        duration = None if started is None or finished is None else finished - started
        attempts = "" if not step.attempts else str(len(step.attempts))
        state = step.state
        if state == StepStatus.PENDING and run.status == RunStatus.CANCELLED:
            state = "cancelled"  # a sleep, signal or child wait the cancel ended
        rows.append((str(i), step.step_key, step.kind, step_target(step), state,
                     attempts, seconds(duration) if duration is not None else "", at,
                     step_cell(step)[0]))
    return rows


def first_cut(detail: Any) -> str | None:
    """The key of the first step whose outcome the table had to cut (``lashflow output``
    then shows it whole), or None when nothing was cut."""
    return next((step.step_key for step in detail.steps if step_cell(step)[1]), None)


def journal_lines(detail: Any, when: Callable[[float | None], str],
                  rows: list[tuple[str, ...]] | None = None) -> list[str]:
    """The run's header and its journal, one line per step, as ``show`` prints them to a
    pipe."""
    run = detail.summary
    lines = [f"run {run.run_id}: {status_text(run)}",
             f"  process {run.process or '(main block)'}"
             f"{f' v{run.version}' if run.version is not None else ''}"
             f"   file {detail.file or '-'}",
             f"  created {when(run.created_at)}   updated {when(run.updated_at)}"
             + (f"   parent {run.parent_run_id}" if run.parent_run_id else ""),
             f"  input {preview(detail.input, 100)}"]
    for (n, key, kind, target, state, attempts, duration, offset, text) in (
            rows if rows is not None else journal_rows(detail)):
        lines.append(f"  {n:>3} {key:<24} {kind:<11} {target:<24} {state:<9} "
                     f"{('x' + attempts) if attempts else '':<4} {duration:>9} {offset:>10}  "
                     f"{text}")
    return lines


__all__ = ["PREVIEW_WIDTH", "first_cut", "journal_lines", "journal_rows", "step_cell", "one_line", "preview", "seconds",
           "status_text", "step_preview_value", "step_target", "wait_what"]
