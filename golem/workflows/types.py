"""The payloads that cross Temporal boundaries: workflow and activity inputs and outputs.

Kept small on purpose: a model-request activity carries a turn number and a message
count, never the conversation, so history bytes grow with new content only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from golem.loop import RunInput, RunState
from golem.messages import Message, ToolCall, Usage
from golem.results import PartialResult, Result, Stage

__all__ = [
    "AgentRunInput",
    "AgentRunOutput",
    "FailureDetails",
    "MessagesPage",
    "MessagesQuery",
    "ModelCallInput",
    "PrepareInput",
    "RunSnapshot",
    "ToolCallInput",
]


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True)


class AgentRunInput(_Payload):
    """Input of ``AgentRunWorkflow``."""

    agent: str
    run: RunInput
    parent_run_id: str = ""


class RunSnapshot(_Payload):
    """A run's conversation as ``base + added``: ``base`` is ``None`` when it is exactly the
    history the run was given, so a clean continuation does not send the history back."""

    base: list[Message] | None = None
    added: list[Message] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    requests: int = 0
    tool_calls: int = 0
    run_id: str = ""
    conversation_id: str = ""

    def messages(self, history: list[Message]) -> list[Message]:
        return [*(history if self.base is None else self.base), *self.added]

    def to_partial(self, history: list[Message]) -> PartialResult:
        return PartialResult(
            messages=self.messages(history),
            usage=self.usage,
            requests=self.requests,
            tool_calls=self.tool_calls,
            run_id=self.run_id,
            conversation_id=self.conversation_id,
        )

    @classmethod
    def of(cls, messages: list[Message], history: list[Message], state: RunState) -> RunSnapshot:
        """Split ``messages`` where the run's own stamps begin."""
        run_id = state.run_id
        cut = next((i for i, m in enumerate(messages) if m.run_id == run_id), len(messages))
        base = messages[:cut]
        same = len(base) == len(history) and all(
            a is b or a == b for a, b in zip(base, history, strict=True)
        )
        return cls(
            base=None if same else base,
            added=messages[cut:],
            usage=state.usage,
            requests=state.requests,
            tool_calls=state.tool_calls,
            run_id=run_id,
            conversation_id=state.conversation_id,
        )


class AgentRunOutput(_Payload):
    """Result of ``AgentRunWorkflow``."""

    output: Any = None
    snapshot: RunSnapshot
    pending_approvals: list[ToolCall] = Field(default_factory=list)

    def to_result(self, history: list[Message], output: Any) -> Result[Any]:
        s = self.snapshot
        return Result(
            output=output,
            messages=s.messages(history),
            usage=s.usage,
            run_id=s.run_id,
            conversation_id=s.conversation_id,
            requests=s.requests,
            tool_calls=s.tool_calls,
            pending_approvals=list(self.pending_approvals),
        )


class FailureDetails(_Payload):
    """Details of a failed run's ``ApplicationError``: the client rebuilds ``RunError`` from it."""

    stage: Stage
    message: str
    partial: RunSnapshot | None = None


class ModelCallInput(_Payload):
    """Input of the model-request activity: which messages the request is, and at most the
    small new ones; everything else is read through the ``golem.messages`` query."""

    agent: str
    turn: int
    upto: int
    """The request is the first ``upto`` messages of the workflow's request list."""
    since: int = 0
    """Where ``messages`` starts."""
    messages: list[Message] = Field(default_factory=list)
    """``[since, upto)`` when small enough to send; empty otherwise."""


class MessagesQuery(_Payload):
    since: int = 0
    upto: int = 0


class MessagesPage(_Payload):
    messages: list[Message]
    next: int
    """Where the next page starts (``== upto`` when done)."""


class ToolCallInput(_Payload):
    agent: str
    call: ToolCall
    deps: Any = None
    run_id: str
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
