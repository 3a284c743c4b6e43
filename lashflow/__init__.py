"""lashflow: a durable workflow engine for Python with its own small language, Lashlang.

Names are resolved lazily (PEP 562) so ``import lashflow`` stays light: a worker that
restarts after a crash must reach its first resumed step quickly.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # engine
    "Engine": "lashflow.durable.engine",
    "RunHandle": "lashflow.durable.engine",
    "RunOutcome": "lashflow.durable.outcome",
    "RunStatus": "lashflow.states",
    "RunError": "lashflow.durable.outcome",
    "Wait": "lashflow.durable.outcome",
    "StepView": "lashflow.durable.outcome",
    "RunSummary": "lashflow.durable.outcome",
    "RunPage": "lashflow.durable.outcome",
    "RunDetail": "lashflow.durable.outcome",
    "AttemptView": "lashflow.durable.outcome",
    # errors
    "LashflowError": "lashflow.errors",
    "PluginError": "lashflow.errors",
    # tools
    "tool": "lashflow.tools",
    "ToolCall": "lashflow.tools",
    "ToolContext": "lashflow.tools",
    "ToolResult": "lashflow.tools",
    "ToolDefinition": "lashflow.tools",
    "ToolProvider": "lashflow.tools",
    "ToolRegistry": "lashflow.tools",
    "Retry": "lashflow.tools",
    "RetryPolicy": "lashflow.tools",
    "PendingCompletion": "lashflow.tools",
    "OnTimeout": "lashflow.tools",
    "OnCancel": "lashflow.tools",
    "CompletionKey": "lashflow.tools",
    "CompletionError": "lashflow.tools",
    "ToolOutputBudgetConfig": "lashflow.tools",
    "ToolOutputBudgetMode": "lashflow.tools",
    "ToolOutputBudgetPluginFactory": "lashflow.tools",
    "PluginStack": "lashflow.tools",
    "runtime_plugin_stack": "lashflow.tools",
    "project_output": "lashflow.tools",
    "ModelProvider": "lashflow.tools",
    "ScriptedProvider": "lashflow.tools",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lashflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
