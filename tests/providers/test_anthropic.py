"""Anthropic Messages adapter against recorded exchanges and a checking fake server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_fakes import Answer, FakeProvider, recording

from golem.history import normalize_history
from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models import (
    AnthropicModel,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)
from golem.models.anthropic import parse_message

WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "additionalProperties": False,
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "type": "object",
    },
)
COUNTRY = ToolDefinition(
    name="get_user_country",
    parameters={"additionalProperties": False, "properties": {}, "type": "object"},
)
PARIS = ToolCall(id="toolu_01WN4AuToBnJyXNQXwQBBebj", name="get_weather", args='{"city": "Paris"}')


def body_of(name: str) -> Any:
    return recording(name)["response"]["body"]


def sse(*events: dict[str, Any]) -> Answer:
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Answer(200, text.encode(), "text/event-stream; charset=utf-8")


async def collect(
    model: AnthropicModel, request: ModelRequest
) -> list[StreamDelta | ModelResponse]:
    return [item async for item in model.request_stream(request)]


def test_text_answer_is_parsed_exactly() -> None:
    assert parse_message(body_of("anthropic-01-text")) == ModelResponse(
        message=Message.assistant("Hello! \N{WAVING HAND SIGN} How can I help you today?"),
        usage=Usage(input_tokens=8, output_tokens=16),
        finish_reason="stop",
        model_name="claude-haiku-4-5-20251001",
    )


def test_parallel_calls_after_text_are_parsed_in_order() -> None:
    response = parse_message(body_of("anthropic-04-parallel-tool-calls"))
    assert response.message.content.startswith("I'll help you find out who is the youngest")
    assert response.message.tool_calls == [
        ToolCall(id=i, name="retrieve_entity_info", args=json.dumps({"name": n}))
        for i, n in [
            ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
            ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
            ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
            ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
        ]
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=423, output_tokens=202)


async def test_tool_call_then_result_matches_the_recorded_followup(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    anthropic_fake.answer("anthropic-02-tool-call", "anthropic-03-tool-result-followup")
    history = [Message.user("What's the weather in Paris?")]
    first = await anthropic_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    assert first == ModelResponse(
        message=Message.assistant(tool_calls=[PARIS]),
        usage=Usage(input_tokens=572, output_tokens=53),
        finish_reason="tool_calls",
        model_name="claude-sonnet-4-5-20250929",
    )
    history += [first.message, Message.tool(PARIS.id, "get_weather", "Sunny, 22C in Paris")]
    second = await anthropic_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    assert second.message.content.startswith("The weather in Paris is currently sunny")
    recorded = recording("anthropic-03-tool-result-followup")["request"]["body"]
    sent = anthropic_fake.bodies[1]
    assert sent["messages"] == recorded["messages"]
    assert sent["tools"] == recorded["tools"]
    assert sent["max_tokens"] == recorded["max_tokens"]


async def test_thinking_is_read_and_replayed_with_its_signature(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    anthropic_fake.answer(
        "anthropic-05-thinking-tool-call", "anthropic-06-thinking-tool-result-followup"
    )
    recorded = body_of("anthropic-05-thinking-tool-call")["content"]
    history = [Message.user("What is the largest city in the user country?")]
    thinking = {"type": "enabled", "budget_tokens": 3000}
    settings = ModelSettings(extra_body={"thinking": thinking})
    first = await anthropic_model.request(
        ModelRequest(messages=history, tools=[COUNTRY], settings=settings)
    )
    call = ToolCall(id="toolu_01YGzqpRE16Vricda3Aqcejo", name="get_user_country", args="{}")
    assert first.message == Message.assistant(
        recorded[1]["text"],
        tool_calls=[call],
        thinking=[
            ThinkingBlock(
                text=recorded[0]["thinking"],
                signature=recorded[0]["signature"],
                provider="anthropic",
            )
        ],
    )
    history += [first.message, Message.tool(call.id, "get_user_country", "Mexico")]
    second = await anthropic_model.request(
        ModelRequest(messages=history, tools=[COUNTRY], settings=settings)
    )
    assert second.message.content.startswith("Based on the information that you're from Mexico")
    expected = recording("anthropic-06-thinking-tool-result-followup")["request"]["body"]
    assert anthropic_fake.bodies[1]["messages"] == expected["messages"]
    assert anthropic_fake.bodies[1]["thinking"] == expected["thinking"]


async def test_stream_thinking_then_text(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    anthropic_fake.answer("anthropic-07-stream-thinking-text")
    items = await collect(
        anthropic_model, ModelRequest(messages=[Message.user("How do I cross the street?")])
    )
    final = items[-1]
    assert isinstance(final, ModelResponse)
    deltas = [i for i in items[:-1] if isinstance(i, StreamDelta)]
    thinking = "".join(d.text for d in deltas if d.kind == "thinking")
    text = "".join(d.text for d in deltas if d.kind == "text")
    # 14 thinking_delta events, one of them empty; 95 text_delta events
    assert [d.kind for d in deltas] == ["thinking"] * 13 + ["text"] * 95
    assert thinking == (
        "This is a straightforward question about pedestrian safety. I should provide clear, "
        "helpful advice about how to safely cross a street. This is basic safety information "
        "that could help prevent accidents."
    )
    assert final.message.content == text
    assert text.startswith("Here are the basic steps for safely crossing the street:\n\n**At")
    assert text.endswith("Always prioritize safety over speed when crossing streets.")
    assert final.message.thinking == [
        ThinkingBlock(
            text=thinking, signature=final.message.thinking[0].signature, provider="anthropic"
        )
    ]
    assert final.message.thinking[0].signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK")
    assert final.message.thinking[0].signature.endswith("XsYeb1vgb7wwzDvP/UhjfQYAQ==")
    assert final.usage == Usage(input_tokens=43, output_tokens=282)
    assert (final.finish_reason, final.model_name) == ("stop", "claude-sonnet-4-20250514")


async def test_streamed_tool_calls_equal_the_whole_answer(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    whole = body_of("anthropic-04-parallel-tool-calls")
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**whole, "content": [], "stop_reason": None}},
        {"type": "ping"},
    ]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": block["text"]},
                }
            )
        else:
            start = {**block, "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            args = json.dumps(block["input"])
            for piece in (args[:5], args[5:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 202},
        },
        {"type": "message_stop"},
    ]
    anthropic_fake.answer(sse(*events))
    items = await collect(anthropic_model, ModelRequest(messages=[Message.user("who?")]))
    # the recorded whole answer, read by hand (not by the adapter's own parser)
    assert items[-1] == ModelResponse(
        message=Message.assistant(
            "I'll help you find out who is the youngest by retrieving information about each "
            "family member. I'll retrieve their entity information to compare their ages.",
            tool_calls=[
                ToolCall(id=call_id, name="retrieve_entity_info", args=f'{{"name": "{name}"}}')
                for call_id, name in [
                    ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
                    ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
                    ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
                    ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
                ]
            ],
        ),
        usage=Usage(input_tokens=423, output_tokens=202),
        finish_reason="tool_calls",
        model_name="claude-haiku-4-5-20251001",
    )
    calls = [i for i in items if isinstance(i, StreamDelta) and i.kind == "tool_call"]
    assert calls[0] == StreamDelta(
        kind="tool_call",
        index=0,
        call_id="toolu_0167cfEnoQaPviGdVXA95zcu",
        name="retrieve_entity_info",
    )
    assert [c.index for c in calls] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]


async def test_max_tokens_mid_arguments_keeps_partial_args_and_cache_usage(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 90,
        "cache_creation_input_tokens": 5,
        "output_tokens": 1,
    }
    anthropic_fake.answer(
        sse(
            {"type": "message_start", "message": {"model": "claude-x", "usage": usage}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "EnCrYpTeD"},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "write",
                    "input": {},
                },
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"text": "once upon'},
            },
            {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens"},
                "usage": {"output_tokens": 64},
            },
            {"type": "message_stop"},
        )
    )
    items = await collect(anthropic_model, ModelRequest(messages=[Message.user("write")]))
    assert items[-1] == ModelResponse(
        message=Message.assistant(
            tool_calls=[ToolCall(id="toolu_1", name="write", args='{"text": "once upon')],
            thinking=[ThinkingBlock(redacted="EnCrYpTeD", provider="anthropic")],
        ),
        usage=Usage(input_tokens=105, output_tokens=64, cached_tokens=90, cache_write_tokens=5),
        finish_reason="length",
        model_name="claude-x",
    )


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
    ],
)
def test_stop_reasons_are_normalized(stop_reason: str, finish: str) -> None:
    body = {**body_of("anthropic-01-text"), "stop_reason": stop_reason}
    assert parse_message(body).finish_reason == finish


async def test_error_event_mid_stream_raises_the_provider_error(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    anthropic_fake.answer(
        sse(
            {"type": "message_start", "message": {"model": "claude-x", "usage": {}}},
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )
    )
    with pytest.raises(ModelHTTPError) as caught:
        await collect(anthropic_model, ModelRequest(messages=[Message.user("hi")]))
    assert (caught.value.status, caught.value.message, caught.value.retryable) == (
        529,
        "Overloaded",
        True,
    )


def test_request_body_merges_turns_and_filters_foreign_thinking() -> None:
    model = AnthropicModel("claude-x", api_key="k" * 10, max_tokens=1000)
    history = [
        Message.system("be brief"),
        Message.user(
            "see",
            parts=[
                Part(kind="image", url="https://example.com/a.png"),
                Part(kind="document", data=b"%PDF", media_type="application/pdf"),
            ],
        ),
        Message.assistant(
            "calling",
            tool_calls=[
                ToolCall(id="t1", name="f", args="[1]"),
                ToolCall(id="t2", name="f", args=""),
            ],
            thinking=[
                ThinkingBlock(text="mine", signature="sig", provider="anthropic"),
                ThinkingBlock(text="gemini's", signature="gsig", provider="gemini"),
                ThinkingBlock(redacted="opaque"),
            ],
        ),
        Message.tool("t1", "f", "bad", failed=True),
        Message.tool("t2", "f", "ok"),
        Message.user("and?"),
    ]
    body = model.build_body(ModelRequest(messages=history), stream=True)
    assert body["system"] == "be brief"
    assert body["max_tokens"] == 1000 and body["stream"] is True
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": "JVBERg==",
                    },
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "mine", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"truncated_args": "[1]"}},
                {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "bad", "is_error": True},
                {"type": "tool_result", "tool_use_id": "t2", "content": "ok", "is_error": False},
                {"type": "text", "text": "and?"},
            ],
        },
    ]


# --- structured output ------------------------------------------------------------------------

CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("stream", [False, True])
async def test_output_schema_is_sent_as_output_config_format(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel, stream: bool
) -> None:
    answer = '{"city": "Paris", "country": "France"}'
    if stream:
        anthropic_fake.answer(
            sse(
                {"type": "message_start", "message": {"model": "claude-x", "usage": {}}},
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": answer},
                },
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
                {"type": "message_stop"},
            )
        )
    else:
        whole = {**body_of("anthropic-01-text"), "content": [{"type": "text", "text": answer}]}
        anthropic_fake.answer(Answer.json(200, whole))
    request = ModelRequest(
        messages=[Message.user("Where is the Eiffel tower?")],
        output_schema=CITY_SCHEMA,
        settings=ModelSettings(extra_body={"output_config": {"effort": "low"}}),
    )
    if stream:
        final = (await collect(anthropic_model, request))[-1]
        assert isinstance(final, ModelResponse)
    else:
        final = await anthropic_model.request(request)
    assert final.message.content == answer and final.finish_reason == "stop"
    sent = anthropic_fake.bodies[-1]
    assert sent["output_config"] == {
        "format": {"type": "json_schema", "schema": CITY_SCHEMA},
        "effort": "low",
    }
    assert "output_format" not in sent and "tool_choice" not in sent


def test_no_output_schema_sends_no_output_config() -> None:
    body = AnthropicModel("claude-x", api_key="k").build_body(
        ModelRequest(messages=[Message.user("hi")])
    )
    assert "output_config" not in body


# --- broken histories end to end ----------------------------------------------------------------

DANGLING = [
    Message.user("What's the weather in Paris?"),
    Message.assistant(
        tool_calls=[ToolCall(id="toolu_1", name="get_weather", args='{"city": "Paris"}')]
    ),
    Message.user("Never mind, say hi."),
]
ORPHAN = [
    Message.user("What's the weather in Paris?"),
    Message.assistant("Let me think."),
    Message.tool("toolu_9", "get_weather", "Sunny"),
    Message.user("Say hi."),
]
TRUNCATED = [
    Message.user("What's the weather in Paris?"),
    Message.assistant(
        tool_calls=[ToolCall(id="toolu_1", name="get_weather", args='{"city": "Par')]
    ),
    Message.tool("toolu_1", "get_weather", "could not parse arguments", failed=True),
]


@pytest.mark.parametrize(
    ("history", "message"),
    [
        (
            DANGLING,
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
            "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the "
            "next message.",
        ),
        (
            ORPHAN,
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
            "toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the "
            "previous message.",
        ),
    ],
    ids=["dangling-call", "orphan-result"],
)
async def test_broken_history_is_rejected_and_normalized_history_accepted(
    anthropic_fake: FakeProvider,
    anthropic_model: AnthropicModel,
    history: list[Message],
    message: str,
) -> None:
    with pytest.raises(ModelHTTPError) as caught:
        await anthropic_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    assert (caught.value.status, caught.value.message, caught.value.retryable) == (
        400,
        message,
        False,
    )
    anthropic_fake.answer("anthropic-01-text")
    repaired, _ = normalize_history(history)
    response = await anthropic_model.request(ModelRequest(messages=repaired, tools=[WEATHER]))
    assert response.finish_reason == "stop"


async def test_recorded_pairing_error_body_is_mapped(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    recorded = recording("anthropic-08-error-400-tool-use-without-tool-result")["response"]
    anthropic_fake.answer("anthropic-08-error-400-tool-use-without-tool-result")
    with pytest.raises(ModelHTTPError) as caught:
        await anthropic_model.request(ModelRequest(messages=[Message.user("What day is today?")]))
    assert caught.value.status == 400 and not caught.value.retryable
    assert caught.value.message == recorded["body"]["error"]["message"]


async def test_truncated_arguments_are_shaped_and_accepted(
    anthropic_fake: FakeProvider, anthropic_model: AnthropicModel
) -> None:
    anthropic_fake.answer("anthropic-01-text")
    await anthropic_model.request(ModelRequest(messages=TRUNCATED, tools=[WEATHER]))
    sent = anthropic_fake.bodies[-1]["messages"][1]["content"][0]
    assert sent["input"] == {"truncated_args": '{"city": "Par'}
