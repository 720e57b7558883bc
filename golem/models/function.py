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


def estimate_usage(request: ModelRequest, message: Message, sent: SentChars | None = None) -> Usage:
    """A rough, deterministic usage figure (about 4 characters a token) for offline models.
    ``sent`` counts the request's characters (a model keeps one, so a run's growing requests
    are counted by what each adds)."""
    chars = (sent or SentChars())(request.messages)
    got = len(message.content) + sum(len(c.name) + len(c.args) for c in message.tool_calls)
    return Usage(input_tokens=chars // 4 + len(request.messages), output_tokens=got // 4 + 1)


def _sent_chars(message: Message) -> int:
    calls = message.tool_calls  # most messages have none: no generator to start
    return len(message.content) + (sum([len(c.args) for c in calls]) if calls else 0)


class SentChars:
    """The characters of a request's messages, counting again only what follows the last
    request's messages when they open this one (equal messages, in a run the very same
    objects). A run's requests grow by appending, so a run of n requests costs O(n), not
    O(n²)."""

    def __init__(self) -> None:
        self._rest: list[Message] = []
        self._chars = 0

    def __call__(self, messages: Sequence[Message]) -> int:
        # The first is counted every time: a run's instructions open each of its requests
        # as a new system message.
        head, rest = messages[:1], messages[1:]
        if not isinstance(rest, list):  # compared with a list below: a tuple never equals one
            rest = list(rest)
        known = self._rest
        # A list comparison in C: the same object is equal at once, without __eq__.
        if rest[: len(known)] == known:
            chars = self._chars + sum(map(_sent_chars, rest[len(known) :]))
        else:  # another run's request, or a history rewritten: count it whole
            chars = sum(map(_sent_chars, rest))
        self._rest, self._chars = rest, chars
        return chars + sum(map(_sent_chars, head))


def _as_response(
    answer: Answer, request: ModelRequest, name: str, sent: SentChars | None = None
) -> ModelResponse:
    if isinstance(answer, ModelResponse):
        return answer
    if answer.role != "assistant":
        raise TypeError(f"{name}: a model answers with an assistant message, not {answer.role}")
    reason = "tool_calls" if answer.tool_calls else "stop"
    usage = estimate_usage(request, answer, sent)
    if not answer.model:  # named here, as an executor's stamp would: one copy, not two
        answer = answer.replaced(model=name)
    return ModelResponse(message=answer, usage=usage, finish_reason=reason, model_name=name)


async def _stream_whole(response: ModelResponse) -> AsyncIterator[StreamDelta | ModelResponse]:
    """Stream a complete answer as the deltas a provider would send for it."""
    if response.message.content:
        yield StreamDelta(kind="text", text=response.message.content)
    for index, call in enumerate(response.message.tool_calls):
        yield StreamDelta(kind="tool_call", index=index, call_id=call.id, name=call.name)
        if call.args:
            yield StreamDelta(kind="tool_call", index=index, text=call.args)
    yield response


class _Offline:
    """What the offline models share: a name, the requests received, and what they sent."""

    def __init__(self, model_name: str) -> None:
        self._name = model_name
        self.requests: list[ModelRequest] = []
        self._sent = SentChars()

    @property
    def model_name(self) -> str:
        return self._name

    def _response(self, answer: Answer, request: ModelRequest) -> ModelResponse:
        return _as_response(answer, request, self._name, self._sent)


class FunctionModel(_Offline):
    """A model whose answers come from ``fn(messages, tools)`` (sync, run in a thread, or
    async); ``on_loop=True`` calls a sync ``fn`` on the event loop, for one that never
    blocks (``Tool.on_loop``).

    ``stream_fn``, when given, serves ``request_stream``; otherwise the answer of
    ``fn`` is streamed as one text delta and one delta per tool call.
    """

    def __init__(
        self,
        fn: AnswerFn,
        stream_fn: StreamFn | None = None,
        *,
        model_name: str = "function",
        on_loop: bool = False,
    ) -> None:
        super().__init__(model_name)
        self.fn = fn
        self.stream_fn = stream_fn
        self.on_loop = on_loop

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        # A sync fn runs in a thread (unless on_loop): a slow one never blocks the event loop.
        messages, tools = list(request.messages), list(request.tools)
        what = f"model {self._name}"
        answer = await call_user_function(self.fn, messages, tools, what=what, on_loop=self.on_loop)
        return self._response(answer, request)

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


class ScriptedModel(_Offline):
    """A model that gives its scripted answers in order and fails when they run out.

    An entry may be a ``Message``, a ``ModelResponse`` or an exception to raise.
    """

    def __init__(
        self, answers: Sequence[Answer | BaseException], *, model_name: str = "scripted"
    ) -> None:
        super().__init__(model_name)
        self.answers = list(answers)

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
        return self._response(answer, request)

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self._next(request)

    async def request_stream(
        self, request: ModelRequest
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        async for item in _stream_whole(self._next(request)):
            yield item
