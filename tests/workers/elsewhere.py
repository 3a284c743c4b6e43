"""``lashflow`` as if on another machine: ``python elsewhere.py HOST ARGS...`` runs the
command with ``socket.gethostname()`` answering HOST, so no other worker can judge it by
its pid (what a worker on another host would be): only the database can see it die."""

from __future__ import annotations

import socket
import sys

host = sys.argv.pop(1)
socket.gethostname = lambda: host  # type: ignore[assignment]
sys.argv[0] = "lashflow"

from lashflow.cli import main  # noqa: E402 - after the host is set

main()
