"""golem: durable Python agents on Temporal.

Public API: re-exports only. See README.md and docs/adr/.
"""

from golem.ids import new_id
from golem.messages import (
    HistoryError,
    Message,
    Part,
    ThinkingBlock,
    ToolCall,
    Usage,
    dump_messages,
    load_messages,
    validate_history,
)

__all__ = [
    "HistoryError",
    "Message",
    "Part",
    "ThinkingBlock",
    "ToolCall",
    "Usage",
    "dump_messages",
    "load_messages",
    "new_id",
    "validate_history",
]
