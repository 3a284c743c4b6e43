"""Character offsets <-> LSP positions (0-based line, column in UTF-16 code units, the
protocol's default encoding), for one version of a document's text."""

from __future__ import annotations

import bisect
import re

_NEWLINE = re.compile("\n")


def _utf16_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


class LineIndex:
    __slots__ = ("text", "starts")

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]

    def position(self, offset: int) -> tuple[int, int]:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, _utf16_len(self.text[self.starts[line]:offset])

    def offset(self, line: int, character: int) -> int:
        if line >= len(self.starts):
            return len(self.text)
        start = self.starts[max(0, line)]
        end = self.starts[line + 1] - 1 if line + 1 < len(self.starts) else len(self.text)
        segment = self.text[start:end]
        if segment.isascii():
            return start + min(character, len(segment))
        units = 0
        for i, ch in enumerate(segment):
            if units >= character:
                return start + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return end
