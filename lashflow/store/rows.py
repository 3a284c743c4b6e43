"""The row codec both backends share: how a journal step, an attempt and a run are
written as row values and read back, and what makes a row untrustworthy.

Each backend keeps its own SQL; what goes into and comes out of the columns is decided
here once, so a row that SQLite would refuse is refused by PostgreSQL too:

- JSON is compact and keeps non-ASCII text as is (lossless round trip).
- A step's ``detail`` carries ``crc``, the CRC-32 of its outcome text, so an outcome that
  still parses but was edited or cut is caught, whether it sits in the row or in a blob;
  and ``scrc``, that of its key and status, so a status edited by hand is caught too.
- Outcomes above ``BLOB_THRESHOLD`` go to the blobs table, keyed by their SHA-256; a
  missing blob, a blob changed in place or a row pointing at another blob is corrupt. A
  tool outcome's big ``value`` goes there alone (the row keeps the rest: status, times),
  so identical outputs share one blob; older rows hold the whole outcome in the blob.
- A step's lone first attempt may be folded into its row (key ``a1`` of ``detail``);
  decoding unfolds it, so callers never see the difference.

Anything that does not decode raises ``JournalCorrupt`` naming the run and the step: a
run is never replayed from a half-read row.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any, Sequence

from ..errors import InputInvalid, JournalCorrupt
from ..json_text import read_stored, stored
from ..states import ATTEMPT_STATUS, RUN_STATUS, STEP_STATUS, TEXT, AttemptStatus, RunStatus, StepStatus
from .base import BLOB_THRESHOLD, AttemptRecord, Commit, RunRecord, StepRecord
from ..slotted import Frozen

# The columns a journal read selects, in this order, joined with the step's blob:
# step_key, kind, tool, args_hash, status, outcome, blob data, detail, seq, created_at,
# updated_at, blob hash.
STEP_READ_COLUMNS = ("s.step_key, s.kind, s.tool, s.args_hash, s.status, s.outcome, b.data, "
                     "s.detail, s.seq, s.created_at, s.updated_at, s.blob")
# The runs columns ``run_from_row`` decodes, in this order.
RUN_COLUMNS = ("run_id, parent_run_id, process, source_hash, input, input_hash, status, result, "
               "error, waiting, created_at, updated_at, lease_owner, lease_expires, generation, "
               "cancel_requested, wake_at, meta")


def dumps(value: Any) -> str:
    """Compact JSON for a row. NaN and Infinity are not JSON: every door refuses them, and
    this refuses to write one that got past them."""
    try:
        return stored(value)
    except ValueError as exc:  # a NaN or an infinity: nothing is written
        raise InputInvalid(f"a value to store is not JSON ({exc}); nothing was written",
                           path="$") from None


def loads(text: str | None) -> Any:
    """A stored JSON text. A NaN or Infinity written by an older version reads as null,
    so the row stays readable (and every answer made from it valid JSON). The texts most
    columns hold most of the time (an empty result, error, wait list or detail) are
    answered without the decoder: a page of journals holds thousands of them."""
    if text is None or text == "null":
        return None
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return read_stored(text)


def _checked_json(run_id: str, step_key: str, what: str, text: str | None) -> Any:
    try:
        return loads(text)
    except (ValueError, TypeError) as exc:
        raise JournalCorrupt.of(run_id, step_key, f"{what} is not JSON: {exc}") from None


class EncodedStep(Frozen):
    """A step as row values. With a blob, ``outcome`` is the outcome without its ``value``
    (which is ``blob_data``), or None when the whole outcome is the blob."""

    __slots__ = ("outcome", "blob", "blob_data", "detail")
    outcome: str | None
    blob: str | None
    blob_data: str | None
    detail: str

    def __init__(
            self,
            outcome: str | None,
            blob: str | None,
            blob_data: str | None,
            detail: str,
    ) -> None:
        setter = object.__setattr__
        setter(self, "outcome", outcome)
        setter(self, "blob", blob)
        setter(self, "blob_data", blob_data)
        setter(self, "detail", detail)


def encode_step(step: StepRecord, first: AttemptRecord | None = None) -> EncodedStep:
    """Row values for ``step``; ``first`` is an attempt to fold into the row."""
    outcome = dumps(step.outcome)
    folded = ([TEXT[first.status], first.code, first.message, first.started_at, first.finished_at]
              if first is not None else None)
    state = _state_crc(step.step_key, TEXT[step.status])
    if len(outcome) <= BLOB_THRESHOLD:
        return EncodedStep(outcome, None, None, _detail(step.detail, outcome, folded, state))
    if isinstance(step.outcome, dict) and "value" in step.outcome:
        value = dumps(step.outcome["value"])
        rest = dumps({k: v for k, v in step.outcome.items() if k != "value"})
        blob = hashlib.sha256(value.encode()).hexdigest()
        return EncodedStep(rest, blob, value, _detail(step.detail, rest + value, folded, state))
    blob = hashlib.sha256(outcome.encode()).hexdigest()
    return EncodedStep(None, blob, outcome, _detail(step.detail, outcome, folded, state))


def _state_crc(step_key: str, status: str) -> int:
    """The checksum of a step's identity and status (``scrc`` in its detail): a row whose
    status was edited (``done`` back to ``started`` would run the call again) is caught."""
    return zlib.crc32(f"{step_key}\x00{status}".encode())


def _detail(detail: dict[str, Any], checked: str, folded: list[Any] | None,
            state: int) -> str:
    """The detail column: the step's detail, the checksums of what the row and its blob
    hold and of its status, and the folded first attempt."""
    out = dict(detail, crc=zlib.crc32(checked.encode()), scrc=state)
    if folded is None or "a1" in out:
        if folded is not None:
            out["a1"] = folded
        return dumps(out)
    text = dumps(out)
    # ``"a1"`` is the last key: spliced in, so the fast encoder also writes the object
    # (an attempt's ``null`` code and message would send it all to the slow one)
    return f'{text[:-1]},"a1":[{_folded_text(folded)}]}}'


def _folded_text(folded: list[Any]) -> str:
    """The items of a folded attempt, comma-separated. The usual one (a known status, no
    code or message, two times) in one encoder call for both times."""
    status, code, message, started, finished = folded
    if (code is None and message is None and type(started) is float
            and type(finished) is float and status in _QUOTED):
        return f"{_QUOTED[status]},null,null,{dumps([started, finished])[1:-1]}"
    return ",".join(map(_item, folded))


def _item(value: Any) -> str:
    """One item of a folded attempt as the standard encoder writes it. Its times (finite
    floats: ``float.__repr__``, as the encoder writes them), its status and its empty
    code and message need no encoder call; anything else gets one."""
    kind = type(value)
    if kind is float and value - value == 0.0:  # NaN and the infinities are not
        return float.__repr__(value)
    if value is None:
        return "null"
    if kind is str and value in _QUOTED:
        return _QUOTED[value]
    return dumps(value)


_QUOTED = {text: f'"{text}"' for text in TEXT.values()}  # plain ASCII words


def folded_attempts(change: Commit) -> dict[str, AttemptRecord]:
    """The attempts of ``change`` that may live inside their step's row: one marked
    ``with_step`` whose step is written ``done`` in the same change (ADR 0010). A backend
    that stores them as rows of their own simply does not ask."""
    marked = {a.step_key: a for a in change.attempts if a.with_step and a.attempt == 1}
    if not marked:
        return marked
    return {s.step_key: marked[s.step_key] for s in change.steps
            if s.status == StepStatus.DONE and s.step_key in marked}


def step_from_row(run_id: str, row: Sequence[Any], *,
                  require_crc: bool = True) -> tuple[StepRecord, AttemptRecord | None]:
    """Decode one row of ``STEP_READ_COLUMNS``, checking what a crash, a bad disk or a hand
    edit could have broken; with its folded first attempt, if any. Every row this version
    writes has a checksum, so one without is an edit; only a database migrated from before
    schema version 4 (``require_crc=False``) may hold older rows, checked for JSON only."""
    step_key, blob = row[0], row[11]
    rest = row[5] if blob is not None else None  # an outcome whose value is the blob
    text = row[6] if blob is not None else row[5]
    if blob is not None and row[6] is None:
        raise JournalCorrupt.of(run_id, step_key, f"its outcome blob {blob[:12]} is missing")
    detail = _checked_json(run_id, step_key, "detail", row[7])
    if detail is not None and not isinstance(detail, dict):
        raise JournalCorrupt.of(run_id, step_key, "detail is not an object")
    detail = detail or {}
    crc = detail.pop("crc", None)
    if crc is None and require_crc:
        raise JournalCorrupt.of(run_id, step_key, "its outcome has no checksum")
    checked = (rest or "") + text if text is not None else None
    if crc is not None and (checked is None or zlib.crc32(checked.encode()) != crc):
        raise JournalCorrupt.of(run_id, step_key, "the outcome does not match its checksum")
    state = detail.pop("scrc", None)  # rows written before it was kept have none
    if state is not None and state != _state_crc(step_key, row[4]):
        raise JournalCorrupt.of(run_id, step_key, f"its status {row[4]!r} does not match "
                                "its checksum (edited in the database?)")
    if blob is not None and hashlib.sha256(text.encode()).hexdigest() != blob:
        raise JournalCorrupt.of(run_id, step_key, f"its outcome blob {blob[:12]} was changed")
    outcome = _checked_json(run_id, step_key, "outcome", text)
    if rest is not None:
        outcome = _with_value(run_id, step_key, rest, outcome)
    folded = detail.pop("a1", None)
    attempt = None
    if folded is not None:
        if not (isinstance(folded, list) and len(folded) == 5):
            raise JournalCorrupt.of(run_id, step_key, "its folded attempt is malformed")
        attempt = AttemptRecord(run_id, step_key, 1, _attempt_status(run_id, step_key, folded[0]),
                                folded[1], folded[2], {}, folded[3], folded[4], with_step=True)
    status = STEP_STATUS.get(row[4])
    if status is None:
        raise JournalCorrupt.of(run_id, step_key, f"its status {row[4]!r} is not a step status")
    return (StepRecord(run_id, step_key, row[1], row[2], row[3], status, outcome, detail,
                       row[8], row[9], row[10]), attempt)


def _attempt_status(run_id: str, step_key: str, text: Any) -> AttemptStatus:
    status = ATTEMPT_STATUS.get(text) if isinstance(text, str) else None
    if status is None:
        raise JournalCorrupt.of(run_id, step_key, f"an attempt's status {text!r} is not an "
                                "attempt status")
    return status


def _with_value(run_id: str, step_key: str, rest: str, value: Any) -> dict[str, Any]:
    outcome = _checked_json(run_id, step_key, "outcome", rest)
    if not isinstance(outcome, dict):
        raise JournalCorrupt.of(run_id, step_key, "its outcome is not an object")
    outcome["value"] = value
    return outcome


def attempt_from_row(run_id: str, row: Sequence[Any]) -> AttemptRecord:
    """Decode (step_key, attempt, status, code, message, detail, started_at, finished_at)."""
    detail = _checked_json(run_id, row[0], "attempt detail", row[5])
    return AttemptRecord(run_id, row[0], row[1], _attempt_status(run_id, row[0], row[2]), row[3],
                         row[4], detail or {}, row[6], row[7])


def journal_from_rows(run_id: str, step_rows: Sequence[Sequence[Any]],
                      attempt_rows: Sequence[Sequence[Any]], *, require_crc: bool = True
                      ) -> tuple[list[StepRecord], list[AttemptRecord]]:
    """A run's journal from its step rows (in seq order) and attempt rows (in write order)."""
    steps: list[StepRecord] = []
    folded: list[AttemptRecord] = []
    for row in step_rows:
        step, attempt = step_from_row(run_id, row, require_crc=require_crc)
        steps.append(step)
        if attempt is not None:
            folded.append(attempt)
    rows = [attempt_from_row(run_id, attempt_row) for attempt_row in attempt_rows]
    # a folded first attempt also written as a row (a retried step keeps its history)
    # counts once; one whose step has later attempts as rows goes before them, the others
    # after every row (one pass: a long journal must not cost a scan per step)
    written = {(a.step_key, a.attempt) for a in rows}
    before = {a.step_key: a for a in folded if (a.step_key, a.attempt) not in written}
    attempts: list[AttemptRecord] = []
    for written_row in rows:
        first = before.pop(written_row.step_key, None)
        if first is not None:
            attempts.append(first)
        attempts.append(written_row)
    attempts.extend(before.values())
    return steps, attempts


def run_values(run: RunRecord) -> tuple[Any, ...]:
    """The run as the values of ``RUN_COLUMNS``, JSON fields encoded."""
    return (run.run_id, run.parent_run_id, run.process, run.source_hash, dumps(run.input),
            run.input_hash, TEXT[run.status], dumps(run.result), dumps(run.error),
            dumps(run.waiting), float(run.created_at), float(run.updated_at), run.lease_owner,
            float(run.lease_expires), run.generation, bool(run.cancel_requested),
            None if run.wake_at is None else float(run.wake_at), dumps(run.meta))


def run_status(run_id: str, text: Any) -> RunStatus:
    """A run row's status column as its member; any other text is an edit (one line)."""
    status = RUN_STATUS.get(text)
    if status is None:
        raise JournalCorrupt(f"run {run_id}: its status {text!r} in the runs table is not a "
                             "run status; restore the database from a backup", run_id=run_id)
    return status


QUEUE_RUN_COLUMNS = "queue, queue_key, priority"  # after RUN_COLUMNS when a run is inserted
NO_KEY = ""  # the queue key of a run submitted without one


def run_queue(run: RunRecord) -> tuple[str | None, str | None, int | None]:
    """The values of ``QUEUE_RUN_COLUMNS`` for ``run``: what its meta's ``queue`` names."""
    entry = run.meta.get("queue")
    if not isinstance(entry, dict):
        return None, None, None
    return entry.get("name"), entry.get("key", NO_KEY), entry.get("priority")


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A row of ``RUN_COLUMNS``; one whose JSON columns do not decode is ``JournalCorrupt``
    (one line naming the run), not a crash of every command that lists runs."""
    try:
        fields = [loads(row[i]) for i in (4, 7, 8, 9, 17)]
    except ValueError as exc:
        raise JournalCorrupt(f"run {row[0]}: its row in the runs table is corrupt ({exc}); "
                             "restore the database from a backup", run_id=row[0]) from None
    status = run_status(row[0], row[6])
    return RunRecord(
        run_id=row[0], parent_run_id=row[1], process=row[2], source_hash=row[3],
        input=fields[0], input_hash=row[5], status=status, result=fields[1],
        error=fields[2], waiting=fields[3] or [], created_at=row[10], updated_at=row[11],
        lease_owner=row[12], lease_expires=row[13], generation=row[14],
        cancel_requested=bool(row[15]), wake_at=row[16], meta=fields[4] or {})


__all__ = ["NO_KEY", "QUEUE_RUN_COLUMNS", "RUN_COLUMNS", "STEP_READ_COLUMNS", "EncodedStep", "attempt_from_row", "dumps",
           "encode_step", "folded_attempts", "journal_from_rows", "loads", "run_from_row",
           "run_queue", "run_status", "step_from_row"]
