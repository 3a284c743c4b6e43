"""Which runs a bulk action acts on: ``--where EXPR`` read into a ``RunQuery``.

An expression is conditions joined by ``and`` (or plain spaces), each ``FIELD OP VALUE``:
``status=failed,cancelled and process=fulfill and error=tool_failed and created<7d``.
Fields: status, process, version, queue, key (a queue's key), parent, error (the error
code), created, updated.
``=`` takes one value or several separated by commas (any of them); ``!=`` is offered
for status; ``<`` and ``>`` compare created/updated with a time (ISO 8601, epoch
seconds, or an age such as 30m, 2h, 7d: that long ago). ``all`` selects every run.
Parsing is pure (no clock read: ``now`` is given), so the CLI can refuse a bad expression
before it opens anything.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from ..errors import UsageError
from ..states import RUN_STATUSES
from ..store import RunQuery
from ..slotted import replace

FIELDS = ("status", "process", "version", "queue", "key", "parent", "error", "created",
          "updated")
EXAMPLE = "status=failed and process=fulfill and error=tool_failed and created<7d"
SINGLE = {"parent": "parent", "queue": "queue", "key": "key"}  # field -> RunQuery's name
_TERM = re.compile(r"""\s*(?P<field>[A-Za-z_]+)\s*(?P<op><=|>=|!=|=|<|>)\s*
                       (?P<value>"[^"]*"|'[^']*'|[^\s"']+)""", re.X)
_AND = re.compile(r"\s*(?:\band\b|,)?\s*", re.I)
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
HINT = f"conditions such as {EXAMPLE}; fields: {', '.join(FIELDS)}"


def parse_age(text: str, option: str) -> float:
    """An age such as ``90s``, ``30m``, ``2h``, ``7d``, ``1w``, in seconds."""
    raw = text.strip()
    unit = raw[-1:].lower()
    if unit in _AGE_UNITS and raw[:-1].replace(".", "", 1).isdigit():
        return float(raw[:-1]) * _AGE_UNITS[unit]
    raise UsageError(f"{option} {text!r} is not an age: use 90s, 30m, 2h, 7d or 1w")


def parse_when(text: str | None, option: str, now: float) -> float | None:
    """An ISO 8601 time (no offset: local time), epoch seconds, or an age such as ``90s``,
    ``30m``, ``2h``, ``7d``, ``1w`` (that long before ``now``)."""
    if text is None:
        return None
    raw = text.strip()
    if raw[-1:].lower() in _AGE_UNITS and raw[:-1].replace(".", "", 1).isdigit():
        return now - parse_age(raw, option)
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        raise UsageError(f"{option} {text!r} is neither an ISO 8601 time "
                         "(2026-12-03T10:00:00+01:00) nor an age (30m, 2h, 7d)") from None


def parse_where(text: str, now: float) -> RunQuery:
    """The run query an expression means; a ``usage_error`` naming the bad part else."""
    query = RunQuery()
    rest = text.strip()
    if rest.lower() == "all":
        return query
    if not rest:
        raise UsageError("--where needs at least one condition (or `all`)", hint=HINT)
    position = 0
    while position < len(text):
        match = _TERM.match(text, position)
        if match is None:
            raise UsageError(f"--where: cannot read {text[position:].strip()[:40]!r}",
                             hint=HINT)
        query = _apply(query, match["field"].lower(), match["op"],
                       match["value"].strip("'\""), now)
        # _AND may match nothing at all, so it always matches: never None
        position = _AND.match(text, match.end()).end()  # type: ignore[union-attr]
    return query


def _apply(query: RunQuery, field: str, op: str, value: str, now: float) -> RunQuery:
    where = f"--where {field}{op}{value}"
    if field not in FIELDS:
        raise UsageError(f"--where: unknown field {field!r}", hint=HINT)
    if field in ("created", "updated"):
        if op not in ("<", ">", "<=", ">="):
            raise UsageError(f"{where}: compare times with < (before) or > (after)")
        moment = parse_when(value, where, now)
        before = op.startswith("<")
        if field == "created":
            return replace(query, until=moment) if before else replace(query, since=moment)
        return (replace(query, updated_until=moment) if before
                else replace(query, updated_since=moment))
    values = tuple(v for v in value.split(",") if v)
    if not values:
        raise UsageError(f"{where}: give a value")
    if op == "!=" and field == "status":
        statuses = tuple(s for s in RUN_STATUSES if s not in _statuses(values, where))
        return replace(query, statuses=tuple(s for s in statuses
                                             if not query.statuses or s in query.statuses))
    if op != "=":
        raise UsageError(f"{where}: {field} takes = (or != for status)")
    changes: dict[str, Any] = {}
    if field == "status":
        changes["statuses"] = _statuses(values, where)
    elif field == "process":
        changes["processes"] = values
    elif field == "version":
        if not all(v.isdigit() for v in values):
            raise UsageError(f"{where}: a version is a number")
        changes["versions"] = tuple(int(v) for v in values)
    elif field in SINGLE:
        if len(values) != 1:
            raise UsageError(f"{where}: one {field} (several are not offered)")
        changes[SINGLE[field]] = values[0]
    else:
        changes["error_codes"] = values
    return replace(query, **changes)


def _statuses(values: tuple[str, ...], where: str) -> tuple[str, ...]:
    unknown = [v for v in values if v not in RUN_STATUSES]
    if unknown:
        raise UsageError(f"{where}: unknown status {unknown[0]!r}; use one of "
                         + ", ".join(RUN_STATUSES))
    return values


__all__ = ["EXAMPLE", "FIELDS", "parse_age", "parse_when", "parse_where"]
