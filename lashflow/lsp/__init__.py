"""The Lashlang language server (``lashflow lsp``): diagnostics as ``lashflow check``
gives them, completion, hover, go to definition, document symbols, formatting as
``lashflow fmt`` does, and renaming a local name; for any editor that speaks the
Language Server Protocol over stdio (docs/editors.md).

A presentation layer over ``lashflow.lang``, like the CLI and the HTTP service. Importing
this package loads nothing: pygls is imported when the server starts.
"""

from __future__ import annotations

__all__ = ["serve"]


def serve(tools: list[str]) -> None:
    """Serve one editor over stdin/stdout; ``tools``: extra tool specs (``--tools``)."""
    from lashflow.lsp.server import serve as _serve

    _serve(tools)
