"""One log line per run transition, for ``lashflow worker`` and ``lashflow serve``.

A line says when (ISO 8601, UTC, milliseconds), which run, what it became and at which
step: the step it parked on, or the last step it recorded. ``text`` is for a terminal,
``json`` is one JSON object per line for log shippers. The lines are built from the
engine's progress events, which carry no tool input or output, no completion key and
no secret, so none can reach a log this way.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable
from ..json_text import ascii_compact
from ..states import RunStatus

FORMATS = ("text", "json")


class RunLog:
    """An ``Engine`` listener writing run transitions with ``write`` (one line each)."""

    def __init__(self, write: Callable[[str], None], fmt: str = "text",
                 now: Callable[[], float] | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"log format {fmt!r}: use one of {', '.join(FORMATS)}")
        self._write = write
        self._json = fmt == "json"
        self._now = now or (lambda: datetime.now(timezone.utc).timestamp())
        self._last_step: dict[str, str] = {}  # run id -> last step recorded in its drive

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        run_id = event.get("run_id")
        if not run_id:
            return
        if kind == "step":
            self._last_step[run_id] = str(event.get("step"))
        elif kind == "drive":
            self._line(run_id, RunStatus.RUNNING, None, {
                "process": event.get("process") or "main",
                "resumed": bool(event.get("resumed"))})
        elif kind == "run":
            waits = event.get("waiting") or []
            step = waits[0][1] if waits else self._last_step.get(run_id)
            self._last_step.pop(run_id, None)
            extra: dict[str, Any] = {}
            if waits:
                extra["waits"] = sorted({wait_kind for wait_kind, _ in waits})
            if event.get("error"):
                extra["error"] = event["error"]
            self._line(run_id, str(event.get("status")), step, extra)

    def _line(self, run_id: str, status: str, step: str | None, extra: dict[str, Any]) -> None:
        stamp = datetime.fromtimestamp(self._now(), timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
        if self._json:
            record: dict[str, Any] = {"ts": stamp, "event": "run", "run_id": run_id,
                                      "status": status}
            if step is not None:
                record["step"] = step
            record.update(extra)
            self._write(ascii_compact(record))
            return
        words = [stamp, "run", run_id, status]
        if step is not None:
            words += ["step", step]
        for key, value in extra.items():
            shown = ",".join(value) if isinstance(value, list) else str(value).lower() \
                if isinstance(value, bool) else str(value)
            words.append(f"{key}={shown}")
        self._write(" ".join(words))


__all__ = ["FORMATS", "RunLog"]
