"""Helpers for testing tools and workflows without real waiting.

``FakeClock`` replaces the real clock (``Engine(clock=...)``, ``Dispatcher(clock=...)``):
sleeps, retry delays and deadlines only fall due when the test calls ``advance``.
``WorkflowEnv`` (the ``lashflow_env`` pytest fixture) runs workflows against a fresh
store with time skipped, tools mocked by name and crashes injected at any step
(docs/testing-workflows.md).

Names load on first use (PEP 562): the pytest plugin imports this package when pytest
starts, and must cost next to nothing there.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Clock": "lashflow.tools.clock",
    "RealClock": "lashflow.tools.clock",
    "FakeClock": "lashflow.testing.clock",
    "SkippingClock": "lashflow.testing.timeskip",
    "WorkflowEnv": "lashflow.testing.env",
    "Run": "lashflow.testing.env",
    "ToolMock": "lashflow.testing.mocks",
    "Call": "lashflow.testing.mocks",
    "Pending": "lashflow.testing.mocks",
    "SimulatedCrash": "lashflow.testing.crash",
    "journal_text": "lashflow.testing.assertions",
    "assert_status": "lashflow.testing.assertions",
    "assert_finished": "lashflow.testing.assertions",
    "assert_called": "lashflow.testing.assertions",
    "assert_step": "lashflow.testing.assertions",
    "run_tool": "lashflow.testing.tool_runs",
    "Replayer": "lashflow.testing.replayer",
    "assert_replays": "lashflow.testing.fixtures",
    "exported_runs": "lashflow.testing.fixtures",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lashflow.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
