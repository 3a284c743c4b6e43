"""JSON as text: every encoder lashflow writes with, each built once, one name per shape.

``json.dumps`` with options builds a new encoder for every call, which a 1,000-member
fan-out's commit would pay thousands of times; and the same shape written in two places
must not drift (a digest of canonical JSON must match across layers). So:

- ``compact``: no spaces, non-ASCII kept (tool outputs, messages); ``compact_any`` the
  same, with anything that is not JSON written as ``str(value)``; ``stored`` the same,
  refusing NaN and Infinity (``ValueError``): what a journal row holds, read back by
  ``read_stored`` (a NaN an older version wrote reads as null);
- ``canonical``: compact with sorted keys (hashes of inputs and tool arguments);
- ``ascii_compact``: compact, ASCII only (the parts of tokens: completion keys, list
  cursors, log lines for collectors);
- ``line``: ``", "`` and ``": "`` separators, non-ASCII kept (the CLI's ``--json``);
  ``line_sorted`` the same with sorted keys (recorded arguments shown to a person);
- ``pretty``: indented by two, non-ASCII kept (a step's full output; ``sort_keys`` and
  ``lenient`` for the console's views).

Reading strict user JSON is ``lashflow.json_input``'s; ``loads`` here reads our own.
"""

from __future__ import annotations

import json
from typing import Any, Callable

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_COMPACT_ANY = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
_STORED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_STORED_DECODER = json.JSONDecoder(parse_constant=lambda name: None)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_ASCII_COMPACT = json.JSONEncoder(separators=(",", ":"))
_LINE = json.JSONEncoder(ensure_ascii=False)
_LINE_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
_PRETTY = json.JSONEncoder(indent=2, ensure_ascii=False)
_PRETTY_SORTED_ANY = json.JSONEncoder(indent=2, ensure_ascii=False, sort_keys=True, default=str)

# bound methods, not wrappers: the row codec calls these once per value written
compact: Callable[[Any], str] = _COMPACT.encode
compact_any: Callable[[Any], str] = _COMPACT_ANY.encode
stored: Callable[[Any], str] = _STORED.encode
read_stored: Callable[[str], Any] = _STORED_DECODER.decode
canonical: Callable[[Any], str] = _CANONICAL.encode
ascii_compact: Callable[[Any], str] = _ASCII_COMPACT.encode
line: Callable[[Any], str] = _LINE.encode
line_sorted: Callable[[Any], str] = _LINE_SORTED.encode
loads: Callable[..., Any] = json.loads


def pretty(value: Any, *, sorted_lenient: bool = False) -> str:
    """Indented JSON; ``sorted_lenient``: keys sorted and non-JSON values as text (for
    showing arbitrary stored data to a person)."""
    return (_PRETTY_SORTED_ANY if sorted_lenient else _PRETTY).encode(value)


__all__ = ["ascii_compact", "canonical", "compact", "compact_any", "line", "line_sorted",
           "loads", "pretty", "read_stored", "stored"]
