"""The print texts a run's outcome carries, bounded.

The journal keeps every print in full; the outcome (what ``run`` and ``get`` hand back)
keeps each through the output budget and stops keeping them past ``KEPT_CHARS`` characters in all,
so a process printing without end grows neither the host's memory nor the outcome."""

from __future__ import annotations

from shlex import quote
from typing import Callable

KEPT_CHARS = 1024 * 1024


class Prints:
    __slots__ = ("_project", "_kept", "_size", "_dropped")

    def __init__(self, project: Callable[[str], str]) -> None:
        self._project = project
        self._kept: list[str] = []
        self._size = 0
        self._dropped = 0

    def add(self, text: str) -> None:
        if self._dropped:
            self._dropped += 1
            return
        shown = self._project(text)
        if self._size + len(shown) > KEPT_CHARS:
            self._dropped = 1
            return
        self._kept.append(shown)
        self._size += len(shown)

    def texts(self, run_id: str) -> list[str]:
        if not self._dropped:
            return list(self._kept)
        return self._kept + [f"({self._dropped} more prints are in the journal: "
                             f"lashflow show {quote(run_id)})"]

    @classmethod
    def of(cls, texts: list[str], project: Callable[[str], str]) -> "Prints":
        prints = cls(project)
        for text in texts:
            prints.add(text)
        return prints


__all__ = ["KEPT_CHARS", "Prints"]
