"""Strict JSON on the wire: what no provider accepts is never sent, and never read."""

from __future__ import annotations

import math
from typing import Any

import pytest
from provider_fakes import Answer, FakeProvider

from golem.messages import Message, ToolCall
from golem.models import (
    AnthropicModel,
    GeminiModel,
    ModelError,
    ModelRequest,
    ModelResponseError,
    ModelSettings,
    OpenAIChatModel,
)

Adapter = OpenAIChatModel | AnthropicModel | GeminiModel
TEXT_ANSWER = {
    "openai": "openai-chat-01-text",
    "anthropic": "anthropic-01-text",
    "gemini": "gemini-01-text",
}


@pytest.fixture(params=sorted(TEXT_ANSWER))
def adapter(request: pytest.FixtureRequest) -> tuple[str, FakeProvider, Adapter]:
    fake: FakeProvider = request.getfixturevalue(f"{request.param}_fake")
    model: Adapter = request.getfixturevalue(f"{request.param}_model")
    return request.param, fake, model


def sent_arguments(provider: str, body: dict[str, Any]) -> Any:
    """Where each provider's body carries the first call's arguments of the second message."""
    if provider == "openai":
        return body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    if provider == "anthropic":
        return body["messages"][1]["content"][0]["input"]
    return body["contents"][1]["parts"][0]["functionCall"]["args"]


@pytest.mark.parametrize("args", ['{"a": NaN}', '{"b": Infinity}', '{"c": [-Infinity]}'])
async def test_non_json_numbers_in_arguments_are_sent_as_truncated_args(
    adapter: tuple[str, FakeProvider, Adapter], args: str
) -> None:
    provider, fake, model = adapter
    history = [
        Message.user("Call f."),
        Message.assistant(tool_calls=[ToolCall(id="call_1", name="f", args=args)]),
        Message.tool("call_1", "f", "could not parse arguments", failed=True),
    ]
    fake.answer(TEXT_ANSWER[provider])
    await model.request(ModelRequest(messages=history))
    assert fake.rejected == []
    sent = sent_arguments(provider, fake.bodies[-1])
    if provider == "openai":
        # Chat Completions carries arguments as text: compact JSON of the shaped object
        expected: Any = '{"truncated_args":"' + args.replace('"', '\\"') + '"}'
    else:
        expected = {"truncated_args": args}
    assert sent == expected


@pytest.mark.parametrize(
    ("settings", "path", "value"),
    [
        (ModelSettings(temperature=math.nan), "body.temperature", "nan"),
        (ModelSettings(extra_body={"metadata": {"score": math.inf}}), "body.metadata.score", "inf"),
    ],
    ids=["nan-temperature", "infinite-extra-body"],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_body_with_nan_is_refused_before_sending_and_names_the_culprit(
    adapter: tuple[str, FakeProvider, Adapter],
    settings: ModelSettings,
    path: str,
    value: str,
    stream: bool,
) -> None:
    provider, fake, model = adapter
    request = ModelRequest(messages=[Message.user("hi")], settings=settings)
    if provider == "gemini" and path == "body.temperature":
        path = "body.generationConfig.temperature"  # Gemini nests its sampling settings
    with pytest.raises(ModelError) as caught:
        if stream:
            [item async for item in model.request_stream(request)]
        else:
            await model.request(request)
    assert type(caught.value) is ModelError and not caught.value.retryable
    assert str(caught.value) == (
        f"{provider}: request body is not JSON: {path} is {value}; NaN, infinities and "
        "non-JSON values cannot be sent"
    )
    assert fake.bodies == [] and fake.rejected == []


async def test_an_answer_with_a_bare_nan_is_not_json(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    body = (
        b'{"model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "stop", '
        b'"message": {"role": "assistant", "content": "hi"}}], "score": NaN}'
    )
    openai_fake.answer(Answer(200, body))
    with pytest.raises(ModelResponseError) as caught:
        await openai_model.request(ModelRequest(messages=[Message.user("hi")]))
    assert caught.value.retryable
    assert caught.value.message.startswith("response body is not JSON")


async def test_the_strict_fake_rejects_a_bare_nan_with_the_providers_error(
    anthropic_fake: FakeProvider,
) -> None:
    """The fakes are as strict as the providers: a lenient fake would hide NaN bodies."""
    from werkzeug.test import EnvironBuilder

    request = EnvironBuilder(
        path="/v1/messages", method="POST", data=b'{"max_tokens": NaN}'
    ).get_request()
    response = anthropic_fake.handle(request)
    assert response.status_code == 400
    assert response.get_json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "invalid JSON in request body: NaN is not a JSON value",
        },
    }
    assert anthropic_fake.rejected == [b'{"max_tokens": NaN}'] and anthropic_fake.bodies == []
