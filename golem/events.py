"""Run events: what ``agent.run_stream`` yields, each carrying the run and conversation ids.

A run's stream includes the events of the runs it delegates or hands off to, each with
its own ``run_id`` and ``agent``, so a UI can show nested progress."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from golem.messages import Message, ToolCall
from golem.models.base import ModelResponse, StreamDelta

EventKind = Literal[
    "model_start",
    "model_end",
    "text_delta",
    "thinking_delta",
    "tool_call_delta",
    "tool_start",
    "tool_end",
    "canceled",
    "turn_restarted",
]


@dataclass(frozen=True)
class RunEvent:
    """One thing that happened in a run. Only the fields of its ``kind`` are set."""

    kind: EventKind
    run_id: str
    conversation_id: str
    turn: int
    """The model turn it belongs to (1-based)."""
    delta: StreamDelta | None = None
    """For ``*_delta``: the piece that arrived."""
    call: ToolCall | None = None
    """For ``tool_start``/``tool_end``: the call."""
    message: Message | None = None
    """For ``tool_end``: the result; for ``model_end``: the assistant message."""
    response: ModelResponse | None = None
    """For ``model_end``: the whole response (usage, finish reason)."""
    reason: str = ""
    """For ``canceled``: why."""
    attempt: int = 0
    """For ``turn_restarted``: the new attempt on its model (2, 3, ...; 1 when a fallback
    switched models); drop the turn's earlier deltas (the model call was retried, e.g. on
    another worker, or the next model of a ``FallbackModel`` took over)."""
    model: str = ""
    """For ``turn_restarted``: the model the turn restarts on."""
    agent: str = ""
    """The agent whose run this is (a delegated or handed-to run's, for its events)."""
