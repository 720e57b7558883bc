"""golem: durable Python agents on Temporal.

Public API: re-exports only. See README.md and docs/adr/.
"""

# ruff: noqa: F405 (the names come from golem._exports, loaded on first use)

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from golem._exports import *  # noqa: F403

__all__ = [
    "INTERRUPTED_RESULT",
    "OUTCOME_UNKNOWN_RESULT",
    "Agent",
    "ApprovalPolicy",
    "Approve",
    "Ask",
    "Canceled",
    "ConversationClosedError",
    "Decision",
    "Deny",
    "FallbackError",
    "HistoryError",
    "HistoryProcessorError",
    "HistoryRepair",
    "Message",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelRetry",
    "Part",
    "PartialResult",
    "Result",
    "Retry",
    "Rule",
    "RunContext",
    "RunError",
    "RunEvent",
    "RunIdInUseError",
    "RunStream",
    "SanitizeReport",
    "ThinkingBlock",
    "Tool",
    "ToolCall",
    "ToolFailed",
    "TurnNotTaken",
    "UnknownAgentError",
    "UnsafePart",
    "Usage",
    "UsageLimits",
    "Verdict",
    "WorkflowTaskFailing",
    "budget_history",
    "dump_messages",
    "handoff_target",
    "load_messages",
    "new_id",
    "normalize_history",
    "sanitize_history",
    "trim_history",
    "validate_history",
]


def __getattr__(name: str) -> object:
    """The public names load on first use, so ``import golem.cli`` (``golem --version``)
    stays instant."""
    if name not in __all__:
        raise AttributeError(f"module 'golem' has no attribute {name!r}")
    from golem import _exports

    value = getattr(_exports, name)
    globals()[name] = value
    return value
