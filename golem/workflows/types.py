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
    "PAGE_BYTES",
    "AgentRunInput",
    "AgentRunOutput",
    "FailureDetails",
    "MessagesPage",
    "MessagesQuery",
    "ModelCallInput",
    "PrepareInput",
    "RunSnapshot",
    "ToolCallInput",
    "message_size",
]


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True)


class AgentRunInput(_Payload):
    """Input of ``AgentRunWorkflow``."""

    agent: str
    run: RunInput
    parent_run_id: str = ""
    stream: bool = False
    """The model activity publishes deltas to the run's stream (``run_stream``)."""


#: Most bytes of messages a run's result, failure or one query page carries inline
#: (Temporal rejects payloads and query results near 2 MB).
PAGE_BYTES = 1_000_000


def message_size(message: Message) -> int:
    """A quick upper estimate of a message's JSON size."""
    return (
        len(message.content)
        + sum(len(c.args) + len(c.name) + len(c.signature) for c in message.tool_calls)
        + sum(len(b.text) + len(b.signature) + len(b.redacted) for b in message.thinking)
        + sum(len(p.url) + len(p.data) * 4 // 3 for p in message.parts)
        + 200
    )


class RunSnapshot(_Payload):
    """A run's conversation as ``base + added``: ``base`` is ``None`` when it is exactly the
    history the run was given, so a clean continuation does not send the history back.
    A conversation too big for one payload is ``paged``: read it with ``golem.conversation``."""

    base: list[Message] | None = None
    added: list[Message] = Field(default_factory=list)
    paged: int = 0
    """When non-zero: the conversation has this many messages, none of them carried here."""
    usage: Usage = Field(default_factory=Usage)
    requests: int = 0
    tool_calls: int = 0
    run_id: str = ""
    conversation_id: str = ""

    def messages(self, history: list[Message]) -> list[Message]:
        """The conversation, when not ``paged``."""
        return [*(history if self.base is None else self.base), *self.added]

    def to_partial(self, messages: list[Message]) -> PartialResult:
        return PartialResult(
            messages=messages,
            usage=self.usage,
            requests=self.requests,
            tool_calls=self.tool_calls,
            run_id=self.run_id,
            conversation_id=self.conversation_id,
        )

    @classmethod
    def of(cls, messages: list[Message], history: list[Message], state: RunState) -> RunSnapshot:
        """Split ``messages`` where the run's own stamps begin (or page them when large)."""
        run_id = state.run_id
        if sum(message_size(m) for m in messages) > PAGE_BYTES:
            return cls(
                paged=len(messages),
                usage=state.usage,
                requests=state.requests,
                tool_calls=state.tool_calls,
                run_id=run_id,
                conversation_id=state.conversation_id,
            )
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

    def to_result(self, messages: list[Message], output: Any) -> Result[Any]:
        s = self.snapshot
        return Result(
            output=output,
            messages=messages,
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
    stream: bool = False
    """Stream the answer, publishing its deltas to the run's stream."""


class MessagesQuery(_Payload):
    since: int = 0
    upto: int = 0


class MessagesPage(_Payload):
    messages: list[Message]
    next: int
    """Where the next page starts (``== upto`` when done)."""

    @classmethod
    def of(cls, source: list[Message], query: MessagesQuery) -> MessagesPage:
        """``source[since:upto]`` cut to at most ``PAGE_BYTES`` (at least one message)."""
        upto = min(query.upto or len(source), len(source))
        page: list[Message] = []
        size = 0
        index = query.since
        while index < upto and (not page or size + message_size(source[index]) <= PAGE_BYTES):
            size += message_size(source[index])
            page.append(source[index])
            index += 1
        return cls(messages=page, next=index)


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
