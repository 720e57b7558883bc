"""History passes: repair, sanitize, trim and budget a conversation."""

from golem.history.processors import (
    HistoryProcessor,
    HistoryProcessorError,
    budget_history,
    trim_history,
)
from golem.history.repair import (
    INTERRUPTED_RESULT,
    OUTCOME_UNKNOWN_RESULT,
    HistoryRepair,
    normalize_history,
)
from golem.history.sanitize import SanitizeReport, UnsafePart, sanitize_history
from golem.history.tokens import TokenCounter, estimate_tokens, tiktoken_counter

__all__ = [
    "INTERRUPTED_RESULT",
    "OUTCOME_UNKNOWN_RESULT",
    "HistoryProcessor",
    "HistoryProcessorError",
    "HistoryRepair",
    "SanitizeReport",
    "TokenCounter",
    "UnsafePart",
    "budget_history",
    "estimate_tokens",
    "normalize_history",
    "sanitize_history",
    "tiktoken_counter",
    "trim_history",
]
