"""What a run gives back: ``Result``, or a ``RunError`` carrying ``PartialResult``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from golem.messages import Message, ToolCall, Usage

__all__ = ["STAGES", "PartialResult", "Result", "RunError", "Stage"]

OutputT = TypeVar("OutputT")

#: Where a run can fail. ``history`` and ``instructions`` fail before any model call;
#: ``codec``: a durable run's payloads could not be decrypted (a key is missing or wrong).
Stage = Literal[
    "history", "instructions", "model", "tool", "canceled", "usage", "loop", "decode", "codec"
]
STAGES: tuple[Stage, ...] = (
    "history",
    "instructions",
    "model",
    "tool",
    "canceled",
    "usage",
    "loop",
    "decode",
    "codec",
)


@dataclass(frozen=True)
class Result(Generic[OutputT]):
    """A finished (or paused) run."""

    output: OutputT
    """The final answer (``None`` while approvals are pending)."""
    messages: list[Message]
    """The full normalized conversation: pass it back as ``history`` to chain runs."""
    usage: Usage
    run_id: str
    conversation_id: str
    requests: int = 0
    """Model requests made by this run."""
    tool_calls: int = 0
    """Tool executions made by this run."""
    pending_approvals: list[ToolCall] = field(default_factory=list)
    """Calls waiting for a person's decision; continue with ``run(history=..., approvals=...)``."""

    @property
    def paused(self) -> bool:
        return bool(self.pending_approvals)

    @property
    def model(self) -> str:
        """The model that gave this run's last answer (with a ``FallbackModel``, the one of
        its models that did); empty when this run made no model turn."""
        for message in reversed(self.messages):
            if message.role == "assistant" and message.run_id == self.run_id:
                return message.model
        return ""


@dataclass(frozen=True)
class PartialResult:
    """The evidence a failed run leaves: resume-ready history through its last completed step.

    A step is a model turn or a tool batch. A batch that failed is kept whole, every call
    answered: finished calls keep their results, the call whose tool raised gets a failed
    result naming the error, a call never started reads ``INTERRUPTED_RESULT`` and one that
    started but whose outcome was lost ``OUTCOME_UNKNOWN_RESULT``; so a resumed run needs no
    repair (docs/adr/0006-tool-batch-evidence.md). The one source the durable workflow's
    failure details are built from, too.
    """

    messages: list[Message]
    usage: Usage
    """Usage the completed model turns reported."""
    requests: int
    """Model request attempts, the failed one included."""
    tool_calls: int
    """Tool executions completed."""
    run_id: str
    conversation_id: str


class RunError(Exception):
    """A run failed at ``stage``; ``partial`` is ``None`` only when nothing was completed."""

    def __init__(self, stage: Stage, message: str, partial: PartialResult | None = None) -> None:
        self.stage: Stage = stage
        self.partial = partial
        self.detail = message
        super().__init__(f"run failed at stage {stage!r}: {message}")

    @property
    def run_id(self) -> str:
        return self.partial.run_id if self.partial else ""
