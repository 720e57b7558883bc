"""OpenAI Chat Completions adapter against recorded exchanges and a checking fake server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_fakes import FakeProvider, recording

from golem.history import normalize_history
from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models import (
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OpenAIChatModel,
    StreamDelta,
    ToolDefinition,
)

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
PATH_SCHEMA = {
    "additionalProperties": False,
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "type": "object",
}
FILE_TOOLS = [
    ToolDefinition(name="create_file", parameters=PATH_SCHEMA),
    ToolDefinition(name="delete_file", parameters=PATH_SCHEMA),
]
CAPITAL = ToolDefinition(
    name="get_capital",
    parameters={
        "additionalProperties": False,
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
        "type": "object",
    },
)
FILE_CALLS = [
    ToolCall(id="call_jYdIdRZHxZTn5bWCq5jlMrJi", name="delete_file", args='{"path": ".env"}'),
    ToolCall(id="call_TmlTVWQbzrXCZ4jNsCVNbNqu", name="create_file", args='{"path": "test.txt"}'),
]
UK_CALL = ToolCall(id="call_ZR5UUuTt3pf61kjwAJIYdVMj", name="get_capital", args='{"country":"UK"}')


async def collect(
    model: OpenAIChatModel, request: ModelRequest
) -> list[StreamDelta | ModelResponse]:
    return [item async for item in model.request_stream(request)]


async def test_text_answer_is_parsed_exactly(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer("openai-chat-01-text")
    request = ModelRequest(
        messages=[
            Message.system("You are a helpful assistant."),
            Message.user("What is the capital of France?"),
        ]
    )
    response = await openai_model.request(request)
    assert response == ModelResponse(
        message=Message.assistant("The capital of France is Paris."),
        usage=Usage(input_tokens=24, output_tokens=8),
        finish_reason="stop",
        model_name="gpt-4o-2024-08-06",
    )
    sent = openai_fake.bodies[0]
    assert sent["messages"] == recording("openai-chat-01-text")["request"]["body"]["messages"]
    assert sent["model"] == "gpt-4o" and sent["stream"] is False


async def test_single_tool_call_keeps_arguments_verbatim(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer("openai-chat-02-tool-call")
    request = ModelRequest(messages=[Message.user("What's the weather in Paris?")], tools=[WEATHER])
    response = await openai_model.request(request)
    assert response.message == Message.assistant(
        tool_calls=[
            ToolCall(
                id="call_aDdJTteHrpMdhdkEkyxjxEHH", name="get_weather", args='{"city":"Paris"}'
            )
        ]
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=132, output_tokens=23)
    recorded_tool = recording("openai-chat-02-tool-call")["request"]["body"]["tools"][0]
    recorded_tool["function"].pop("strict")
    assert openai_fake.bodies[0]["tools"] == [recorded_tool]


async def test_parallel_calls_then_results_match_the_recorded_followup(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer("openai-chat-03-parallel-tool-calls", "openai-chat-04-tool-results-followup")
    history = [
        Message.system("Just call tools without asking for confirmation."),
        Message.user("Delete the file `.env` and create `test.txt`"),
    ]
    first = await openai_model.request(ModelRequest(messages=history, tools=FILE_TOOLS))
    assert first.message == Message.assistant(tool_calls=FILE_CALLS)
    assert first.usage == Usage(input_tokens=71, output_tokens=46)
    history += [
        first.message,
        Message.tool(FILE_CALLS[0].id, "delete_file", "true"),
        Message.tool(FILE_CALLS[1].id, "create_file", "Success"),
    ]
    second = await openai_model.request(ModelRequest(messages=history, tools=FILE_TOOLS))
    assert second.message == Message.assistant(
        "The file `.env` has been deleted and `test.txt` has been created successfully."
    )
    assert second.finish_reason == "stop"
    recorded = recording("openai-chat-04-tool-results-followup")["request"]["body"]
    assert openai_fake.bodies[1]["messages"] == recorded["messages"]


async def test_stream_tool_call_yields_pieces_then_the_same_response(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer("openai-chat-05-stream-tool-call")
    request = ModelRequest(
        messages=[Message.user("What is the capital of the UK? Use the tool, then answer.")],
        tools=[CAPITAL],
    )
    items = await collect(openai_model, request)
    assert items[:-1] == [
        StreamDelta(kind="tool_call", index=0, call_id=UK_CALL.id, name="get_capital"),
        *(
            StreamDelta(kind="tool_call", index=0, text=piece)
            for piece in ['{"', "country", '":"', "UK", '"}']
        ),
    ]
    assert items[-1] == ModelResponse(
        message=Message.assistant(tool_calls=[UK_CALL]),
        usage=Usage(input_tokens=53, output_tokens=15),
        finish_reason="tool_calls",
        model_name="gpt-4o-mini-2024-07-18",
    )
    sent = openai_fake.bodies[0]
    recorded = recording("openai-chat-05-stream-tool-call")["request"]["body"]
    assert sent["stream"] is True and sent["stream_options"] == recorded["stream_options"]
    assert sent["messages"] == recorded["messages"]


async def test_stream_text_after_tool_result(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer("openai-chat-06-stream-text-after-tool-result")
    history = [
        Message.user("What is the capital of the UK? Use the tool, then answer."),
        Message.assistant(tool_calls=[UK_CALL]),
        Message.tool(UK_CALL.id, "get_capital", "London"),
    ]
    items = await collect(openai_model, ModelRequest(messages=history, tools=[CAPITAL]))
    pieces = ["The", " capital", " of", " the", " UK", " is", " London", "."]
    assert items[:-1] == [StreamDelta(kind="text", text=p) for p in pieces]
    assert items[-1] == ModelResponse(
        message=Message.assistant("The capital of the UK is London."),
        usage=Usage(input_tokens=78, output_tokens=9),
        finish_reason="stop",
        model_name="gpt-4o-mini-2024-07-18",
    )
    recorded = recording("openai-chat-06-stream-text-after-tool-result")["request"]["body"]
    assert openai_fake.bodies[0]["messages"] == recorded["messages"]


async def test_streamed_and_whole_answers_are_equal(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    whole = recording("openai-chat-02-tool-call")["response"]["body"]
    chunks = [
        {"model": whole["model"], "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, **whole["choices"][0]["message"]["tool_calls"][0]}
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
        {"choices": [], "usage": whole["usage"]},
    ]
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    openai_fake.answer("openai-chat-02-tool-call")
    from provider_fakes import Answer

    openai_fake.answer(Answer(200, sse.encode(), "text/event-stream"))
    request = ModelRequest(messages=[Message.user("What's the weather in Paris?")], tools=[WEATHER])
    whole_response = await openai_model.request(request)
    streamed = (await collect(openai_model, request))[-1]
    assert streamed == whole_response


def test_request_body_carries_media_failures_settings_and_schema() -> None:
    model = OpenAIChatModel("gpt-4o", api_key="sk-x")
    call = ToolCall(id="c1", name="render", args='{"x": 1')
    request = ModelRequest(
        messages=[
            Message.system("sys"),
            Message.user(
                "look",
                parts=[
                    Part(kind="image", url="https://example.com/a.png"),
                    Part(kind="image", data=b"\x89PNG", media_type="image/png"),
                    Part(kind="audio", data=b"RIFF", media_type="audio/wav"),
                    Part(kind="document", data=b"%PDF", media_type="application/pdf"),
                ],
            ),
            Message.assistant(tool_calls=[call]),
            Message.tool("c1", "render", "boom", failed=True),
        ],
        output_schema={"type": "object"},
        settings=ModelSettings(max_tokens=50, temperature=0.1, extra_body={"seed": 7}),
    )
    body = model.build_body(request, stream=False)
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {
                    "type": "file",
                    "file": {
                        "file_data": "data:application/pdf;base64,JVBERg==",
                        "filename": "document",
                    },
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "render", "arguments": '{"truncated_args":"{\\"x\\": 1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"error": "boom"}'},
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_output", "schema": {"type": "object"}},
    }
    assert (body["max_completion_tokens"], body["temperature"], body["seed"]) == (50, 0.1, 7)


def test_refusal_reasoning_and_cached_usage_are_read() -> None:
    from golem.models.openai import parse_completion

    body: dict[str, Any] = {
        "model": "o3",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": "I can't help with that.",
                },
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 64},
            "completion_tokens_details": {"reasoning_tokens": 32},
        },
    }
    response = parse_completion(body)
    assert response.message == Message.assistant("I can't help with that.")
    assert response.finish_reason == "content_filter"
    assert response.usage == Usage(
        input_tokens=100, output_tokens=40, cached_tokens=64, reasoning_tokens=32
    )
    body["choices"][0]["message"] = {
        "role": "assistant",
        "content": "4",
        "reasoning_content": "2+2",
    }
    body["choices"][0]["finish_reason"] = "length"
    response = parse_completion(body)
    assert response.message == Message.assistant(
        "4", thinking=[ThinkingBlock(text="2+2", provider="openai")]
    )
    assert response.finish_reason == "length"


async def test_stream_finishing_with_length_keeps_partial_arguments(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    from provider_fakes import Answer

    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {"name": "f", "arguments": '{"a": "lo'},
                            }
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ]
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    openai_fake.answer(Answer(200, sse.encode(), "text/event-stream"))
    items = await collect(openai_model, ModelRequest(messages=[Message.user("go")]))
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.tool_calls == [ToolCall(id="c1", name="f", args='{"a": "lo')]
    assert final.finish_reason == "length"


# --- broken histories end to end ----------------------------------------------------------------

DANGLING = [
    Message.user("What's the weather in Paris?"),
    Message.assistant(
        tool_calls=[ToolCall(id="call_1", name="get_weather", args='{"city":"Paris"}')]
    ),
    Message.user("Never mind, say hi."),
]
ORPHAN = [
    Message.user("What's the weather in Paris?"),
    Message.tool("call_9", "get_weather", "Sunny"),
    Message.user("Say hi."),
]
TRUNCATED = [
    Message.user("What's the weather in Paris?"),
    Message.assistant(tool_calls=[ToolCall(id="call_1", name="get_weather", args='{"city": "Par')]),
    Message.tool("call_1", "get_weather", "could not parse arguments", failed=True),
]


@pytest.mark.parametrize(
    ("history", "message"),
    [
        (
            DANGLING,
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            "call_1",
        ),
        (
            ORPHAN,
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
        ),
    ],
    ids=["dangling-call", "orphan-result"],
)
async def test_broken_history_is_rejected_and_normalized_history_accepted(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel, history: list[Message], message: str
) -> None:
    with pytest.raises(ModelHTTPError) as caught:
        await openai_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    assert (caught.value.status, caught.value.message, caught.value.retryable) == (
        400,
        message,
        False,
    )
    openai_fake.answer("openai-chat-01-text")
    repaired, _ = normalize_history(history)
    response = await openai_model.request(ModelRequest(messages=repaired, tools=[WEATHER]))
    assert response.message.content == "The capital of France is Paris."


async def test_truncated_arguments_are_shaped_and_accepted(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    import httpx

    from golem.models.openai import chat_messages

    raw = chat_messages(TRUNCATED)
    raw[1]["tool_calls"][0]["function"]["arguments"] = '{"city": "Par'
    async with httpx.AsyncClient() as client:
        rejected = await client.post(
            f"{openai_model.base_url}/chat/completions",
            json={"model": "gpt-4o", "messages": raw},
            headers={"authorization": openai_fake_auth()},
        )
    assert rejected.status_code == 400
    assert rejected.json()["error"]["message"] == (
        "Invalid 'messages[1].tool_calls[0].function.arguments': expected a JSON object."
    )
    openai_fake.answer("openai-chat-01-text")
    _, report = normalize_history(TRUNCATED)
    assert report.truncated == ["call_1"]
    await openai_model.request(ModelRequest(messages=TRUNCATED, tools=[WEATHER]))
    sent = openai_fake.bodies[-1]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"truncated_args":"{\\"city\\": \\"Par"}'


def openai_fake_auth() -> str:
    from provider_fakes import API_KEY

    return f"Bearer {API_KEY}"
