"""The model protocol: what the loop sends a model and what it gets back.

A model is anything with ``model_name``, ``async request(ModelRequest)`` and
``request_stream(ModelRequest)``. Adapters never retry: a failure raises a
:class:`ModelError` whose ``retryable`` and ``retry_after`` let the executor
decide (bounded backoff in process, the activity retry policy under Temporal).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Released import paths (0.2.0): the errors live in golem.errors.
from golem.errors import ModelConnectionError as ModelConnectionError
from golem.errors import ModelError as ModelError
from golem.errors import ModelHTTPError as ModelHTTPError
from golem.errors import ModelResponseError as ModelResponseError
from golem.messages import Message, Usage

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "other"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True)


class ToolDefinition(_Data):
    """A tool as a model sees it."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema of the arguments object."""


class ModelSettings(_Data):
    """Per-request generation settings; ``None`` leaves the provider's default."""

    max_tokens: int | None = None
    temperature: float | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific request fields merged into the request body as-is."""


class ModelRequest(_Data):
    """Everything a provider needs for one call.

    ``messages`` starts with the run's resolved instructions as a system message
    (when there are any); adapters move it to wherever their provider wants it.
    """

    messages: list[Message]
    tools: list[ToolDefinition] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    """JSON schema the final answer must satisfy, for providers with a native JSON mode."""
    settings: ModelSettings = Field(default_factory=ModelSettings)


class ModelResponse(_Data):
    """A model's complete answer."""

    # camelCase on the wire, like every payload in a durable run's history.
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    message: Message
    """The assistant message (text, tool calls, thinking)."""
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason = "stop"
    model_name: str = ""
    """The model that answered, as the provider named it."""


class StreamDelta(_Data):
    """A piece of an answer as it arrives."""

    kind: Literal["text", "thinking", "tool_call"]
    text: str = ""
    """Text or thinking piece; for ``tool_call``, a piece of the arguments."""
    index: int = 0
    """For ``tool_call``: position of the call in the answer, stable across its pieces."""
    call_id: str = ""
    """For ``tool_call``: the call id, on the first piece that knows it."""
    name: str = ""
    """For ``tool_call``: the tool name, on the first piece that knows it."""


@runtime_checkable
class Model(Protocol):
    """What the loop needs from a model."""

    @property
    def model_name(self) -> str: ...

    async def request(self, request: ModelRequest) -> ModelResponse: ...

    def request_stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        """Yield deltas as they arrive, then the complete :class:`ModelResponse` last."""
        ...
