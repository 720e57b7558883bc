"""Offline models: answer from a function or a script, and record what they were sent.

model = ScriptedModel([Message.assistant("hi")])
await Agent(model).run("hello")
model.requests[0].messages      # exactly what a provider would have received
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from golem.messages import Message, Usage
from golem.models.base import ModelRequest, ModelResponse, StreamDelta, ToolDefinition
from golem.user_functions import call_user_function

Answer = Message | ModelResponse
AnswerFn = Callable[[list[Message], list[ToolDefinition]], Answer | Awaitable[Answer]]
StreamFn = Callable[
    [list[Message], list[ToolDefinition]], AsyncIterator[StreamDelta | ModelResponse]
]


def estimate_usage(request: ModelRequest, message: Message) -> Usage:
    """A rough, deterministic usage figure (about 4 characters a token) for offline models."""
    sent = sum(len(m.content) + sum(len(c.args) for c in m.tool_calls) for m in request.messages)
    got = len(message.content) + sum(len(c.name) + len(c.args) for c in message.tool_calls)
    return Usage(input_tokens=sent // 4 + len(request.messages), output_tokens=got // 4 + 1)


def _as_response(answer: Answer, request: ModelRequest, name: str) -> ModelResponse:
    if isinstance(answer, ModelResponse):
        return answer
    if answer.role != "assistant":
        raise TypeError(f"{name}: a model answers with an assistant message, not {answer.role}")
    reason = "tool_calls" if answer.tool_calls else "stop"
    return ModelResponse(
        message=answer, usage=estimate_usage(request, answer), finish_reason=reason, model_name=name
    )


async def _stream_whole(response: ModelResponse) -> AsyncIterator[StreamDelta | ModelResponse]:
    """Stream a complete answer as the deltas a provider would send for it."""
    if response.message.content:
        yield StreamDelta(kind="text", text=response.message.content)
    for index, call in enumerate(response.message.tool_calls):
        yield StreamDelta(kind="tool_call", index=index, call_id=call.id, name=call.name)
        if call.args:
            yield StreamDelta(kind="tool_call", index=index, text=call.args)
    yield response


class FunctionModel:
    """A model whose answers come from ``fn(messages, tools)`` (sync, run in a thread, or
    async).

    ``stream_fn``, when given, serves ``request_stream``; otherwise the answer of
    ``fn`` is streamed as one text delta and one delta per tool call.
    """

    def __init__(
        self, fn: AnswerFn, stream_fn: StreamFn | None = None, *, model_name: str = "function"
    ) -> None:
        self.fn = fn
        self.stream_fn = stream_fn
        self._name = model_name
        self.requests: list[ModelRequest] = []

    @property
    def model_name(self) -> str:
        return self._name

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        # A sync fn runs in a thread: a slow one never blocks the event loop.
        answer = await call_user_function(
            self.fn, list(request.messages), list(request.tools), what=f"model {self._name}"
        )
        return _as_response(answer, request, self._name)

    async def request_stream(
        self, request: ModelRequest
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        if self.stream_fn is None:
            response = await self.request(request)
            async for item in _stream_whole(response):
                yield item
            return
        self.requests.append(request)
        async for item in self.stream_fn(list(request.messages), list(request.tools)):
            yield item


class ScriptedModel:
    """A model that gives its scripted answers in order and fails when they run out.

    An entry may be a ``Message``, a ``ModelResponse`` or an exception to raise.
    """

    def __init__(
        self, answers: Sequence[Answer | BaseException], *, model_name: str = "scripted"
    ) -> None:
        self.answers = list(answers)
        self._name = model_name
        self.requests: list[ModelRequest] = []

    @property
    def model_name(self) -> str:
        return self._name

    def _next(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) > len(self.answers):
            raise IndexError(
                f"{self._name}: script exhausted after {len(self.answers)} answers; "
                f"request {len(self.requests)} was: "
                + json.dumps(request.messages[-1].content[:80])
            )
        answer = self.answers[len(self.requests) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return _as_response(answer, request, self._name)

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self._next(request)

    async def request_stream(
        self, request: ModelRequest
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        async for item in _stream_whole(self._next(request)):
            yield item
