"""The web console of ``lashflow serve``: runs, a run's journal and graph, and the inbox
of open completion keys for the people who approve (docs/console.md)."""

from .session import Sessions
from .views import Console, ConsoleConfig

__all__ = ["Console", "ConsoleConfig", "Sessions"]
