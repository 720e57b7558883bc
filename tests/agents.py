"""Builders shared by the agent tests: scripted turns, calls and small recording tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from golem.agent import Agent
from golem.ids import minted
from golem.messages import Message, ToolCall, Usage
from golem.models.base import ModelResponse
from golem.models.function import ScriptedModel
from golem.retry import Retry

FAST_RETRY = Retry(max_attempts=3, initial_interval=0.001)


class Deps(BaseModel):
    """JSON-serializable deps, so the same tests can run through a durable executor."""

    name: str = "Ada"


def call(call_id: str, name: str, **args: Any) -> ToolCall:
    """A tool call with JSON-object arguments."""
    return ToolCall(id=call_id, name=name, args=json.dumps(args))


def ask(*calls: ToolCall) -> Message:
    """An assistant turn requesting ``calls``."""
    return Message.assistant(tool_calls=list(calls))


def reply(text: str, input_tokens: int = 10, output_tokens: int = 5) -> ModelResponse:
    """A final text answer with explicit usage."""
    return ModelResponse(
        message=Message.assistant(text),
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
    )


def scripted(
    answers: Sequence[Message | ModelResponse | BaseException], **agent_options: Any
) -> tuple[Agent[Any, Any], ScriptedModel]:
    """An agent answering from a script, retrying model errors fast."""
    model = ScriptedModel(answers)
    agent_options.setdefault("model_retry", FAST_RETRY)
    return Agent(model, **agent_options), model


def answered(message: Message, model: str = "scripted") -> Message:
    """An assistant message as a run records it: naming the model that answered."""
    return message.model_copy(update={"model": model})


def stamped(messages: Sequence[Message], run_id: str, conversation_id: str) -> list[Message]:
    return [m.stamped(run_id, conversation_id) for m in messages]


is_uuid7 = minted  # what golem mints: a canonical UUIDv7


#: What the model reads when it calls a tool the agent does not have (golem/phases/batch.py).
NO_SUCH_TOOL = (
    "unknown tool '{name}': this agent has no tool by that name (it is not, or no longer, "
    "available); the tools you may call are: {tools}"
)
