"""Resource limits of a run (docs/reliability.md lists them): a workflow file is untrusted
input.

``ACTIVE`` is the meter of the interpreter segment running right now. A segment (from
one effect to the next) runs synchronously, so one module-level meter per thread is
enough and closures reach it without carrying the VM around.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, TypeVar

from lashflow.errors import LimitExceeded
from lashflow.interp.errors import LashRuntimeError

from ..slotted import Frozen

T = TypeVar("T")
Seq = TypeVar("Seq", list[Any], tuple[Any, ...])

LIST_ITEM_BYTES = 36  # per list/tuple item: its 8-byte slot, a 24-byte number, over-allocation
RECORD_ENTRY_BYTES = 64  # estimated bytes per record entry
WORK_PER_STEP = 16  # items or characters copied or scanned per interpreter step


class Limits(Frozen):
    """Configurable per-run limits; every violation raises ``LimitExceeded``."""

    __slots__ = ("max_steps", "max_value_bytes", "max_effects", "max_range_items",
                 "max_child_depth", "max_journal_bytes", "max_batch_width",
                 "max_live_bytes")
    max_steps: int
    max_value_bytes: int
    max_effects: int
    max_range_items: int
    max_child_depth: int
    max_journal_bytes: int
    max_batch_width: int
    max_live_bytes: int

    def __init__(
            self,
            max_steps: int = 10_000_000,  # interpreter steps between two effects
            max_value_bytes: int = 64 * 1024 * 1024,  # estimated size of one value
            max_effects: int = 100_000,  # effects per run
            max_range_items: int = 1_000_000,  # items one `range` call may create
            max_child_depth: int = 64,  # runs nested by `start` (a process that starts itself stops here)
            max_journal_bytes: int = 256 * 1024 * 1024,  # what one run's prints and yields may journal
            max_batch_width: int = 10_000,  # calls one fan-out `await [call for x in xs]` may form
            max_live_bytes: int = 256 * 1024 * 1024,  # estimated size of all values a run holds
    ) -> None:
        setter = object.__setattr__
        setter(self, "max_steps", max_steps)
        setter(self, "max_value_bytes", max_value_bytes)
        setter(self, "max_effects", max_effects)
        setter(self, "max_range_items", max_range_items)
        setter(self, "max_child_depth", max_child_depth)
        setter(self, "max_journal_bytes", max_journal_bytes)
        setter(self, "max_batch_width", max_batch_width)
        setter(self, "max_live_bytes", max_live_bytes)


# Every so many bytes of new values (estimated), the values the run holds are measured:
# an eighth of ``max_live_bytes``, at most 32 MiB.
LIVE_CHECK_BYTES = 32 * 1024 * 1024


class Meter:
    """Countdown of the running segment plus the limits that builtins check; ``roots``
    are what the running interpreter holds (its variables and stack), measured against
    ``max_live_bytes`` once ``built`` bytes of new values have been made since the last
    measure: a run cannot pile up values, however small each is, past the limit."""

    __slots__ = ("steps", "limits", "built", "roots", "check_every", "building")

    def __init__(self) -> None:
        self.limits = Limits()
        self.steps = self.limits.max_steps
        self.built = 0
        self.roots: tuple[Any, ...] = ()
        self.check_every = LIVE_CHECK_BYTES
        # lists being built (a comprehension's result so far): held by no variable yet,
        # but held all the same, so measured with the roots
        self.building: list[Any] = []

    def reset(self, limits: Limits, roots: tuple[Any, ...] = ()) -> None:
        if limits is not self.limits:
            self.check_every = min(LIVE_CHECK_BYTES, max(limits.max_live_bytes // 8, 1))
        self.limits = limits
        self.steps = limits.max_steps
        self.roots = roots
        self.building = []


ACTIVE = Meter()


def steps_exhausted() -> LimitExceeded:
    return LimitExceeded(
        f"the run took more than {ACTIVE.limits.max_steps} interpreter steps without an effect "
        "(an endless loop?)"
    )


def too_deep(limits: Limits) -> LimitExceeded:
    """A ``start`` past ``max_child_depth`` nested runs (every host says the same)."""
    return LimitExceeded(f"more than {limits.max_child_depth} runs nested by "
                         "`start` (a process that starts itself?)")


def too_many_effects(limits: Limits) -> LimitExceeded:
    return LimitExceeded(f"the run performed more than {limits.max_effects} effects")


def counted(items: Iterable[T]) -> Iterator[T]:
    """``items``, spending one step of the segment's budget on each: the one loop of
    every ``for`` statement and comprehension clause."""
    m = ACTIVE
    for item in items:
        left = m.steps - 1
        m.steps = left
        if left < 0:
            raise steps_exhausted()
        yield item


def iterable_items(value: Any) -> list[Any] | tuple[Any, ...]:
    """What ``for`` iterates: a list or tuple, nothing else."""
    if type(value) is not list and type(value) is not tuple:
        raise LashRuntimeError("NonListIteration", "`for` expects a list or tuple")
    return value


def tick(n: int = 1) -> None:
    """Spend ``n`` steps of the segment's budget."""
    left = ACTIVE.steps - n
    ACTIVE.steps = left
    if left < 0:
        raise steps_exhausted()


def charge(size: int) -> None:
    """Spend steps for work that grows with a value's size: a copy, a concatenation, a
    scan (one step per ``WORK_PER_STEP`` items or characters). Without it one statement
    in a loop, one step each time round, could copy a big value every time and run for
    hours inside ``max_steps``."""
    if size >= WORK_PER_STEP:
        tick(size // WORK_PER_STEP)


def too_big(what: str, size: int) -> LimitExceeded:
    return LimitExceeded(
        f"{what} would take about {size} bytes, over the limit of "
        f"{ACTIVE.limits.max_value_bytes} bytes per value"
    )


def check_str(s: str) -> str:
    """A string just built (concatenation, ``to_string``, ``join``, ``format``)."""
    if len(s) > ACTIVE.limits.max_value_bytes:
        raise too_big("a string", len(s))
    charge(len(s))
    built(len(s))
    return s


def check_seq(seq: Seq) -> Seq:
    size = len(seq) * LIST_ITEM_BYTES
    if size > ACTIVE.limits.max_value_bytes:
        raise too_big("a list", size)
    built(size)
    return seq


def grew(seq: list[Any], added: int) -> None:
    """``seq`` grew in place by ``added`` items: its size is checked, but only the new
    items count as newly made (counting the whole list each time would walk the run's
    values ever more often as a list is built item by item)."""
    size = len(seq) * LIST_ITEM_BYTES
    if size > ACTIVE.limits.max_value_bytes:
        raise too_big("a list", size)
    built(added * LIST_ITEM_BYTES)


def check_record(record: dict[str, Any]) -> dict[str, Any]:
    size = len(record) * RECORD_ENTRY_BYTES
    if size > ACTIVE.limits.max_value_bytes:
        raise too_big("a record", size)
    built(size)
    return record


def built(size: int) -> None:
    """``size`` bytes of new values were made; past ``LIVE_CHECK_BYTES`` since the last
    time, measure what the run holds (amortised: one walk per 32 MiB made)."""
    m = ACTIVE
    m.built += size
    if m.built >= m.check_every:
        m.built = 0
        check_live((m.roots, m.building))


def check_live(roots: tuple[Any, ...]) -> None:
    limit = ACTIVE.limits.max_live_bytes
    size = live_size(roots, limit)
    if size > limit:
        raise LimitExceeded(f"the run holds about {size} bytes of values, over the limit of "
                            f"{limit} bytes (max_live_bytes)")


def live_size(roots: Any, stop_above: int) -> int:
    """Estimated bytes of every value reachable from ``roots`` (each object once,
    shared ones too), walked without recursion; stops once past ``stop_above``."""
    total = 0
    seen: set[int] = set()
    todo = [roots]
    while todo and total <= stop_above:
        value = todo.pop()
        kind = type(value)
        if kind is str:
            total += 49 + len(value)
            continue
        if kind is float or kind is int:
            total += 24
            continue
        if kind is list or kind is tuple or kind is dict:
            ident = id(value)
            if ident in seen:
                continue
            seen.add(ident)
            if kind is dict:
                total += 64 + RECORD_ENTRY_BYTES * len(value)
                todo.extend(value.values())
            else:
                total += 56 + 8 * len(value) + _numbers_then_rest(value, todo)
    return total


_NUMBERS = frozenset({float, int})
_SCALARS = _NUMBERS | {bool, type(None)}


def _numbers_then_rest(items: list[Any] | tuple[Any, ...], todo: list[Any]) -> int:
    """The bytes of ``items`` when they are all scalars, found in one C-speed pass (a
    list of a million numbers is common and must not cost a million pops); otherwise 0,
    the items going on ``todo`` to be measured one by one."""
    kinds = set(map(type, items))
    if not kinds <= _SCALARS:
        todo.extend(items)
        return 0
    if kinds <= _NUMBERS:
        return 24 * len(items)
    return 24 * sum(1 for item in items if type(item) in _NUMBERS)
