"""Reading a command's ``.lash`` file: one clear error, or the text for caret excerpts."""

from __future__ import annotations

from pathlib import Path

from ..errors import LashflowError


def read_source(file: Path) -> str:
    """A ``.lash`` file's text, or a one-line ``file_not_found``/``usage_error``/
    ``limit_exceeded`` (over the source size limit)."""
    from ..durable.programs import read_source_file

    return read_source_file(file)


def source_or_none(file: Path | None) -> str | None:
    """The text for caret excerpts, if the file is readable (errors are reported later)."""
    if file is None:
        return None
    try:
        return read_source(file)
    except LashflowError:
        return None
