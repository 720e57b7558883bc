"""Provider behaviours a planted bug once slipped past (issue 20, "Pin first"): Gemini call
ids across turns, Anthropic streamed arguments, and a secret of the minimum length."""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_fakes import Answer, FakeProvider
from pytest_httpserver import HTTPServer

from golem import Agent
from golem.messages import Message
from golem.models import (
    AnthropicModel,
    GeminiModel,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    OpenAIChatModel,
)

LOOKUP = {"functionCall": {"name": "lookup", "args": {"key": "same"}}}


def gemini_answer(*parts: dict[str, Any]) -> Answer:
    """A generateContent answer without ``responseId`` (some proxies and older models)."""
    content = {"role": "model", "parts": list(parts)}
    return Answer.json(
        200,
        {
            "candidates": [{"content": content, "finishReason": "STOP", "index": 0}],
            "modelVersion": "gemini-2.5-flash",
        },
    )


async def test_gemini_gives_the_same_call_in_two_turns_two_ids_and_the_run_pairs_each(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer(gemini_answer(LOOKUP), gemini_answer(LOOKUP), gemini_answer({"text": "ok"}))
    agent: Agent[None, str] = Agent(gemini_model, name="gemini-twice")
    results: list[str] = []

    @agent.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        results.append(key)
        return f"value {len(results)}"

    result = await agent.run("look it up twice")

    calls = [c for m in result.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["lookup", "lookup"]
    assert calls[0].id != calls[1].id  # identical calls, different turns: distinct ids
    answered = {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}
    assert answered == {calls[0].id: "value 1", calls[1].id: "value 2"}
    assert result.output == "ok"


async def test_anthropic_streamed_arguments_with_whitespace_equal_the_whole_answer(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    use = {"type": "tool_use", "id": "toolu_01", "name": "get_weather"}
    whole = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-0",
        "content": [{**use, "input": {"city": "Paris", "days": [1, 2]}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    spaced = '{ "city" :  "Paris",\n  "days" : [ 1,2 ] }'  # as a model may stream it
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**whole, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {**use, "input": {}}},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            for piece in (spaced[:7], spaced[7:])
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    anthropic_fake.answer(
        Answer.json(200, whole), Answer(200, stream.encode(), "text/event-stream")
    )
    request = ModelRequest(messages=[Message.user("weather?")])

    plain = await anthropic_model.request(request)
    items = [item async for item in anthropic_model.request_stream(request)]

    streamed = items[-1]
    assert isinstance(streamed, ModelResponse)
    assert streamed.message.tool_calls == plain.message.tool_calls
    assert json.loads(streamed.message.tool_calls[0].args) == {"city": "Paris", "days": [1, 2]}


@pytest.mark.parametrize(("key", "redacted"), [("k-8chars", True), ("k-7char", False)])
async def test_a_secret_of_the_minimum_length_is_redacted_and_a_shorter_one_is_not(
    httpserver: HTTPServer, key: str, redacted: bool
) -> None:
    # 8 characters is the documented minimum (golem/models/_secrets.py); shorter values are
    # too likely to be ordinary words of the provider's message.
    echo = {"error": {"message": f"Incorrect API key provided: {key}.", "code": "bad_key"}}
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        echo, status=401
    )
    model = OpenAIChatModel("gpt-4o", base_url=httpserver.url_for("/v1"), api_key=key)
    try:
        with pytest.raises(ModelHTTPError) as caught:
            await model.request(ModelRequest(messages=[Message.user("hi")]))
    finally:
        await model.aclose()
    error = caught.value
    texts = [str(error), repr(error), error.message, error.body]
    assert all((key in text) is not redacted for text in texts), texts
    assert error.status == 401
