"""Assertions about runs whose failure shows the run's journal as ``lashflow show`` does.

``assert run.status == "finished"`` fails with two words; ``assert_finished(run)`` fails
with the status, the error and every step the run recorded, so the reason is on screen.
Times are shown in UTC, as ``lashflow show --utc`` would.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable

from ..states import RunStatus

if TYPE_CHECKING:
    from lashflow.durable.outcome import RunDetail

    from .mocks import ToolMock

# A ``Run`` and a ``WorkflowEnv`` are taken as they come: the environment imports this
# module, so naming its types here would close an import cycle.
Run = Any
WorkflowEnv = Any

_UNSET: Any = object()


def utc(moment: float | None) -> str:
    """ISO 8601 in UTC (``-`` for no moment)."""
    if moment is None:
        return "-"
    return datetime.fromtimestamp(moment, timezone.utc).isoformat(timespec="seconds")


def render_detail(detail: "RunDetail") -> str:
    """The run as ``lashflow show --utc`` prints it to a pipe."""
    from lashflow.durable.timeline import journal_lines, preview, status_text, wait_what

    run = detail.summary
    lines = journal_lines(detail, utc)
    lines += [f"child: {child.run_id} {status_text(child)}" for child in detail.children]
    lines += [f"print: {text}" for text in detail.prints]
    lines += [f"signal not taken yet: {sent['name']} {preview(sent['payload'], 80)}"
              for sent in detail.pending_signals]
    if run.status == RunStatus.FINISHED:
        lines.append("result: " + preview(detail.result, 200))
    if run.error is not None:
        kind = f"{run.error.kind}: " if run.error.kind else ""
        where = f" (line {run.error.line}, column {run.error.column})" if run.error.line else ""
        lines.append(f"error[{run.error.code}]: {kind}{run.error.message}{where}")
    lines += [f"  waiting on {wait_what(wait, utc)} (step {wait.step})" for wait in run.waiting]
    return "\n".join(lines)


def journal_text(run: "Run") -> str:
    """The run's journal, for a message."""
    return render_detail(run.detail)


def _fail(run: "Run", message: str) -> None:
    raise AssertionError(f"{message}\n\n{journal_text(run)}")


def assert_status(run: "Run", status: str) -> None:
    """The run is ``status`` (``finished``, ``waiting``, ``needs_attention``, ...)."""
    actual = run.status
    if actual != status:
        _fail(run, f"run {run.run_id} is {actual}, expected {status}")


def assert_finished(run: "Run", result: Any = _UNSET) -> None:
    """The run finished (with ``result``, when given)."""
    assert_status(run, RunStatus.FINISHED)
    if result is not _UNSET and run.result != result:
        _fail(run, f"run {run.run_id} finished with {run.result!r}, expected {result!r}")


def assert_step(run: "Run", which: str | int, *, state: str | None = None,
                attempts: int | None = None) -> None:
    """A journal row (by number, step key or tool) is in ``state`` (``ok``, ``err``,
    ``exhausted``, ``pending``, ``interrupted``, ...) after ``attempts`` attempts."""
    step = run.step(which)
    if state is not None and step.state != state:
        _fail(run, f"step {which!r} ({step.step_key}) is {step.state}, expected {state}")
    if attempts is not None and len(step.attempts) != attempts:
        _fail(run, f"step {which!r} ({step.step_key}) took {len(step.attempts)} attempt(s), "
                   f"expected {attempts}")


def assert_called(source: "WorkflowEnv | ToolMock", tool: str | None = None, *,
                  times: int | None = None, input: Any = _UNSET) -> None:
    """Tool ``tool`` was called (exactly ``times`` times; once at least with ``input``).
    ``source``: the environment (give ``tool``) or a mock. On failure the journals of
    the environment's runs are shown."""
    if not hasattr(source, "name"):  # the environment
        if tool is None:
            raise TypeError("assert_called(env, tool): name the tool")
        # told apart by attribute (importing the classes here would be a cycle)
        calls, env, name = source.calls_of(tool), source, tool  # type: ignore[union-attr]
    else:
        calls, env, name = source.calls, None, source.name
    problem = None
    if times is not None and len(calls) != times:
        problem = f"{name} was called {len(calls)} time(s), expected {times}"
    elif times is None and not calls:
        problem = f"{name} was never called"
    elif input is not _UNSET and all(call.input != input for call in calls):
        problem = f"{name} was never called with {input!r}"
    if problem is None:
        return
    listed = "".join(f"\n  call {i}: run {c.run_id} step {c.step} attempt {c.attempt} "
                     f"input {c.input!r}" for i, c in enumerate(calls, 1))
    shown = "" if env is None else _journals(env, {call.run_id for call in env.calls})
    raise AssertionError(f"{problem}{listed}{shown}")


def _journals(env: "WorkflowEnv", run_ids: Iterable[str]) -> str:
    def shown(run_id: str) -> str:
        return render_detail(env.call(lambda engine: engine.run_detail(run_id)))

    return "".join(f"\n\n{shown(run_id)}" for run_id in sorted(run_ids))


__all__ = ["assert_called", "assert_finished", "assert_status", "assert_step", "journal_text",
           "render_detail", "utc"]
