"""Lease owners and the claim rule: who drives a run, and who may take it over.

An owner id names its host and process, so a run whose worker died on this machine can
be taken over at once instead of after the lease expires. On PostgreSQL the owner also
holds a session lock while it lives (its id then ends in ``SESSION_MARK``): any worker, on
any machine, sees it die the moment the server ends its session (ADR 0035). ``may_claim`` is the one
statement of the rule: the stores' claims and orphan searches, the worker and the run
reads all ask it. (PostgreSQL's queries repeat its cheap part, free, ours or expired, in
SQL to find candidates in one round trip; ``tests/store/test_store_claim_rule.py`` holds
both to one table.)
"""

from __future__ import annotations

import os
import socket
from typing import Callable


SESSION_MARK = "@db"  # ends the id of an owner whose life the database can see


def new_owner_id(session: bool = False) -> str:
    """``host:pid:random``, plus ``SESSION_MARK`` when the store holds a session lock for
    it (only such an owner may be judged dead by a free lock: an owner that never took
    one, an older worker's, is not)."""
    mark = SESSION_MARK if session else ""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}{mark}"


def holds_session(owner: str) -> bool:
    return owner.endswith(SESSION_MARK)


def owner_is_dead(owner: str) -> bool:
    """True only when we can prove it: the owner ran on this host and its pid is gone.

    A pid that was reused makes a dead owner look alive (its lease then expires), never
    a live one dead, so the pid alone is safe and its start time is not read (ADR 0035).
    An owner with a session lock is judged by the database alone (``Store.owner_gone``):
    a host name shared by containers with pid namespaces of their own would fool a pid."""
    if holds_session(owner):
        return False
    try:
        host, pid_text, _ = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().split(b") ", 1)[1][:1] == b"Z"
    except (OSError, IndexError):
        return False


def may_claim(holder: str | None, expires: float, claimant: str | None, now: float, *,
              steal_from_dead: bool = True,
              is_dead: Callable[[str], bool] = owner_is_dead) -> bool:
    """May ``claimant`` take a lease that ``holder`` holds until ``expires``, at ``now``?

    Yes when nobody holds it, when it is the claimant's own, when it expired (``expires``
    is before ``now``: a lease is held through its last instant), or, with
    ``steal_from_dead``, when its holder is provably dead (``is_dead``, asked last and
    only then: it looks at the process table). ``claimant=None`` asks whether anyone may:
    is the run orphaned?"""
    if holder is None or holder == claimant or expires < now:
        return True
    return steal_from_dead and is_dead(holder)


__all__ = ["SESSION_MARK", "holds_session", "may_claim", "new_owner_id", "owner_is_dead"]
