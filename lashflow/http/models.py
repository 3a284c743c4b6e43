"""The request bodies of the HTTP API, as pydantic models (they also make /openapi.json)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompletionBody(_Body):
    """A webhook's answer for a completion key: exactly one of ``result`` (any JSON, null
    included) or ``error`` (a message: the process sees ``{ok: false, error}``)."""

    result: Any = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> "CompletionBody":
        given = {"result", "error"} & self.model_fields_set
        if len(given) != 1:
            raise ValueError("give exactly one of `result` (JSON) or `error` (a message)")
        return self


class StartRun(_Body):
    """Start a run of a process file from the server's processes directory."""

    file: str = Field(description="A .lash file, relative to the server's --processes dir.")
    process: str | None = Field(None, description="The process to run (default: the only "
                                                  "one, or the main block).")
    input: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = Field(None, description="Idempotency: the same id with the same "
                                                 "file and input gives back the same run.")


class SignalBody(_Body):
    payload: Any = None


class CancelBody(_Body):
    reason: str | None = None


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every refusal: ``{"error": {"code", "message"}}`` with the CLI's codes."""

    error: ErrorDetail


__all__ = ["CancelBody", "CompletionBody", "ErrorBody", "ErrorDetail", "SignalBody", "StartRun"]
