"""History passes: repair, sanitize, trim and budget a conversation."""

from golem.history.processors import HistoryProcessor, budget_history, trim_history
from golem.history.repair import INTERRUPTED_RESULT, HistoryRepair, normalize_history
from golem.history.sanitize import SanitizeReport, UnsafePart, sanitize_history

__all__ = [
    "INTERRUPTED_RESULT",
    "HistoryProcessor",
    "HistoryRepair",
    "SanitizeReport",
    "UnsafePart",
    "budget_history",
    "normalize_history",
    "sanitize_history",
    "trim_history",
]
