"""Canonical JSON, argument hashes and the JSON-path diff used by replay-mismatch reports."""

from __future__ import annotations

import hashlib
from typing import Any

from ..json_text import canonical as canonical_json


def digest(data: Any) -> str:
    return digest_text(canonical_json(data))


def digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def diff_paths(old: Any, new: Any, path: str = "$", limit: int = 8) -> list[str]:
    """JSON paths (``$.a[0].b``) where two JSON documents differ, first ``limit`` of them."""
    out: list[str] = []
    _diff(old, new, path, out, limit)
    return out


def _diff(old: Any, new: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                out.append(f"{path}.{key}")
            else:
                _diff(old[key], new[key], f"{path}.{key}", out, limit)
            if len(out) >= limit:
                return
    elif isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            if index >= len(old) or index >= len(new):
                out.append(f"{path}[{index}]")
            else:
                _diff(old[index], new[index], f"{path}[{index}]", out, limit)
            if len(out) >= limit:
                return
    elif old != new or type(old) is not type(new) and not (
            isinstance(old, (int, float)) and isinstance(new, (int, float))
            and not isinstance(old, bool) and not isinstance(new, bool)):
        out.append(path)


__all__ = ["canonical_json", "diff_paths", "digest", "digest_text"]
