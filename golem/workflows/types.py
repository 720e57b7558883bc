"""The inputs that cross Temporal boundaries: the workflow's, a tool call's, and the
once-per-run user functions'. A model call's input is message shipping's
(golem.workflows.shipping); a run's result and failure are golem.workflows.outcome's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from golem.loop import RunInput
from golem.messages import Message, ToolCall, Usage
from golem.workflows.shipping import HistoryBase

__all__ = ["AgentRunInput", "PrepareInput", "ToolCallInput"]


class _Payload(BaseModel):
    # camelCase in payloads, like the message contract; snake_case still accepted.
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class AgentRunInput(_Payload):
    """Input of ``AgentRunWorkflow``."""

    agent: str
    run: RunInput
    parent_run_id: str = ""
    stream: bool = False
    """The model activity publishes deltas to the run's stream (``run_stream``)."""
    notify_parent: bool = False
    """Signal the parent workflow (a conversation) when the run waits for approvals."""
    base: HistoryBase | None = None
    """The history by reference (``run.history`` is then empty): a conversation's turn.
    The loop sees only the run's own messages; the model sees ``base`` before them."""


class ToolCallInput(_Payload):
    agent: str
    call: ToolCall
    deps: Any = None
    run_id: str = ""
    """Empty when it is the calling workflow's id (every run but an inline one)."""
    conversation_id: str
    turn: int = 0
    usage: Usage = Field(default_factory=Usage)
    retries: dict[str, int] = Field(default_factory=dict)


class PrepareInput(_Payload):
    """Input of the activities that run a user's history processor or instructions function."""

    agent: str
    deps: Any = None
    run_id: str
    conversation_id: str
    history: list[Message] = Field(default_factory=list)
