"""Backoff for wrong credentials, per client, so the management token cannot be guessed
at the speed of the network.

A client (its address) may get the token wrong ``FREE_MISSES`` times; each miss after
that closes the door to it for twice as long as the last (1 s, 2 s, 4 s ... at most
``LONGEST_WAIT``), and while the door is closed its attempts are answered 429 with
``Retry-After`` before the token is even compared. Nothing sleeps: a waiting client
costs the server one dictionary look-up, and every other client is served as before. A
right token forgets the client's misses; so do ``FORGET_AFTER`` seconds without one.
The table is bounded (the oldest client is forgotten first).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

FREE_MISSES = 3
FIRST_WAIT = 1.0
LONGEST_WAIT = 60.0
FORGET_AFTER = 15 * 60.0
MAX_CLIENTS = 10_000


@dataclass(slots=True)
class _Misses:
    count: int
    last: float
    open_at: float


class Throttle:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._clients: OrderedDict[str, _Misses] = OrderedDict()

    def wait_left(self, client: str) -> int:
        """Whole seconds before ``client`` may try a credential again (0: now)."""
        misses = self._clients.get(client)
        if misses is None:
            return 0
        now = self._now()
        if now - misses.last > FORGET_AFTER:
            del self._clients[client]
            return 0
        return max(0, math.ceil(misses.open_at - now))

    def missed(self, client: str) -> None:
        """``client`` offered a wrong credential."""
        now = self._now()
        misses = self._clients.pop(client, None) or _Misses(0, now, now)
        misses.count += 1
        misses.last = now
        beyond = misses.count - FREE_MISSES
        if beyond > 0:
            misses.open_at = now + min(FIRST_WAIT * 2 ** min(beyond - 1, 30), LONGEST_WAIT)
        self._clients[client] = misses  # the most recent last: evicted last
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)

    def passed(self, client: str) -> None:
        """``client`` offered the right credential."""
        if self._clients:
            self._clients.pop(client, None)


__all__ = ["FREE_MISSES", "LONGEST_WAIT", "Throttle"]
