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

``compact``, ``stored`` and ``canonical`` (what every journal row and argument hash is
written with) go through orjson when it is installed, byte for byte as the standard
encoder writes them: whatever orjson would write differently (a float below 1e-4, NaN and
the infinities, integers beyond 64 bits, lone surrogates, non-string keys, subclasses,
nesting beyond 254 levels) is detected and written by the standard encoder instead
(ADR 0034; ``tests/test_json_text_fast.py`` compares both over many values).
"""

from __future__ import annotations

import json
from typing import Any, Callable

try:  # a compiled encoder: 5-10x faster on a journal row (ADR 0034)
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; a bare install still works
    orjson = None  # type: ignore[assignment]

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



def _refuse(value: Any) -> Any:
    raise TypeError  # not plain JSON data: the standard encoder decides


def _fast(standard: Callable[[Any], str], options: int) -> Callable[[Any], str]:
    """``standard``'s exact text, written by orjson where the two agree. They differ only
    where orjson writes ``null`` (NaN, an infinity: the standard encoder writes or
    refuses them), a float below 1e-4 (``1e-05`` against ``0.00001`` or ``1e-5``), or
    raises (big integers, surrogates, other keys and types, deep nesting): each of
    those texts contains ``null``, ``e-`` or ``0.0000``, or there is no text, and is
    written again by ``standard`` (a false alarm inside a string costs only time)."""
    if orjson is None:  # pragma: no cover
        return standard
    dumps, refuse = orjson.dumps, _refuse

    def encode(value: Any) -> str:
        try:
            text = dumps(value, refuse, options).decode()
        except TypeError:
            return standard(value)
        # looked for in the text, not the bytes: ``in`` on bytes takes the buffer
        # protocol's way (about 160-230 ns each on a short text, against 18 ns on str);
        # the three are ASCII, which UTF-8 writes only as themselves
        if "null" in text or "e-" in text or "0.0000" in text:
            return standard(value)
        return text

    return encode


_OPTIONS = 0 if orjson is None else (orjson.OPT_PASSTHROUGH_DATACLASS
                                     | orjson.OPT_PASSTHROUGH_DATETIME
                                     | orjson.OPT_PASSTHROUGH_SUBCLASS)
_SORTED = 0 if orjson is None else _OPTIONS | orjson.OPT_SORT_KEYS

# the standard encoders' exact output (the fast ones fall back to these)
standard_compact: Callable[[Any], str] = _COMPACT.encode
standard_stored: Callable[[Any], str] = _STORED.encode
standard_canonical: Callable[[Any], str] = _CANONICAL.encode

# functions, not wrappers around wrappers: the row codec calls these once per value written
compact: Callable[[Any], str] = _fast(standard_compact, _OPTIONS)
compact_any: Callable[[Any], str] = _COMPACT_ANY.encode
stored: Callable[[Any], str] = _fast(standard_stored, _OPTIONS)
read_stored: Callable[[str], Any] = _STORED_DECODER.decode
canonical: Callable[[Any], str] = _fast(standard_canonical, _SORTED)
ascii_compact: Callable[[Any], str] = _ASCII_COMPACT.encode
line: Callable[[Any], str] = _LINE.encode
line_sorted: Callable[[Any], str] = _LINE_SORTED.encode
loads: Callable[..., Any] = json.loads


def pretty(value: Any, *, sorted_lenient: bool = False) -> str:
    """Indented JSON; ``sorted_lenient``: keys sorted and non-JSON values as text (for
    showing arbitrary stored data to a person)."""
    return (_PRETTY_SORTED_ANY if sorted_lenient else _PRETTY).encode(value)


__all__ = ["ascii_compact", "canonical", "compact", "compact_any", "line", "line_sorted",
           "standard_canonical", "standard_compact", "standard_stored",
           "loads", "pretty", "read_stored", "stored"]
