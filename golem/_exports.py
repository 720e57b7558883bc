"""What ``golem`` re-exports, imported at once on first use of any (golem/__init__.py)."""

# ruff: noqa: F401 (re-exports)

from golem.agent import Agent, RunStream
from golem.approvals import Approve, Deny
from golem.delegation import handoff_target
from golem.errors import (
    Canceled,
    ConversationClosedError,
    FallbackError,
    HistoryError,
    HistoryProcessorError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelRetry,
    PartialResult,
    RunError,
    RunIdInUseError,
    ToolFailed,
    TurnNotTaken,
    UnknownAgentError,
    WorkflowTaskFailing,
)
from golem.events import RunEvent
from golem.history import (
    INTERRUPTED_RESULT,
    OUTCOME_UNKNOWN_RESULT,
    HistoryRepair,
    SanitizeReport,
    UnsafePart,
    budget_history,
    normalize_history,
    sanitize_history,
    trim_history,
)
from golem.ids import new_id
from golem.messages import (
    Decision,
    Message,
    Part,
    ThinkingBlock,
    ToolCall,
    Usage,
    dump_messages,
    load_messages,
    validate_history,
)
from golem.policies import ApprovalPolicy, Ask, Rule, Verdict
from golem.results import Result
from golem.retry import Retry
from golem.tools import RunContext, Tool
from golem.usage import UsageLimits
