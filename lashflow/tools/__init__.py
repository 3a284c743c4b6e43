"""The tool layer: defining tools, dispatching batches, attempts and retries,
deferred completion, direct model completions and the output budget.

Usable without the language: the journal, clock, completion storage and model
provider are all injected.
"""

from lashflow.tools.attempts import AttemptJournal, CallEnv, MemoryJournal, NullJournal, run_attempts
from lashflow.tools.budget import (
    ToolOutputBudgetConfig, ToolOutputBudgetMode, budget_text, project_output, rust_lines,
)
from lashflow.tools.clock import Clock, RealClock
from lashflow.tools.completion import (
    CompletionAlreadyResolved, CompletionBook, CompletionError, CompletionExpired, CompletionRecord,
    CompletionStorage, InMemoryCompletionStorage, Resolution, ResolutionKind, ResolutionSource,
    Settle, UnknownCompletionKey, outcome_for_resolution,
)
from lashflow.tools.context import NESTED_DISPATCH_MESSAGE, ToolCall, ToolContext
from lashflow.tools.decorator import FunctionTool, tool
from lashflow.tools.definition import RegisteredTool, ToolDefinition, ToolObject, ToolProvider
from lashflow.tools.dispatch import DispatchCall, Dispatcher, DispatchResult
from lashflow.tools.keys import CompletionKey, KeyRing, derive_key, new_secret, verify_key
from lashflow.tools.loading import load_tool_modules, tools_from_config
from lashflow.tools.models import (
    CompletionRequest, CompletionResponse, ModelProvider, ModelProviderError, OpenAICompatibleProvider,
    ScriptedProvider, TokenUsage,
)
from lashflow.tools.outcome import OutcomeStatus, ToolOutcome
from lashflow.tools.plugins import (
    PluginStack, ToolOutputBudgetPluginFactory, ToolResultProjector, runtime_plugin_stack,
)
from lashflow.tools.registry import ToolRegistry, tools_in_module
from lashflow.tools.results import OnCancel, OnTimeout, PendingCompletion, Retry, ToolResult
from lashflow.tools.retry import RetryPolicy

__all__ = [
    "AttemptJournal", "CallEnv", "Clock", "CompletionAlreadyResolved", "CompletionBook",
    "CompletionError", "CompletionExpired", "CompletionKey",
    "CompletionRecord", "CompletionRequest", "CompletionResponse", "CompletionStorage", "DispatchCall",
    "DispatchResult", "Dispatcher", "FunctionTool", "InMemoryCompletionStorage", "KeyRing", "MemoryJournal",
    "ModelProvider", "ModelProviderError", "NESTED_DISPATCH_MESSAGE", "NullJournal", "OnCancel", "OnTimeout",
    "OpenAICompatibleProvider", "OutcomeStatus", "PendingCompletion", "PluginStack", "RealClock",
    "RegisteredTool", "Resolution", "ResolutionKind", "ResolutionSource", "Retry", "RetryPolicy",
    "ScriptedProvider", "Settle", "TokenUsage", "ToolCall", "ToolContext", "ToolDefinition", "ToolObject",
    "ToolOutcome", "ToolOutputBudgetConfig", "ToolOutputBudgetMode", "ToolOutputBudgetPluginFactory",
    "ToolProvider", "ToolRegistry", "ToolResult", "ToolResultProjector", "budget_text", "derive_key",
    "UnknownCompletionKey", "load_tool_modules", "new_secret", "outcome_for_resolution", "project_output", "run_attempts",
    "runtime_plugin_stack", "rust_lines", "tool", "tools_from_config", "tools_in_module", "verify_key",
]
