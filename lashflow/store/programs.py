"""What the store decides, written once for every backend: each operation that reads or
writes more than one statement is a *program*, a generator that yields the statements it
needs, by name, and is sent their answers.

    row = yield "lease_of", (run_id,)

A backend runs a program inside whatever its dialect calls one unit of work (SQLite: a
plain function in one transaction on one thread, one hop; PostgreSQL: one pooled
connection, in a transaction where the program must be atomic) and answers each
statement with its own SQL (``STATEMENTS`` names them all; each backend has a method per
name). The programs hold the decisions both backends must make alike: the schema
version rules, first-writer-wins completions, signals delivered once, the claim rule,
re-opening a stopped run. They do no I/O and read no clock: times come from the caller.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Generator, Iterable, Mapping, Sequence, TypeVar

from ..errors import DbError, Fenced, JournalCorrupt
from ..states import PAUSABLE, SETTLED, RunStatus
from . import events
from .base import (
    CHECKSUMS_REQUIRED_FROM, SCHEMA_VERSION, AttemptRecord, Claimed, JournalEntry, JournalPage,
    Reopening, RunDetail, RunQuery, RunRecord, StepRecord, StoreStats,
)
from .leases import holds_session, may_claim, owner_is_dead
from .queries import next_cursor, stats_of, summary_from_row
from .rows import RUN_COLUMNS, dumps, journal_from_rows, loads, run_from_row, run_queue

T = TypeVar("T")
Ask = tuple[str, tuple[Any, ...]]  # (statement name, its arguments)
Program = Generator[Ask, Any, T]


def run_on(program: Program[T], statements: Any, conn: Any) -> T:
    """Run ``program`` to its end on a blocking connection, answering each statement it
    asks for with the method of that name on ``statements``."""
    answer = None
    while True:
        try:
            name, args = program.send(answer)
        except StopIteration as end:
            return end.value
        answer = getattr(statements, name)(conn, *args)

# Runs a delivery may wake: waiting ones become due, a running one keeps the wake time
# through its park (it may be parking on what was just delivered).
WAKEABLE = (RunStatus.WAITING, RunStatus.RUNNING)
REOPENABLE = (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.NEEDS_ATTENTION, RunStatus.PAUSED)
UNCLAIMABLE = SETTLED | {RunStatus.PAUSED}
COMPLETION_FIELDS = ("run_id", "step_key", "waiting", "deadline_at", "on_timeout", "on_cancel",
                     "module", "tool", "resolution")
COMPLETION_COLUMNS = ", ".join(COMPLETION_FIELDS)


def fenced(run_id: str) -> Fenced:
    return Fenced(f"run {run_id} is driven by another worker")


def one(name: str, *args: Any) -> Program[Any]:
    """A program of one statement: its answer."""
    return (yield name, args)


# -- the schema ---------------------------------------------------------------------------
MIN_SECRET = 32  # bytes: what the key ring requires of the secret that signs keys


def _foreign(label: str, what: str) -> DbError:
    return DbError(f"database {label} holds a meta table lashflow did not write ({what}); "
                   "is it another application's? Give lashflow a database of its own")


def schema_version_of(raw: Any, label: str) -> int:
    """The stored schema version (0: none yet); a value lashflow never writes is another
    application's table, refused as ``db_error`` rather than trusted or overwritten."""
    if raw is None:
        return 0
    text = bytes(raw).decode("ascii", "replace") if isinstance(raw, (bytes, memoryview)) \
        else str(raw)
    if not text.isdigit() or len(text) > 6:
        raise _foreign(label, f"schema version {text[:20]!r}")
    return int(text)


def secret_of(raw: Any, label: str) -> bytes:
    """The stored key secret, refused as ``db_error`` unless it is bytes of the size
    lashflow makes (a short or textual one is not lashflow's)."""
    if not isinstance(raw, (bytes, bytearray, memoryview)) or len(bytes(raw)) < MIN_SECRET:
        raise _foreign(label, "its completion-key secret is missing or not one lashflow made")
    return bytes(raw)


def migrate(migrations: Mapping[int, Sequence[str]], label: str,
            secret: bytes) -> Program[None]:
    """Bring the schema to ``SCHEMA_VERSION`` (run by the backend inside its exclusive
    migration transaction). A newer schema is refused, never touched; a database from
    before checksums is marked so its old rows are checked for JSON only; the secret that
    signs completion keys is made once."""
    yield "create_meta", ()
    version = schema_version_of((yield "schema_version", ()), label)
    if version > SCHEMA_VERSION:
        raise DbError(f"database {label} has schema version {version}, newer than this "
                      f"lashflow supports ({SCHEMA_VERSION}); upgrade lashflow to open it")
    for target in range(version + 1, SCHEMA_VERSION + 1):
        for statement in migrations[target]:
            yield "migrate", (statement,)
    if 0 < version < CHECKSUMS_REQUIRED_FROM:
        yield "mark_unchecked", ()
    yield "set_schema_version", (SCHEMA_VERSION,)
    yield "ensure_secret", (secret,)


# -- runs ---------------------------------------------------------------------------------
def enqueued(runs: list[RunRecord]) -> Program[None]:
    """Give each of ``runs`` (just stored) that entered a fair queue its fairness tag
    (``fair_enqueue`` does nothing for a queue that is not fair; ADR 0037)."""
    for run in runs:
        queue, key, _ = run_queue(run)
        if queue is not None:
            yield "fair_enqueue", (run.run_id, queue, key)


def create_run(run: RunRecord) -> Program[tuple[RunRecord, bool]]:
    if (yield "insert_run", (run,)):
        yield from enqueued([run])
        return run, True  # stored as given: no need to read it back
    row = yield "run_row", (run.run_id,)
    if row is None:  # inserted and deleted in between: nothing here deletes live runs
        raise DbError(f"run {run.run_id} vanished while being created")
    return run_from_row(row), False


def get_run(run_id: str) -> Program[RunRecord | None]:
    row = yield "run_row", (run_id,)
    return run_from_row(row) if row else None


def list_runs(status: str | None, limit: int | None) -> Program[list[RunRecord]]:
    return [run_from_row(row) for row in (yield "run_rows", (status, limit))]


def stats(now: float) -> Program[StoreStats]:
    by_status = yield "runs_by_status", ()
    return stats_of(by_status, (yield "parked_waits", ()), now)


def journal(run_id: str, require_crc: bool) -> Program[tuple[list[StepRecord], list[AttemptRecord]]]:
    """The run's journal; a row that cannot be trusted raises ``JournalCorrupt`` (never
    a half-decoded step that replay would take as the truth)."""
    steps = yield "journal_steps", (run_id,)
    attempts = yield "journal_attempts", (run_id,)
    return journal_from_rows(run_id, steps, attempts, require_crc=require_crc)


def journal_page(query: RunQuery, processes: Collection[str | None] | None,
                 require_crc: bool) -> Program[JournalPage]:
    """A page of runs (``query_runs``'s order and filters) with their journals: three
    statements for the whole page, however many runs it holds. ``processes``: keep only
    the page's runs of these processes (see ``Store.journal_page``)."""
    rows = yield "run_page_records", (query,)
    page = [row for row in rows[: query.limit] if processes is None or row[2] in processes]
    ids = [row[0] for row in page]
    step_rows: dict[str, list[Any]] = {run_id: [] for run_id in ids}
    attempt_rows: dict[str, list[Any]] = {run_id: [] for run_id in ids}
    if ids:  # rows carry their run id last, in (run, seq) and (run, write) order
        for row in (yield "journal_steps_of", (ids,)):
            step_rows[row[-1]].append(row)
        for row in (yield "journal_attempts_of", (ids,)):
            attempt_rows[row[-1]].append(row)
    entries = []
    for row in page:
        entry = JournalEntry(run_from_row(row))
        try:
            entry.steps, entry.attempts = journal_from_rows(
                row[0], step_rows[row[0]], attempt_rows[row[0]], require_crc=require_crc)
        except JournalCorrupt as exc:  # the run's own row still reads
            entry.journal_error = exc
        entries.append(entry)
    return JournalPage(entries, next_cursor(rows, query, RUN_COLUMNS.split(", ").index(
        "created_at")))


def run_detail(run_id: str, require_crc: bool) -> Program[RunDetail | None]:
    row = yield "run_row", (run_id,)
    if row is None:
        return None
    detail = RunDetail(run_from_row(row))
    try:
        detail.steps, detail.attempts = yield from journal(run_id, require_crc)
    except JournalCorrupt as exc:  # the run's own row still reads
        detail.journal_error = exc
    detail.children = [summary_from_row(child) for child in (yield "children", (run_id,))]
    detail.signals = [(name, ordinal, loads(payload))
                      for name, ordinal, payload in (yield "signals_of", (run_id,))]
    return detail


def stale_runs(before: float, statuses: Iterable[str], limit: int) -> Program[list[str]]:
    wanted = [status for status in statuses if status in SETTLED]
    if not wanted:
        return []
    return list((yield "stale_runs", (wanted, before, limit)))


def delete_runs(run_ids: list[str]) -> Program[int]:
    """Only settled runs go, with everything they own, in one transaction."""
    settled = list((yield "settled_among", (run_ids,)))
    if settled:
        yield "delete_runs", (settled,)
    return len(settled)


def orphaned_runs(now: float) -> Program[list[str]]:
    rows = yield "unsettled_leases", (now,)
    return [run_id for run_id, holder, expires in rows if may_claim(holder, expires, None, now)]


class Gated:
    """``claim``'s answer for a run in a queue: its claim must pass the queue's gate
    (``queues.claim_queued``, in a transaction that holds the queue's lock)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        """The one ``GATED``, also from SQLite's writer process (ADR 0050): callers
        compare by identity."""
        return "GATED"


GATED = Gated()


def claim(run_id: str, owner: str, ttl: float, now: float,
          steal_from_dead: bool) -> Program[Claimed | Gated | None]:
    """Take the run's lease if ``may_claim`` says so. ``claim_free`` may take it at once
    where the lease is plainly free, ours or expired and the run is in no queue (a
    backend without such a shortcut answers None); otherwise the lease is read, judged,
    and swapped only if nobody moved it since (compare and swap on holder and
    generation). A run in a queue is answered ``GATED``, untouched."""
    expires = now + ttl
    taken = yield "claim_free", (run_id, owner, now, expires)
    if taken is not None:
        row, taken_from = taken
        return Claimed(run_from_row(row), taken_from)
    lease = yield "lease_of", (run_id,)
    if lease is None:
        return None
    holder, held_until, generation, status, queued = lease
    if status in UNCLAIMABLE:
        return None  # nothing to drive: left as it is, its updated_at too
    if queued:
        return GATED
    if not may_claim(holder, held_until, owner, now, steal_from_dead=False):
        # a live lease of someone else's: taken only from a holder proven dead, by its
        # session (asked of the server, at this moment) or by its pid on this host
        if not steal_from_dead or holder is None:
            return None
        if not ((yield "session_gone", (holder,)) if holds_session(holder)
                else owner_is_dead(holder)):
            return None
    # only a dead holder's live lease let us in: the swap must not wait for it to lapse
    dead = holder not in (None, owner) and held_until >= now
    row = yield "claim_swap", (run_id, owner, now, expires, generation, holder, dead)
    return None if row is None else Claimed(run_from_row(row), holder)


def update_meta(run_id: str, edit: Callable[[dict[str, Any]], None]) -> Program[None]:
    """Read-modify-write of the run's meta under its row lock (no lost update)."""
    row = yield "meta_for_update", (run_id,)
    if row is None:
        return
    meta = loads(row[0]) or {}
    edit(meta)
    yield "set_meta", (run_id, dumps(meta))


def reopen_runs(reopenings: list[Reopening], now: float) -> Program[list[str]]:
    """The stopped runs whose lease is free go back in the queue, cleared, each its
    ``Reopening`` applied: a handful of statements for the whole batch."""
    wanted = {r.run_id: r for r in reopenings}
    changed: list[tuple[str, str]] = []
    for run_id, meta_text, status, holder, expires in (
            (yield "reopen_candidates", (sorted(wanted),))):
        if status in REOPENABLE and may_claim(holder, expires, None, now,
                                              steal_from_dead=False):
            meta = loads(meta_text) or {}
            wanted[run_id].edit(meta)
            changed.append((run_id, dumps(meta)))
    if not changed:
        return []
    chosen = [wanted[run_id] for run_id, _ in changed]
    attempts = [a for r in chosen for a in r.attempts]
    if attempts:
        yield "put_attempts", (attempts,)
    yield "requeue_runs", (changed, now)
    forget = [(r.run_id, key) for r in chosen for key in r.forget]
    if forget:
        yield "forget_completions", (forget,)
    yield "append_events", ([(run_id, *events.status_event(RunStatus.QUEUED, now, reopened=True))
                             for run_id, _ in changed],)
    return [run_id for run_id, _ in changed]


def stop_requests(run_ids: list[str]) -> Program[dict[str, str]]:
    rows = yield "stop_requested", (run_ids,)
    return {run_id: "cancel" if cancel else "pause" for run_id, cancel, status in rows}


def pause_runs(run_ids: list[str], now: float, info: dict[str, Any]) -> Program[list[str]]:
    """Those of ``run_ids`` that would move on by themselves become ``paused`` (a drive
    under way keeps its lease: its writes land, its status change does not)."""
    changed, said = [], []
    for run_id, status, meta_text in (yield "runs_for_update", (run_ids,)):
        if status in PAUSABLE:
            meta = loads(meta_text) or {}
            meta["paused"] = dict(info, was=status)
            changed.append((run_id, RunStatus.PAUSED, dumps(meta)))
            said.append((run_id, *events.status_event(
                RunStatus.PAUSED, now, by=info.get("by"), reason=info.get("reason"), was=status)))
    if changed:
        yield "set_status_meta", (changed, now)
        yield "append_events", (said,)
    return [run_id for run_id, _, _ in changed]


def unpause_runs(run_ids: list[str], now: float) -> Program[list[str]]:
    """Paused runs go back in the queue: a worker replays each to where it stood, and a
    wait whose deadline passed meanwhile meets it then. A run its retry policy paused is
    left (``retry`` continues it by running the call again: a replay would hand the
    program the exhausted error)."""
    changed = []
    for run_id, status, meta_text in (yield "runs_for_update", (run_ids,)):
        if status != RunStatus.PAUSED:
            continue
        meta = loads(meta_text) or {}
        if "step" in (meta.get("paused") or {}):
            continue
        meta.pop("paused", None)
        changed.append((run_id, RunStatus.QUEUED, dumps(meta)))
    if changed:
        yield "set_status_meta", (changed, now)
        yield "append_events", ([(run_id, *events.status_event(RunStatus.QUEUED, now, unpaused=True))
                                 for run_id, _, _ in changed],)
    return [run_id for run_id, _, _ in changed]


def cancel_runs(run_ids: list[str], now: float, reason: str | None) -> Program[list[str]]:
    """A cancel requested on each unsettled one of ``run_ids``; those no drive holds
    (queued, waiting, paused, needs_attention) are queued, so the next drive settles
    them ``cancelled`` (a cancel replays nothing); a running one's drive is told by the
    watcher beside it, or its successor finds the request when it claims."""
    changed = []
    for run_id, status, meta_text in (yield "runs_for_update", (run_ids,)):
        if status not in SETTLED:
            meta = loads(meta_text) or {}
            if reason:
                meta["cancel_reason"] = reason
            changed.append((run_id, RunStatus.RUNNING if status == RunStatus.RUNNING else RunStatus.QUEUED,
                            dumps(meta)))
    if changed:
        yield "request_cancels", (changed, now)
        yield "append_events", ([(run_id, *events.status_event(
            status, now, cancel_requested=True, reason=reason))
            for run_id, status, _ in changed],)
    return [run_id for run_id, _, _ in changed]


# -- versions -----------------------------------------------------------------------------
def version_from_row(row: Any) -> dict[str, Any]:
    return {"process": row[0], "version": int(row[1]), "source_hash": row[2],
            "content_hash": row[3], "tools": loads(row[4]) or {}, "deployed_at": row[5]}


def versions(process: str | None) -> Program[list[dict[str, Any]]]:
    return [version_from_row(row) for row in (yield "versions_of", (process,))]


def deploy_version(process: str, source_hash: str, content_hash: str, tools: dict[str, Any],
                   now: float) -> Program[tuple[int, bool]]:
    """The next number of ``process``, unless its last version is this content."""
    rows = yield "versions_of", (process,)
    if rows and rows[-1][3] == content_hash:
        return int(rows[-1][1]), False
    number = int(rows[-1][1]) + 1 if rows else 1
    yield "insert_version", (process, number, source_hash, content_hash, dumps(tools), now)
    return number, True


def move_run(run_id: str, from_hash: str, to_hash: str, edit: Callable[[dict[str, Any]], None],
             now: float) -> Program[str]:
    """An unsettled run whose lease is free, still on ``from_hash``, moves to ``to_hash``."""
    row = yield "move_candidate", (run_id,)
    if row is None:
        return "unknown"
    source_hash, meta_text, status, holder, expires = row
    if status in SETTLED:
        return "settled"
    if source_hash != from_hash:
        return "changed"
    if not may_claim(holder, expires, None, now, steal_from_dead=False):
        return "busy"
    meta = loads(meta_text) or {}
    edit(meta)
    yield "set_source", (run_id, to_hash, dumps(meta), now)
    return "moved"


# -- completions and signals ----------------------------------------------------------------
def completion_from_row(row: Any) -> dict[str, Any]:
    return {"run_id": row[0], "step_key": row[1], "waiting": bool(row[2]),
            "deadline_at": row[3], "on_timeout": row[4], "on_cancel": row[5], "module": row[6],
            "tool": row[7], "resolution": loads(row[8])}


def completion_get(run_id: str, step_key: str) -> Program[dict[str, Any] | None]:
    row = yield "completion", (run_id, step_key)
    return completion_from_row(row) if row else None


def completion_open_wait(row: dict[str, Any]) -> Program[dict[str, Any]]:
    """Insert the row waiting, or fill in the wait fields of one not waiting yet (a
    resolution delivered earlier stays; a row already waiting keeps its fields)."""
    return completion_from_row((yield "open_wait", (row,)))


def completion_open_waits(run_id: str) -> Program[list[dict[str, Any]]]:
    return [completion_from_row(row) for row in (yield "open_waits", (run_id,))]


def completion_settle(run_id: str, step_key: str, resolution: dict[str, Any], now: float,
                      respect_deadline: bool, wake_at: float | None
                      ) -> Program[tuple[dict[str, Any], str]]:
    """First writer wins: the row is touched (created if missing, locked where the
    backend locks rows) and read, so of concurrent settlers exactly one sees no
    resolution; with ``respect_deadline`` a resolution after the deadline loses."""
    current = completion_from_row((yield "touch_completion", (run_id, step_key)))
    if current["resolution"] is not None:
        return current, "already_resolved"
    deadline = current["deadline_at"]
    if respect_deadline and deadline is not None and now >= deadline:
        return current, "expired"
    yield "resolve_completion", (run_id, step_key, dumps(resolution))
    if wake_at is not None:
        yield "wake", (run_id, wake_at, WAKEABLE)
    current["resolution"] = resolution
    return current, "won"


def add_signal(run_id: str, name: str, payload: Any, sender: str | None) -> Program[int]:
    """Append with the next ordinal of its name. ``append_signal`` answers None when a
    concurrent sender took that ordinal (then the one after is tried); a ``sender`` that
    delivered before (it resumed after a crash) gets its first ordinal back."""
    text = dumps(payload)
    for _ in range(10_000):
        if sender is not None:
            sent = yield "signal_by_sender", (run_id, name, sender)
            if sent is not None:
                return int(sent)
        ordinal = yield "append_signal", (run_id, name, text, sender)
        if ordinal is not None:
            return int(ordinal)
    raise DbError(f"could not append signal {name!r} to run {run_id}: too much contention")


def get_signal(run_id: str, name: str, ordinal: int) -> Program[tuple[bool, Any]]:
    row = yield "signal", (run_id, name, ordinal)
    return (True, loads(row[0])) if row else (False, None)


# Every statement a program asks for: each backend answers each with a method of this name.
STATEMENTS = frozenset({
    "create_meta", "schema_version", "migrate", "mark_unchecked", "set_schema_version",
    "ensure_secret", "unchecked_mark", "secret", "setting", "put_setting", "put_source",
    "get_source",
    "insert_run", "run_row", "run_rows", "runs_by_status", "parked_waits", "run_page",
    "journal_steps", "journal_attempts", "run_page_records", "journal_steps_of",
    "journal_attempts_of", "children", "signals_of", "stale_runs",
    "settled_among", "delete_runs", "delete_unreferenced_blobs", "cancel_requested",
    "unsettled_leases", "claim_free", "lease_of", "session_gone", "claim_swap", "renew", "request_cancel",
    "due_runs", "wake", "meta_for_update", "stop_requested", "runs_for_update",
    "set_status_meta", "request_cancels", "run_count", "set_meta", "reopen_candidates",
    "put_attempts", "requeue_runs", "forget_completions",
    "completion", "open_wait", "open_waits", "touch_completion", "resolve_completion",
    "signal_by_sender", "append_signal", "signal",
    "versions_of", "insert_version", "move_candidate", "set_source",
    # schedules (store.schedules)
    "schedule_row", "schedule_rows", "due_schedules", "insert_schedule", "swap_schedule",
    "swap_schedule_batch", "insert_runs", "delete_schedule", "runs_with_prefix",
    "run_statuses", "next_due_at", "drop_ahead",
    # events (store.events)
    "append_events", "run_events", "last_event", "feed", "feed_head",
    # queues (store.queues)
    "queue_lease_of", "gate_claim", "lock_queue", "debounce_target", "debounce_update",
    "key_unsettled",
    "queue_row", "queue_weights", "queue_rows", "insert_queue", "update_queue", "put_weight",
    "delete_queue", "queue_depths", "buckets_of", "fair_enqueue", "fair_started",
    "take_turn",
    # rate limits and global concurrency (store.ratelimits)
    "take_named_rate", "take_own_rate", "take_slot", "release_slot", "rate_limit_rows",
    "put_rate_limit", "delete_rate_limit", "slots_held",
})

__all__ = ["GATED", "STATEMENTS", "Ask", "Gated", "Program", "enqueued", "fenced", "one"]
