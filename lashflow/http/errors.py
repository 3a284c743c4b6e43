"""How the HTTP API refuses: the CLI's error codes, each with its HTTP status."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

STATUS_BY_CODE = {
    "unauthorized": 401,
    "unknown_run": 404,
    "unknown_step": 404,
    "unknown_completion_key": 404,
    "unknown_process_file": 404,
    "unknown_schedule": 404,
    "unknown_job": 404,
    "schedule_exists": 409,
    "unknown_queue": 404,
    "queue_exists": 409,
    "unknown_rate_limit": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "completion_already_resolved": 409,
    "run_conflict": 409,
    "run_busy": 409,
    "run_settled": 409,
    "run_paused": 409,
    "run_not_retryable": 409,
    "completion_expired": 410,
    "body_too_large": 413,
    "too_many_attempts": 429,
    "internal_error": 500,
}


def error_response(code: str, message: str, headers: dict[str, str] | None = None,
                   where: dict[str, str] | None = None) -> JSONResponse:
    """``{"error": {"code", "message"}}`` (plus ``path``/``hint`` given in ``where``) with
    the status the code maps to (400 by default: a request the user can fix)."""
    return JSONResponse({"error": {"code": code, "message": message, **(where or {})}},
                        status_code=STATUS_BY_CODE.get(code, 400), headers=headers or None)


class HttpError(Exception):
    """Raised by a handler to refuse with a code and message."""

    def __init__(self, code: str, message: str, *, path: str | None = None,
                 **headers: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.headers, self.path = code, message, headers, path


def path_name(request: Any, code: str, what: str) -> str:
    """The ``{name}`` of a resource's route (a queue, schedule, rate limit); no name has
    a NUL, so one with it is refused as unknown (``code``) before reaching the store."""
    name = request.path_params["name"]
    if "\x00" in name:
        raise HttpError(code, f"no {what} has a NUL in its name")
    return str(name)


__all__ = ["HttpError", "STATUS_BY_CODE", "error_response", "path_name"]
