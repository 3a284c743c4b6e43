"""Lease owners: who drives a run. An owner id names its host and process so a run whose
worker died on this machine can be taken over at once instead of after the lease expires."""

from __future__ import annotations

import os
import socket


def new_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


def owner_is_dead(owner: str) -> bool:
    """True only when we can prove it: the owner ran on this host and its pid is gone."""
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
