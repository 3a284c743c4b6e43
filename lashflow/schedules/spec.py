"""What a schedule says: when it ticks (a cron expression in a time zone, or a fixed
interval), how late a tick may still fire (the catch-up window), how much random delay
spreads its runs (jitter) and what a tick does while the last run is still going (the
overlap policy). Checked once, when the schedule is made, so a worker never meets a
spec it cannot read."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..errors import ScheduleInvalid
from ..rates import DURATION_PART, UNIT_SECONDS

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo
# zoneinfo and cronsim are imported where first needed: the engine imports this module,
# and a CLI command that touches no schedule must not pay for them (ADR 0007)

POLICIES = ("skip", "buffer-one", "buffer-all", "cancel-other", "allow")
DEFAULT_CATCHUP = 60.0  # a tick up to a minute late still fires (Temporal's minimum)
MAX_NAME = 100
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PART = DURATION_PART
_UNIT = UNIT_SECONDS
DURATION_FORMS = 'a duration like "30s", "5m", "1h30m" or "1d" (units ms, s, m, h, d)'


def parse_duration(text: str | float | int, what: str = "duration") -> float:
    """Seconds of ``"1h30m"``-style text (a number is taken as seconds)."""
    if isinstance(text, bool):
        raise ScheduleInvalid(f"{what}: expected {DURATION_FORMS}")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        compact = str(text).replace(" ", "").lower()
        if compact in ("0", "0s"):
            return 0.0
        parts = _PART.findall(compact)
        if not compact or "".join(n + u for n, u in parts) != compact:
            raise ScheduleInvalid(f"{what}: {str(text)!r} is not {DURATION_FORMS}")
        seconds = sum(float(number) * _UNIT[unit] for number, unit in parts)
    if not math.isfinite(seconds) or seconds < 0:
        raise ScheduleInvalid(f"{what}: expected {DURATION_FORMS}")
    return seconds


def parse_moment(text: str | float | int, zone: str = "UTC", what: str = "time") -> float:
    """Epoch seconds of an RFC 3339 time (``2026-03-29T02:30:00+02:00``); without an
    offset the time is read in ``zone`` (the schedule's)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    raw = str(text).strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ScheduleInvalid(f"{what}: {str(text)!r} is not a time like "
                              "2026-03-29T02:30:00+02:00 or 2026-03-29T02:30") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone_of(zone))
    return moment.timestamp()


def zone_of(name: str) -> "ZoneInfo":
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleInvalid(f"time zone {name!r} is unknown: use an IANA name such as "
                              "UTC, Europe/Berlin or America/New_York") from None


def check_name(name: object) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not _NAME.match(name):
        raise ScheduleInvalid(f"schedule name {name!r}: 1 to {MAX_NAME} letters, digits, "
                              "'_', '.' or '-', starting with a letter or digit")
    return name


def split_cron(expr: str) -> tuple[str | None, str]:
    """(the seconds field or None, the five classic fields). Six fields put seconds
    first (``"*/10 * * * * *"``: every ten seconds)."""
    fields = expr.split()
    if len(fields) == 6:
        return fields[0], " ".join(fields[1:])
    if len(fields) == 5:
        return None, " ".join(fields)
    raise ScheduleInvalid(f"cron {expr!r}: expected five fields (minute hour day month "
                          "weekday) or six (seconds first)")


def seconds_of(field: str | None) -> tuple[int, ...]:
    """The seconds a six-field expression names: ``*``, ``N``, ``A-B``, steps, lists."""
    if field is None:
        return (0,)
    found: set[int] = set()
    for item in field.split(","):
        base, _, step_text = item.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if base == "*":
                low, high = 0, 59
            elif "-" in base:
                low, high = (int(part) for part in base.split("-", 1))
            else:
                low = int(base)
                high = 59 if step_text else low
        except ValueError:
            raise ScheduleInvalid(f"cron seconds field {field!r}: expected *, N, A-B, "
                                  "*/N or a list of them") from None
        if not (0 <= low <= high <= 59 and step >= 1):
            raise ScheduleInvalid(f"cron seconds field {field!r}: seconds run 0-59")
        found.update(range(low, high + 1, step))
    return tuple(sorted(found))


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """When a schedule ticks and how its ticks behave. Exactly one of ``cron`` and
    ``every`` (seconds); ``tz`` is the cron expression's zone (an interval counts from
    the Unix epoch, so zones do not move it); ``start``/``end`` bound the ticks (epoch
    seconds, ``end`` excluded)."""

    cron: str | None = None
    every: float | None = None
    tz: str = "UTC"
    jitter: float = 0.0
    overlap: str = "skip"
    catchup_window: float = DEFAULT_CATCHUP
    start: float | None = None
    end: float | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise ScheduleInvalid("a schedule needs exactly one of --cron and --every")
        zone = zone_of(self.tz)
        if self.cron is not None:
            from cronsim import CronSim, CronSimError

            seconds_field, classic = split_cron(self.cron)
            seconds_of(seconds_field)
            try:
                CronSim(classic, datetime.now(zone))
            except CronSimError as exc:
                raise ScheduleInvalid(f"cron {self.cron!r}: {exc}") from None
        elif not (self.every is not None and math.isfinite(self.every) and self.every >= 1
                  and float(self.every).is_integer()):
            raise ScheduleInvalid("--every: a whole number of seconds, at least 1s")
        if self.overlap not in POLICIES:
            raise ScheduleInvalid(f"overlap policy {self.overlap!r}: one of "
                                  f"{', '.join(POLICIES)}")
        for name, value in (("jitter", self.jitter), ("catch-up window", self.catchup_window)):
            if not (math.isfinite(value) and value >= 0):
                raise ScheduleInvalid(f"{name}: expected {DURATION_FORMS}")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ScheduleInvalid("--end must come after --start")

    @property
    def zone(self) -> "ZoneInfo":
        return zone_of(self.tz)

    def describe(self) -> str:
        """One line for a table: ``cron 30 2 * * * (Europe/Berlin)`` or ``every 5m``."""
        if self.cron is not None:
            return f"cron {self.cron}" + ("" if self.tz == "UTC" else f" ({self.tz})")
        return f"every {format_duration(self.every or 0.0)}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ScheduleSpec":
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})

    def updated(self, **changes: Any) -> "ScheduleSpec":
        """A copy with ``changes``; setting ``cron`` clears ``every`` and the reverse."""
        if changes.get("cron") is not None:
            changes.setdefault("every", None)
        if changes.get("every") is not None:
            changes.setdefault("cron", None)
        return replace(self, **changes)


def format_duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``: the shortest text ``parse_duration`` reads back."""
    if seconds <= 0:
        return "0s"
    parts = []
    rest = seconds
    for unit in ("d", "h", "m", "s"):
        size = _UNIT[unit]
        count = int(rest // size)
        if count:
            parts.append(f"{count}{unit}")
            rest -= count * size
    if rest > 1e-9:
        parts.append(f"{round(rest * 1000)}ms")
    return "".join(parts)


def utc_text(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["DEFAULT_CATCHUP", "POLICIES", "ScheduleSpec", "check_name", "format_duration",
           "parse_duration", "parse_moment", "seconds_of", "split_cron", "utc_text", "zone_of"]
