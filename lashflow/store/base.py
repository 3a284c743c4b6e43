"""The journal's one interface. Backends (SQLite, PostgreSQL) implement ``Store``.

The store knows nothing of the language: it keeps runs, journal steps, attempts,
completion keys, signals and blobs as JSON documents keyed by strings. Every write a
run makes goes through ``commit`` with the run's lease generation, so a worker that lost
its lease is fenced (``Fenced``) and writes nothing.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from typing import Any, Callable, Collection, Iterator, Sequence

from ..errors import JournalCorrupt
from ..json_text import stored
from ..slotted import Frozen, Slotted
from ..states import AttemptStatus, RunStatus, StepStatus
from .leases import owner_is_dead

SCHEMA_VERSION = 11
# Every journal row written from schema version 4 on carries its checksum; a database
# migrated from before it is marked (meta key ``UNCHECKED_ROWS``) and may hold rows
# without one, which are checked for JSON only. Anywhere else a missing checksum is an edit.
CHECKSUMS_REQUIRED_FROM = 4
UNCHECKED_ROWS = "unchecked_rows"
SETTING_PREFIX = "setting."  # meta keys of ``Store.setting``: apart from the store's own
BLOB_THRESHOLD = 64 * 1024  # outcomes above this are stored once, content-addressed


class StoreStats(Slotted):
    """What the database says at one moment, for every process sharing it."""

    __slots__ = ("runs_by_status", "open_waits", "oldest_wait_age")

    def __init__(
            self,
            runs_by_status: dict[str, int],
            open_waits: dict[str, int],  # wait kind -> waits of parked runs
            oldest_wait_age: dict[str, float],  # wait kind -> seconds since its longest-parked run parked
    ) -> None:
        self.runs_by_status = runs_by_status
        self.open_waits = open_waits
        self.oldest_wait_age = oldest_wait_age


class RunRecord(Slotted):
    __slots__ = ("run_id", "source_hash", "process", "input", "input_hash", "status",
                 "result", "error", "waiting", "parent_run_id", "created_at", "updated_at",
                 "lease_owner", "lease_expires", "generation", "cancel_requested",
                 "wake_at", "meta")

    def __init__(
            self,
            run_id: str,
            source_hash: str,
            process: str | None,
            input: dict[str, Any],
            input_hash: str,
            status: RunStatus = RunStatus.QUEUED,
            result: Any = None,
            error: dict[str, Any] | None = None,
            waiting: list[dict[str, Any]] | None = None,
            parent_run_id: str | None = None,
            created_at: float = 0.0,
            updated_at: float = 0.0,
            lease_owner: str | None = None,
            lease_expires: float = 0.0,
            generation: int = 0,
            cancel_requested: bool = False,
            wake_at: float | None = None,
            meta: dict[str, Any] | None = None,  # where tools came from, for resume
    ) -> None:
        self.run_id = run_id
        self.source_hash = source_hash
        self.process = process
        self.input = input
        self.input_hash = input_hash
        self.status = status
        self.result = result
        self.error = error
        self.waiting = [] if waiting is None else waiting
        self.parent_run_id = parent_run_id
        self.created_at = created_at
        self.updated_at = updated_at
        self.lease_owner = lease_owner
        self.lease_expires = lease_expires
        self.generation = generation
        self.cancel_requested = cancel_requested
        self.wake_at = wake_at
        self.meta = {} if meta is None else meta


class Claimed(Frozen):
    """A run just claimed, and whose lease it was before (a takeover if not None and not
    the claimant's)."""

    __slots__ = ("run", "taken_from")
    run: RunRecord
    taken_from: str | None

    def __init__(self, run: RunRecord, taken_from: str | None) -> None:
        setter = object.__setattr__
        setter(self, "run", run)
        setter(self, "taken_from", taken_from)


class QueueTake(Slotted):
    """A worker's turn at its queues (``Store.take_queued``): the new runs claimed for it
    at once, the runs being resumed that it may try to claim one by one, and when a
    rate-limited queue or key next allows a start (None: none waits for a rate)."""

    __slots__ = ("claimed", "listed", "allowed_at")

    def __init__(self, claimed: list[Claimed], listed: list[str], allowed_at: float | None) -> None:
        self.claimed = claimed
        self.listed = listed
        self.allowed_at = allowed_at


class StepRecord(Slotted):
    """One journal entry: an effect's identity and (once known) its outcome.

    ``status`` is ``done`` (outcome final), ``pending`` (parked on a key / timer / signal /
    child, see ``detail``) or ``started`` (a non-idempotent attempt is in flight).
    """

    __slots__ = ("run_id", "step_key", "kind", "tool", "args_hash", "status", "outcome",
                 "detail", "seq", "created_at", "updated_at")

    def __init__(
            self,
            run_id: str,
            step_key: str,
            kind: str,
            tool: str | None = None,
            args_hash: str | None = None,
            status: StepStatus = StepStatus.DONE,
            outcome: Any = None,
            detail: dict[str, Any] | None = None,
            seq: int = 0,
            created_at: float = 0.0,
            updated_at: float = 0.0,
    ) -> None:
        self.run_id = run_id
        self.step_key = step_key
        self.kind = kind
        self.tool = tool
        self.args_hash = args_hash
        self.status = status
        self.outcome = outcome
        self.detail = {} if detail is None else detail
        self.seq = seq
        self.created_at = created_at
        self.updated_at = updated_at


class AttemptRecord(Slotted):
    __slots__ = ("run_id", "step_key", "attempt", "status", "code", "message", "detail",
                 "started_at", "finished_at", "with_step")

    def __init__(
            self,
            run_id: str,
            step_key: str,
            attempt: int,
            status: AttemptStatus,
            code: str | None = None,
            message: str | None = None,
            detail: dict[str, Any] | None = None,
            started_at: float | None = None,
            finished_at: float | None = None,
            # The attempt's first and only write, committed with its step: a store may keep it in
            # the step's row instead of a row of its own (SQLite does, ADR 0010); read back, an
            # attempt that was kept so (rewriting its step would lose it). Not compared.
            with_step: bool = False,
    ) -> None:
        self.run_id = run_id
        self.step_key = step_key
        self.attempt = attempt
        self.status = status
        self.code = code
        self.message = message
        self.detail = {} if detail is None else detail
        self.started_at = started_at
        self.finished_at = finished_at
        self.with_step = with_step

    def _values(self) -> tuple[Any, ...]:
        return (self.run_id, self.step_key, self.attempt, self.status, self.code, self.message,
                self.detail, self.started_at, self.finished_at)


class RunChange(Slotted):
    """A run-row update written in the same transaction as the run's journal writes."""

    __slots__ = ("status", "result", "error", "waiting", "wake_at", "release_lease",
                 "updated_at")

    def __init__(
            self,
            status: RunStatus,
            result: Any = None,
            error: dict[str, Any] | None = None,
            waiting: list[dict[str, Any]] | None = None,
            wake_at: float | None = None,
            release_lease: bool = False,
            # When the change happened, by the engine's clock (a test's FakeClock included): the
            # store never stamps a run with a clock of its own.
            updated_at: float | None = None,
    ) -> None:
        self.status = status
        self.result = result
        self.error = error
        self.waiting = [] if waiting is None else waiting
        self.wake_at = wake_at
        self.release_lease = release_lease
        self.updated_at = updated_at


class Commit(Slotted):
    """Everything one run writes at one point; committed atomically (and grouped with
    other runs' commits that are ready at the same moment)."""

    __slots__ = ("run_id", "generation", "steps", "attempts", "run", "wake", "wake_at",
                 "events")

    def __init__(
            self,
            run_id: str,
            generation: int | None,  # None: no fencing (admin writes such as cancel)
            steps: list[StepRecord] | None = None,
            attempts: list[AttemptRecord] | None = None,
            run: RunChange | None = None,
            # Another run to make due (a parent waiting on this child), in the same transaction:
            # a crash right after the child settles cannot lose the parent's wake-up.
            wake: str | None = None,
            wake_at: float = 0.0,
            # Events with no row behind them, written after those its rows make: an idempotent
            # call that has been running a while is announced (``store.events.step_event``).
            events: list[tuple[str, str, float]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.generation = generation
        self.steps = [] if steps is None else steps
        self.attempts = [] if attempts is None else attempts
        self.run = run
        self.wake = wake
        self.wake_at = wake_at
        self.events = [] if events is None else events


class Reopening(Slotted):
    """One stopped run to put back in the queue (``Store.reopen_runs``): ``edit`` changes
    its meta; the completion rows of the steps in ``forget`` go (they wait afresh);
    ``attempts`` are written as rows of their own first (an attempt riding in a step row
    that is about to be rewritten would be lost with it)."""

    __slots__ = ("run_id", "edit", "forget", "attempts")

    def __init__(
            self,
            run_id: str,
            edit: Callable[[dict[str, Any]], None],
            forget: Sequence[str] = (),
            attempts: Sequence[AttemptRecord] = (),
    ) -> None:
        self.run_id = run_id
        self.edit = edit
        self.forget = forget
        self.attempts = attempts


class RunQuery(Slotted):
    """Which runs ``Store.query_runs`` returns: newest first, ``limit`` at a time.

    ``statuses`` empty means all; ``since``/``until`` bound ``created_at`` (since <=
    created_at < until); ``cursor`` is the ``next_cursor`` of the previous page."""

    __slots__ = ("statuses", "process", "parent", "since", "until", "limit", "cursor",
                 "processes", "versions", "error_codes", "updated_since", "updated_until",
                 "queue", "key")

    def __init__(
            self,
            statuses: tuple[str, ...] = (),
            process: str | None = None,
            parent: str | None = None,
            since: float | None = None,
            until: float | None = None,
            limit: int = 50,
            cursor: str | None = None,
            # what a bulk action's ``--where`` adds (ADR 0032): any of these processes, deployed
            # versions, error codes; ``updated_since <= updated_at < updated_until``
            processes: tuple[str, ...] = (),
            versions: tuple[int, ...] = (),
            error_codes: tuple[str, ...] = (),
            updated_since: float | None = None,
            updated_until: float | None = None,
            queue: str | None = None,  # runs of this queue (ADR 0031)
            key: str | None = None,  # with ``queue``: of this key in it
    ) -> None:
        self.statuses = statuses
        self.process = process
        self.parent = parent
        self.since = since
        self.until = until
        self.limit = limit
        self.cursor = cursor
        self.processes = processes
        self.versions = versions
        self.error_codes = error_codes
        self.updated_since = updated_since
        self.updated_until = updated_until
        self.queue = queue
        self.key = key


class RunSummary(Slotted):
    """A run without its input, result and journal: what a list of runs shows."""

    __slots__ = ("run_id", "process", "status", "parent_run_id", "created_at", "updated_at",
                 "waiting", "error", "wake_at", "cancel_requested", "lease_owner",
                 "lease_expires", "note", "version", "paused")

    def __init__(
            self,
            run_id: str,
            process: str | None,
            status: RunStatus,
            parent_run_id: str | None,
            created_at: float,
            updated_at: float,
            waiting: list[dict[str, Any]] | None = None,
            error: dict[str, Any] | None = None,
            wake_at: float | None = None,
            cancel_requested: bool = False,
            lease_owner: str | None = None,
            lease_expires: float = 0.0,
            note: str | None = None,
            version: int | None = None,  # the deployed version it runs (ADR 0026)
            paused: dict[str, Any] | None = None,  # who paused it, when and why (ADR 0032)
    ) -> None:
        self.run_id = run_id
        self.process = process
        self.status = status
        self.parent_run_id = parent_run_id
        self.created_at = created_at
        self.updated_at = updated_at
        self.waiting = [] if waiting is None else waiting
        self.error = error
        self.wake_at = wake_at
        self.cancel_requested = cancel_requested
        self.lease_owner = lease_owner
        self.lease_expires = lease_expires
        self.note = note
        self.version = version
        self.paused = paused


class RunPage(Slotted):
    __slots__ = ("runs", "next_cursor")

    def __init__(
            self,
            runs: list[RunSummary],
            next_cursor: str | None = None,  # None: this was the last page
    ) -> None:
        self.runs = runs
        self.next_cursor = next_cursor


class JournalEntry(Slotted):
    """One run of a ``JournalPage`` with its journal; a journal that cannot be trusted
    leaves ``steps``/``attempts`` empty and says why in ``journal_error``."""

    __slots__ = ("run", "steps", "attempts", "journal_error")

    def __init__(
            self,
            run: RunRecord,
            steps: list[StepRecord] | None = None,
            attempts: list[AttemptRecord] | None = None,
            journal_error: JournalCorrupt | None = None,
    ) -> None:
        self.run = run
        self.steps = [] if steps is None else steps
        self.attempts = [] if attempts is None else attempts
        self.journal_error = journal_error


class JournalPage(Slotted):
    __slots__ = ("entries", "next_cursor")

    def __init__(
            self,
            entries: list[JournalEntry],
            next_cursor: str | None = None,  # None: this was the last page
    ) -> None:
        self.entries = entries
        self.next_cursor = next_cursor


class RunDetail(Slotted):
    """One run with everything an operator looks at, read in one go.

    A journal that cannot be trusted leaves ``steps``/``attempts`` empty and says why in
    ``journal_error``: the run's own row still reads."""

    __slots__ = ("run", "steps", "attempts", "children", "journal_error", "signals")

    def __init__(
            self,
            run: RunRecord,
            steps: list[StepRecord] | None = None,
            attempts: list[AttemptRecord] | None = None,
            children: list[RunSummary] | None = None,
            journal_error: JournalCorrupt | None = None,
            signals: list[tuple[str, int, Any]] | None = None,  # (name, ordinal, payload)
    ) -> None:
        self.run = run
        self.steps = [] if steps is None else steps
        self.attempts = [] if attempts is None else attempts
        self.children = [] if children is None else children
        self.journal_error = journal_error
        self.signals = [] if signals is None else signals


class ScheduleRow(Slotted):
    """A schedule as stored. ``due_at``: when a worker should next look at it (its next
    tick's fire time, or at once while a tick waits in its buffer); None once it has
    ended. Paused schedules are never due."""

    __slots__ = ("name", "definition", "state", "paused", "note", "due_at", "version",
                 "created_at", "updated_at")

    def __init__(
            self,
            name: str,
            definition: dict[str, Any],
            state: dict[str, Any] | None = None,
            paused: bool = False,
            note: str | None = None,
            due_at: float | None = None,
            version: int = 1,
            created_at: float = 0.0,
            updated_at: float = 0.0,
    ) -> None:
        self.name = name
        self.definition = definition
        self.state = {} if state is None else state
        self.paused = paused
        self.note = note
        self.due_at = due_at
        self.version = version
        self.created_at = created_at
        self.updated_at = updated_at

    def values(self) -> tuple[Any, ...]:
        """The row's column values in ``store.schedules.SCHEDULE_COLUMNS`` order."""
        return (self.name, stored(self.definition), stored(self.state), bool(self.paused),
                self.note, self.due_at, self.version, self.created_at, self.updated_at)


class QueueRow(Slotted):
    """A queue as stored. ``rate``/``key_rate``: (starts, period in seconds) or None."""

    __slots__ = ("name", "concurrency", "per_key", "rate", "key_rate", "priority_levels",
                 "fair", "paused", "vtime", "created_at", "updated_at", "weights")

    def __init__(
            self,
            name: str,
            concurrency: int | None = None,
            per_key: int | None = None,
            rate: tuple[float, float] | None = None,
            key_rate: tuple[float, float] | None = None,
            priority_levels: int = 5,
            fair: bool = False,
            paused: bool = False,
            vtime: float = 0.0,
            created_at: float = 0.0,
            updated_at: float = 0.0,
            weights: dict[str, float] | None = None,
    ) -> None:
        self.name = name
        self.concurrency = concurrency
        self.per_key = per_key
        self.rate = rate
        self.key_rate = key_rate
        self.priority_levels = priority_levels
        self.fair = fair
        self.paused = paused
        self.vtime = vtime
        self.created_at = created_at
        self.updated_at = updated_at
        self.weights = {} if weights is None else weights

    def values(self) -> tuple[Any, ...]:
        """The row's values in ``QUEUE_COLUMNS`` order."""
        rate = self.rate or (None, None)
        key_rate = self.key_rate or (None, None)
        return (self.name, self.concurrency, self.per_key, rate[0], rate[1], key_rate[0],
                key_rate[1], self.priority_levels, int(self.fair), int(self.paused),
                float(self.vtime), float(self.created_at), float(self.updated_at))


class QueueStats(Slotted):
    """What ``queue show`` and ``/metrics`` tell of one queue at one moment."""

    __slots__ = ("waiting_by_priority", "waiting_by_key", "running_by_key",
                 "oldest_waiting", "rate_limited_until", "keys_rate_limited")

    def __init__(
            self,
            waiting_by_priority: dict[int, int] | None = None,
            waiting_by_key: dict[str, int] | None = None,
            running_by_key: dict[str, int] | None = None,
            oldest_waiting: float | None = None,  # created_at of the oldest run not started yet
            rate_limited_until: float | None = None,  # the queue's own bucket
            keys_rate_limited: int = 0,
    ) -> None:
        self.waiting_by_priority = {} if waiting_by_priority is None else waiting_by_priority
        self.waiting_by_key = {} if waiting_by_key is None else waiting_by_key
        self.running_by_key = {} if running_by_key is None else running_by_key
        self.oldest_waiting = oldest_waiting
        self.rate_limited_until = rate_limited_until
        self.keys_rate_limited = keys_rate_limited


class RateLimitRow(Slotted):
    """A token bucket as stored (``store.ratelimits``): a named limit, or a tool's own
    (``own``: its rate comes from the tool's code). ``tat``: the bucket's theoretical
    arrival time, the first free slot; ``calls``: slots handed out, ``delayed``: of
    those, how many were later than the take."""

    __slots__ = ("name", "rate", "tat", "calls", "delayed", "own", "created_at",
                 "updated_at")

    def __init__(
            self,
            name: str,
            rate: tuple[float, float],
            tat: float = 0.0,
            calls: int = 0,
            delayed: int = 0,
            own: bool = False,
            created_at: float = 0.0,
            updated_at: float = 0.0,
    ) -> None:
        self.name = name
        self.rate = rate
        self.tat = tat
        self.calls = calls
        self.delayed = delayed
        self.own = own
        self.created_at = created_at
        self.updated_at = updated_at


class RateTake(Frozen):
    """Slots a take reserved: the first at ``first``, one every ``spacing`` seconds
    after it."""

    __slots__ = ("first", "spacing")
    first: float
    spacing: float

    def __init__(self, first: float, spacing: float) -> None:
        setter = object.__setattr__
        setter(self, "first", first)
        setter(self, "spacing", spacing)


class WriterLease:
    """One registered writer of a store; ``release`` (idempotent) when it is done."""

    __slots__ = ("_store",)

    def __init__(self, store: "Store") -> None:
        self._store: Store | None = store

    def release(self) -> None:
        if self._store is not None:
            self._store._writers -= 1
            self._store = None


class Store(abc.ABC):
    """Async journal storage. All methods are safe to call concurrently."""

    url: str
    _writers: int = 0

    def register_writer(self) -> "WriterLease":
        """Called by each caller that writes repeatedly for a while (a run being created
        or driven), from the moment it is known (a drive counts from when its task is
        made, not when it first runs). While exactly one is registered, nobody can share
        a group commit with it, and a backend may commit on the caller's own thread
        (ADR 0008). With none registered the store knows nothing of its callers and
        assumes they are many."""
        self._writers += 1
        return WriterLease(self)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """``register_writer`` for the duration of a block."""
        lease = self.register_writer()
        try:
            yield
        finally:
            lease.release()

    create: bool = True  # False: never make a database where there is none (see open_store)
    readonly: bool = False  # True: open without writing anything, ever (see open_store)
    # Told (seconds from the first queued write to durable, writes in the transaction)
    # after each journal transaction, when the engine counts them for its metrics.
    on_commit: Callable[[float, int], None] | None = None

    @property
    def lone_writer(self) -> bool:
        return self._writers == 1

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> "Store":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- identity ----------------------------------------------------------------------
    @abc.abstractmethod
    async def secret(self) -> bytes:
        """The per-database secret (>= 256 random bits) that signs completion keys."""

    @abc.abstractmethod
    async def setting(self, name: str) -> str | None:
        """A value lashflow's own parts keep in the database under ``name`` (the console's
        session generation): shared by every process on it, kept across restarts."""

    @abc.abstractmethod
    async def put_setting(self, name: str, value: str) -> None: ...

    @abc.abstractmethod
    async def put_source(self, source_hash: str, text: str) -> None: ...

    @abc.abstractmethod
    async def get_source(self, source_hash: str) -> str | None: ...

    # -- runs ------------------------------------------------------------------------
    @abc.abstractmethod
    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert the run unless ``run_id`` exists; returns (stored row, created)."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None: ...

    @abc.abstractmethod
    async def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]: ...

    @abc.abstractmethod
    async def query_runs(self, query: RunQuery) -> RunPage:
        """One page of run summaries, newest first (one indexed query however deep)."""

    @abc.abstractmethod
    async def run_states(self, query: RunQuery) -> tuple[list[tuple[str, str]], str | None]:
        """``query_runs``'s page as (run id, status) only, and the next page's cursor:
        what a bulk action reads, with nothing to decode."""

    @abc.abstractmethod
    async def stats(self, now: float) -> StoreStats:
        """Runs by status and the waits of parked runs, for ``/metrics``."""

    @abc.abstractmethod
    async def run_detail(self, run_id: str) -> RunDetail | None:
        """The run, its journal and its children's summaries, in one read."""

    @abc.abstractmethod
    async def stale_runs(self, before: float, statuses: Collection[str], limit: int) -> list[str]:
        """Up to ``limit`` settled runs with one of ``statuses`` last updated before
        ``before``, oldest first (what retention would delete next)."""

    @abc.abstractmethod
    async def delete_runs(self, run_ids: Collection[str]) -> int:
        """Delete these runs, if settled, with their journal, keys and signals, in one
        short transaction; returns how many runs were deleted."""

    @abc.abstractmethod
    async def delete_unreferenced_blobs(self, limit: int) -> int:
        """Delete up to ``limit`` blobs no step refers to any more."""

    @abc.abstractmethod
    async def cancel_requests(self, run_ids: Collection[str]) -> set[str]:
        """Which of ``run_ids`` have a cancel requested."""

    @abc.abstractmethod
    async def stop_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        """Which of ``run_ids`` were asked to stop, and how (``cancel`` or ``pause``):
        the one query of the watcher beside the runs a process drives."""

    @abc.abstractmethod
    async def pause_runs(self, run_ids: Collection[str], now: float,
                         info: dict[str, Any]) -> list[str]:
        """Pause those of ``run_ids`` that are queued, running or waiting, in one
        transaction: status ``paused``, ``info`` (who, when, why) kept as the meta key
        ``paused``; waits, timers and leases are left as they are. Returns the ids paused."""

    @abc.abstractmethod
    async def count_runs(self, query: RunQuery) -> int:
        """How many runs ``query`` selects, its limit and cursor aside (one COUNT)."""

    @abc.abstractmethod
    async def cancel_runs(self, run_ids: Collection[str], now: float,
                          reason: str | None) -> list[str]:
        """Request a cancel on those of ``run_ids`` that have not settled, in one
        transaction; those no drive holds are queued so a drive settles them at once.
        Returns the ids asked."""

    @abc.abstractmethod
    async def unpause_runs(self, run_ids: Collection[str], now: float) -> list[str]:
        """Put those of ``run_ids`` that are paused back in the queue (they replay to where
        they were, so a deadline that passed meanwhile is met then), in one transaction.
        Returns the ids unpaused."""

    async def claim(self, run_id: str, owner: str, ttl: float, now: float, *,
                    steal_from_dead: bool = True) -> int | None:
        """Take the run's lease if it is free, ours or expired; returns the new generation."""
        claimed = await self.claim_run(run_id, owner, ttl, now, steal_from_dead=steal_from_dead)
        return None if claimed is None else claimed.run.generation

    @abc.abstractmethod
    async def claim_run(self, run_id: str, owner: str, ttl: float, now: float, *,
                        steal_from_dead: bool = True) -> Claimed | None:
        """``claim``, with the run's row as it stands once claimed (its new generation
        included), so a driver needs no read before or after. None: no such run, a
        settled one (nothing is written to it), or its lease is another live worker's."""

    @abc.abstractmethod
    async def renew(self, run_id: str, owner: str, generation: int, ttl: float, now: float) -> bool: ...

    @abc.abstractmethod
    async def request_cancel(self, run_id: str) -> None: ...

    @abc.abstractmethod
    async def due_runs(self, now: float, limit: int = 100) -> list[str]:
        """Waiting runs whose timer has fallen due."""

    @abc.abstractmethod
    async def orphaned_runs(self, now: float) -> list[str]:
        """Runs marked ``running`` or ``queued`` whose lease has expired or owner died."""

    @abc.abstractmethod
    async def mark_due(self, run_id: str, at: float) -> None:
        """A waiting run has something to act on (a completion or signal arrived, a child
        settled): make it due at ``at`` so a worker picks it up."""

    async def wake(self, run_id: str, at: float) -> None:
        """Something for the run was delivered (completion, signal, child settled): make
        it due if it is waiting and, if it is running, leave ``at`` on the row so it is
        due as soon as it parks (the delivery may have raced its park). A backend that
        cannot do the latter only marks waiting runs due."""
        await self.mark_due(run_id, at)

    @abc.abstractmethod
    async def update_meta(self, run_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``edit`` to the run's ``meta`` dict under the row's lock (no lost update
        between two writers); nothing happens for an unknown run."""

    async def set_note(self, run_id: str, note: str | None) -> None:
        """An operator-facing note on the run (e.g. which worker lacks which tools)."""
        def edit(meta: dict[str, Any]) -> None:
            if note is None:
                meta.pop("note", None)
            else:
                meta["note"] = note
        await self.update_meta(run_id, edit)

    @abc.abstractmethod
    async def deploy_version(self, process: str, source_hash: str, content_hash: str,
                             tools: dict[str, Any], now: float) -> tuple[int, bool]:
        """Record a new numbered version of ``process`` (1 + the last one), unless its
        last version has this ``content_hash``: (the version, whether it is new)."""

    @abc.abstractmethod
    async def versions(self, process: str | None = None) -> list[dict[str, Any]]:
        """Deployed versions (of ``process``, or all), by process then number: dicts with
        ``process``, ``version``, ``source_hash``, ``content_hash``, ``tools``,
        ``deployed_at``."""

    @abc.abstractmethod
    async def move_run(self, run_id: str, from_hash: str, to_hash: str,
                       edit: Callable[[dict[str, Any]], None], now: float) -> str:
        """Point a run that has not settled at another source, its meta edited, in one
        atomic write, only while no worker holds its lease and it still runs
        ``from_hash``: ``moved``, or why not (``unknown``, ``settled``, ``busy``,
        ``changed``)."""

    @abc.abstractmethod
    async def reopen_runs(self, reopenings: Sequence[Reopening], now: float) -> list[str]:
        """Put each stopped run (failed, cancelled, needs_attention) whose lease is free
        back in the queue, its result, error, waits and cancel request cleared, its
        ``Reopening`` applied, all in one transaction. Returns the ids re-opened: a run
        not stopped (or held) is left as it is."""

    holds_sessions = False  # True: the database sees each owner's life (ADR 0035)

    def owner_gone(self, owner: str) -> bool:
        """Is this lease holder known to be dead (by its pid, or by the database at the
        last ``claimable``)? A hint to skip hopeless claims; the claim decides."""
        return owner_is_dead(owner)

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """Runs a worker may take now: queued or orphaned, and waiting runs that are due."""
        found = await self.orphaned_runs(now)
        for run_id in await self.due_runs(now, limit):
            if run_id not in found:
                found.append(run_id)
        return found[:limit]

    async def wait_for_work(self, timeout: float) -> None:
        """Block until new work may exist (a backend with notifications returns early)."""
        await asyncio.sleep(timeout)

    # -- journal ---------------------------------------------------------------------
    @abc.abstractmethod
    async def load_journal(self, run_id: str) -> tuple[list[StepRecord], list[AttemptRecord]]:
        """The run's whole journal in order: read once per resume."""

    @abc.abstractmethod
    async def journal_page(self, query: RunQuery, *,
                           processes: Collection[str | None] | None = None) -> JournalPage:
        """``query_runs``'s page with each run's whole record and journal, read in a few
        statements for the whole page (one snapshot): what a pass over many runs reads
        instead of a round trip per run. ``processes``: keep only runs of these (None:
        a main block's), chosen after the page is read, so that the page's scan is the
        status index's alone (a process filter in SQL made SQLite scan every run of the
        process once per status); a page may then hold fewer runs than ``limit``."""

    @abc.abstractmethod
    async def commit(self, change: Commit) -> None:
        """Durably apply ``change``; raises ``Fenced`` if the run's generation moved."""

    # -- events (store.events: written with the journal, ADR 0033) -------------------------
    @abc.abstractmethod
    async def run_events(self, run_id: str, after: int = 0, limit: int = 500) -> list[Any]:
        """Up to ``limit`` of the run's events with an offset above ``after``, in order
        (``store.events.RunEvent``)."""

    @abc.abstractmethod
    async def last_event(self, run_id: str) -> int:
        """The run's last event offset (0: none yet)."""

    @abc.abstractmethod
    async def feed(self, after: str, limit: int = 500, process: str | None = None, *,
                   settled: bool = True) -> list[Any]:
        """Events of every run (or of ``process``'s runs) after the feed cursor ``after``
        ("" is the beginning), in an order a later call never goes back on: each event's
        ``cursor`` resumes after it. ``settled=False``: the newest committed rows even
        where an older transaction may still add rows before them (PostgreSQL; sooner,
        but a later read after the same cursor can miss those)."""

    @abc.abstractmethod
    async def feed_head(self) -> str:
        """The feed cursor of now: ``feed`` after it returns only what is written later."""

    # -- completions and signals ---------------------------------------------------------
    # A completion row is a JSON-able dict: run_id, step_key, waiting, deadline_at,
    # on_timeout, on_cancel, module, tool, resolution (None until settled). The rules of
    # who wins live in lashflow.tools.CompletionBook; the store only makes them atomic.
    @abc.abstractmethod
    async def completion_get(self, run_id: str, step_key: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    async def completion_open_wait(self, row: dict[str, Any]) -> dict[str, Any]:
        """Insert the row, or fill in its wait fields if it is not waiting yet (a
        resolution delivered earlier stays). Returns the row as stored."""

    @abc.abstractmethod
    async def completion_settle(self, run_id: str, step_key: str, resolution: dict[str, Any], *,
                                now: float, respect_deadline: bool, wake_at: float | None = None
                                ) -> tuple[dict[str, Any], str]:
        """Write ``resolution`` iff none exists (and, with ``respect_deadline``, only before
        the deadline). Returns (row, "won" | "already_resolved" | "expired"). With
        ``wake_at``, a won resolution also does what ``wake`` does, in the same transaction."""

    @abc.abstractmethod
    async def completion_open_waits(self, run_id: str) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    async def add_signal(self, run_id: str, name: str, payload: Any, *,
                         sender: str | None = None) -> int:
        """Append a signal; returns its 1-based ordinal among signals of that name. A
        ``sender`` (``<run id>/<step key>`` of a ``signal_run``) delivers once: sent again
        (the sender resumed after a crash), its first delivery's ordinal is returned."""

    @abc.abstractmethod
    async def get_signal(self, run_id: str, name: str, ordinal: int) -> tuple[bool, Any]: ...

    # -- schedules (store.schedules: compare-and-swap on a schedule's version) -----------
    @abc.abstractmethod
    async def get_schedule(self, name: str) -> ScheduleRow | None: ...

    @abc.abstractmethod
    async def list_schedules(self) -> list[ScheduleRow]: ...

    @abc.abstractmethod
    async def due_schedules(self, now: float, limit: int = 500) -> list[ScheduleRow]:
        """Unpaused schedules whose ``due_at`` has come, most overdue first."""

    @abc.abstractmethod
    async def swap_schedule(self, row: ScheduleRow, expected: int | None,
                            runs: Collection[RunRecord] = (), *,
                            take_back: float | None = None) -> bool:
        """Write ``row`` if the stored version is ``expected`` (None: create it if the name
        is free) and insert ``runs`` (existing ids left alone), in one transaction; False,
        with nothing written, if the schedule moved meanwhile. ``take_back``: delete the
        schedule's runs written ahead for ticks after that time (never claimed)."""

    @abc.abstractmethod
    async def swap_schedules(self, batch: Collection[tuple[ScheduleRow, int, list[RunRecord]]]
                             ) -> list[bool]:
        """``swap_schedule`` for each of ``batch`` (schedules that exist) in one
        transaction; which of them were written."""

    @abc.abstractmethod
    async def next_due_at(self) -> float | None: ...

    @abc.abstractmethod
    async def delete_schedule(self, name: str, now: float) -> bool:
        """Delete the schedule; its runs stay, but those written ahead for ticks after
        ``now``. False if there was none."""

    @abc.abstractmethod
    async def schedule_runs(self, name: str, limit: int = 20) -> list[RunSummary]:
        """The schedule's runs (ids ``name@...``), newest first."""

    @abc.abstractmethod
    async def run_statuses(self, run_ids: Collection[str]) -> dict[str, str]: ...

    # -- queues (store.queues: limits counted from leases, a gate on each claim) ----------
    @abc.abstractmethod
    async def get_queue(self, name: str) -> QueueRow | None: ...

    @abc.abstractmethod
    async def list_queues(self) -> list[QueueRow]: ...

    @abc.abstractmethod
    async def put_queue(self, queue: QueueRow, *, create: bool) -> bool:
        """Write the queue's limits and key weights (``create``: only if the name is
        free; else only if it exists); whether it was written."""

    @abc.abstractmethod
    async def delete_queue(self, name: str) -> bool: ...

    @abc.abstractmethod
    async def queue_stats(self, name: str, now: float) -> QueueStats: ...

    @abc.abstractmethod
    async def debounce_run(self, run: RunRecord, *, keep_newest: bool = True
                           ) -> tuple[RunRecord, bool]:
        """Store ``run`` (queued, ``wake_at`` its window's end) or fold it into the run of
        its queue and key still in its window: (the run, whether it was stored)."""

    @abc.abstractmethod
    async def singleton_run(self, run: RunRecord, *, cancel_running: bool
                            ) -> tuple[RunRecord, bool, list[str]]:
        """One run at a time per key: skip ``run`` while its key has a run not settled,
        or ask those to cancel and store it: (the run, stored, the runs asked)."""

    # -- rate limits and global concurrency of tools (store.ratelimits, ADR 0036) ----------
    @abc.abstractmethod
    async def take_rate(self, name: str, rate: tuple[float, float] | None, count: int,
                        now: float) -> RateTake | None:
        """Reserve ``count`` slots of bucket ``name`` in one atomic statement. ``rate``:
        a tool's own rate (the bucket is made or re-rated); None: a named limit, which
        must exist (None back when it does not)."""

    @abc.abstractmethod
    async def take_slot(self, name: str, limit: int, run_id: str, step_key: str, owner: str,
                        generation: int, now: float) -> bool:
        """Take one of ``limit`` slots of ``name`` for the run's step, counted from
        live holders only (a slot whose run lease moved on or expired is free)."""

    @abc.abstractmethod
    async def release_slot(self, name: str, run_id: str, step_key: str, owner: str) -> None: ...

    @abc.abstractmethod
    async def rate_limits(self, name: str | None = None) -> list[RateLimitRow]:
        """Every bucket (or the one named), by name."""

    @abc.abstractmethod
    async def put_rate_limit(self, name: str, rate: tuple[float, float], now: float) -> bool:
        """Define or re-rate a named limit (its bucket's state stays); whether it is new."""

    @abc.abstractmethod
    async def delete_rate_limit(self, name: str) -> bool: ...

    @abc.abstractmethod
    async def slots_held(self, now: float) -> dict[str, int]:
        """Live holders of global concurrency slots, per tool."""

    @abc.abstractmethod
    async def take_queued(self, now: float, limit: int, owner: str, ttl: float,
                          skip: Collection[str] = ()) -> QueueTake:
        """Claim for ``owner`` up to ``limit`` new runs of queues, best first, as their
        queues' limits allow, in one statement; list the queue runs being resumed
        (claimed one by one, their leases judged first). ``skip``: runs not to take."""
