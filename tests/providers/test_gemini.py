"""Gemini adapter against recorded exchanges and a checking fake server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_fakes import Answer, FakeProvider, recording

from golem.history import normalize_history
from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models import (
    GeminiModel,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    StreamDelta,
    ToolDefinition,
)
from golem.models.gemini import mint_call_id

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


def candidate_parts(name: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = recording(name)["response"]["body"]["candidates"][0]["content"][
        "parts"
    ]
    return parts


def camel(value: Any) -> Any:
    """Recorded requests mix snake_case (google-genai) and camelCase; the API accepts both."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            head, *rest = key.split("_")
            out[head + "".join(w.title() for w in rest)] = camel(item)
        return out
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def shape(value: Any) -> Any:
    """Keys and nesting kept, scalars replaced by their type name."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


async def collect(model: GeminiModel, request: ModelRequest) -> list[StreamDelta | ModelResponse]:
    return [item async for item in model.request_stream(request)]


async def test_text_answer_with_system_instruction(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-01-text")
    request = ModelRequest(messages=[Message.system("You are a chatbot."), Message.user("Hello!")])
    response = await gemini_model.request(request)
    assert response == ModelResponse(
        message=Message.assistant("Hello! How can I help you today?"),
        usage=Usage(input_tokens=9, output_tokens=43, reasoning_tokens=34),
        finish_reason="stop",
        model_name="gemini-2.5-flash",
    )
    recorded = recording("gemini-01-text")["request"]["body"]
    sent = gemini_fake.bodies[0]
    assert sent["contents"] == recorded["contents"]
    assert sent["systemInstruction"] == recorded["systemInstruction"]


async def test_function_call_gets_a_deterministic_id_and_its_signature(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-02-function-call", "gemini-02-function-call")
    request = ModelRequest(messages=[Message.user("What's the weather in Paris?")], tools=[WEATHER])
    first = await gemini_model.request(request)
    again = await gemini_model.request(request)
    part = candidate_parts("gemini-02-function-call")[0]
    call_id = mint_call_id("78F7aafeKcDVz7IPh4DK-AM", 1, 0, "get_weather", '{"city": "Paris"}')
    assert first == again
    assert first == ModelResponse(
        message=Message.assistant(
            tool_calls=[
                ToolCall(
                    id=call_id,
                    name="get_weather",
                    args='{"city": "Paris"}',
                    signature=part["thoughtSignature"],
                )
            ]
        ),
        usage=Usage(input_tokens=49, output_tokens=63, reasoning_tokens=48),
        finish_reason="tool_calls",
        model_name="gemini-2.5-flash",
    )
    assert call_id.startswith("gemini_") and len(call_id) == len("gemini_") + 16
    recorded_tools = recording("gemini-02-function-call")["request"]["body"]["tools"]
    assert gemini_fake.bodies[0]["tools"] == camel(recorded_tools)


async def test_function_response_followup_has_the_recorded_shape(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-02-function-call", "gemini-03-function-response-followup")
    history = [Message.user("What's the weather in Paris?")]
    first = await gemini_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    call = first.message.tool_calls[0]
    history += [first.message, Message.tool(call.id, "get_weather", "Sunny, 22C in Paris")]
    second = await gemini_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    assert second.message == Message.assistant(
        "The weather in Paris is sunny with a temperature of 22C."
    )
    recorded = recording("gemini-03-function-response-followup")["request"]["body"]["contents"]
    recorded[2]["parts"][0]["functionResponse"]["response"] = {"result": "Sunny, 22C in Paris"}
    sent = gemini_fake.bodies[1]["contents"]
    assert shape(sent) == shape(recorded)
    # the signature is replayed exactly as received (the recording shows the SDK's URL-safe form)
    assert sent[1]["parts"][0]["thoughtSignature"] == call.signature
    assert sent[1]["parts"][0]["functionCall"] == {
        "name": "get_weather",
        "args": {"city": "Paris"},
        "id": call.id,
    }
    assert sent[2]["parts"][0]["functionResponse"] == {
        "name": "get_weather",
        "response": {"result": "Sunny, 22C in Paris"},
        "id": call.id,
    }


async def test_parallel_calls_get_distinct_ids_and_replay_like_the_answer(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-04-parallel-function-calls")
    response = await gemini_model.request(ModelRequest(messages=[Message.user("")]))
    calls = response.message.tool_calls
    assert [c.name for c in calls] == ["generate_topic"] * 3
    assert [c.args for c in calls] == ["{}"] * 3
    assert len({c.id for c in calls}) == 3
    recorded = candidate_parts("gemini-04-parallel-function-calls")
    assert [c.signature for c in calls] == [recorded[0]["thoughtSignature"], "", ""]
    assert response.usage == Usage(input_tokens=83, output_tokens=220, reasoning_tokens=190)
    replayed = gemini_model.build_body(ModelRequest(messages=[response.message]))["contents"][0]
    for part, call in zip(replayed["parts"], calls, strict=True):
        assert part["functionCall"].pop("id") == call.id
    assert replayed == {"role": "model", "parts": recorded}


async def test_stream_with_crlf_events_equals_the_whole_answer(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-05-stream-function-call-thought-signature")
    request = ModelRequest(
        messages=[Message.user("What is the capital of the user country? Call the tool")]
    )
    items = await collect(gemini_model, request)
    final = items[-1]
    assert isinstance(final, ModelResponse)
    call = final.message.tool_calls[0]
    assert call.id == mint_call_id("QUVVadTSNJ6_qtsPvN7J8Q0", 1, 0, "get_country", "{}")
    assert call.signature.startswith("EpwICpkIAXLI2nxlU6gsWZaZHRYkX1orzuM8vSUFwaAt1JRxEC2hJzPAcAu3")
    assert items[:-1] == [
        StreamDelta(kind="tool_call", index=0, call_id=call.id, name="get_country", text="{}")
    ]
    assert final.finish_reason == "tool_calls"
    assert final.usage == Usage(input_tokens=29, output_tokens=212, reasoning_tokens=202)
    assert final.model_name == "gemini-3-pro-preview"
    assert (
        gemini_fake.bodies[0]["contents"]
        == recording("gemini-05-stream-function-call-thought-signature")["request"]["body"][
            "contents"
        ]
    )
    # the same chunks as one JSON answer give the same response
    sse = recording("gemini-05-stream-function-call-thought-signature")["response"]["sse"]
    chunks = [json.loads(e.removeprefix("data: ")) for e in sse.split("\r\n\r\n") if e]
    merged = chunks[-1] | {
        "candidates": [
            {
                **chunks[-1]["candidates"][0],
                "content": {
                    "role": "model",
                    "parts": chunks[0]["candidates"][0]["content"]["parts"]
                    + chunks[1]["candidates"][0]["content"]["parts"],
                },
            }
        ]
    }
    gemini_fake.answer(Answer.json(200, merged))
    assert await gemini_model.request(request) == final


async def test_thought_parts_become_thinking_and_are_replayed(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-06-thinking-thought-parts")
    response = await gemini_model.request(
        ModelRequest(messages=[Message.user("How do I cross the street?")])
    )
    thought, answer = candidate_parts("gemini-06-thinking-thought-parts")
    assert response.message == Message.assistant(
        answer["text"],
        thinking=[
            ThinkingBlock(text=thought["text"], provider="gemini"),
            ThinkingBlock(redacted=answer["thoughtSignature"], provider="gemini"),
        ],
    )
    assert response.usage == Usage(input_tokens=29, output_tokens=1737, reasoning_tokens=1001)
    replayed = gemini_model.build_body(ModelRequest(messages=[response.message]))["contents"]
    assert replayed == [{"role": "model", "parts": [thought, answer]}]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "other"),
    ],
)
async def test_finish_reasons_are_normalized(
    gemini_fake: FakeProvider, gemini_model: GeminiModel, reason: str, finish: str
) -> None:
    body = recording("gemini-01-text")["response"]["body"]
    body["candidates"][0]["finishReason"] = reason
    body["usageMetadata"]["cachedContentTokenCount"] = 4
    gemini_fake.answer(Answer.json(200, body))
    response = await gemini_model.request(ModelRequest(messages=[Message.user("hi")]))
    assert response.finish_reason == finish
    assert response.usage.cached_tokens == 4


def test_request_body_media_failures_and_foreign_thinking() -> None:
    model = GeminiModel("models/gemini-2.5-pro", api_key="k" * 10)
    history = [
        Message.user(
            "see",
            parts=[
                Part(kind="image", data=b"\x89PNG", media_type="image/png"),
                Part(kind="video", url="https://example.com/v.mp4", media_type="video/mp4"),
            ],
        ),
        Message.assistant(
            tool_calls=[ToolCall(id="c1", name="f", args='{"a": tru')],
            thinking=[ThinkingBlock(text="theirs", signature="s", provider="anthropic")],
        ),
        Message.tool("c1", "", "nope", failed=True),
    ]
    body = model.build_body(ModelRequest(messages=history))
    assert model.name == "gemini-2.5-pro"
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "see"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
                {"fileData": {"fileUri": "https://example.com/v.mp4", "mimeType": "video/mp4"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "f", "args": {"truncated_args": '{"a": tru'}, "id": "c1"}}
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "f", "response": {"error": "nope"}, "id": "c1"}}
            ],
        },
    ]


# --- broken histories end to end ----------------------------------------------------------------

CALL = ToolCall(id="c1", name="get_weather", args='{"city": "Paris"}')
DANGLING = [
    Message.user("What's the weather in Paris?"),
    Message.assistant(tool_calls=[CALL]),
    Message.user("Never mind."),
]
ORPHAN = [
    Message.user("What's the weather in Paris?"),
    Message.tool("c9", "get_weather", "Sunny"),
    Message.user("Hi."),
]


@pytest.mark.parametrize(
    ("history", "message"),
    [
        (
            DANGLING,
            "Please ensure that the number of function response parts is equal to the number of "
            "function call parts of the function call turn.",
        ),
        (
            ORPHAN,
            "Please ensure that function response turn comes immediately after a function "
            "call turn.",
        ),
    ],
    ids=["dangling-call", "orphan-result"],
)
async def test_broken_history_is_rejected_and_normalized_history_accepted(
    gemini_fake: FakeProvider, gemini_model: GeminiModel, history: list[Message], message: str
) -> None:
    with pytest.raises(ModelHTTPError) as caught:
        await gemini_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    assert (caught.value.status, caught.value.message, caught.value.retryable) == (
        400,
        message,
        False,
    )
    gemini_fake.answer("gemini-01-text")
    repaired, _ = normalize_history(history)
    response = await gemini_model.request(ModelRequest(messages=repaired, tools=[WEATHER]))
    assert response.message.content == "Hello! How can I help you today?"


async def test_truncated_arguments_are_shaped_and_accepted(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    history = [
        Message.user("What's the weather in Paris?"),
        Message.assistant(tool_calls=[ToolCall(id="c1", name="get_weather", args='"Paris"')]),
        Message.tool("c1", "get_weather", "bad arguments", failed=True),
    ]
    gemini_fake.answer("gemini-01-text")
    await gemini_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    sent = gemini_fake.bodies[-1]["contents"][1]["parts"][0]["functionCall"]["args"]
    assert sent == {"truncated_args": '"Paris"'}


@pytest.mark.parametrize("stream", [False, True])
async def test_an_empty_user_turn_is_kept_before_a_function_call_turn(
    gemini_fake: FakeProvider, gemini_model: GeminiModel, stream: bool
) -> None:
    """Gemini rejects a function-call turn that does not follow a user turn, and empty text."""
    history = [
        Message.system("You are a chatbot."),
        Message.user(""),
        Message.assistant(
            tool_calls=[ToolCall(id="c1", name="get_weather", args='{"city": "Paris"}')]
        ),
        Message.tool("c1", "get_weather", "Sunny"),
    ]
    request = ModelRequest(messages=history, tools=[WEATHER])
    if stream:
        gemini_fake.answer(
            Answer(
                200,
                b'data: {"candidates": [{"content": {"role": "model", "parts": '
                b'[{"text": "Sunny."}]}, "finishReason": "STOP"}]}\r\n\r\n',
                "text/event-stream",
            )
        )
        final = (await collect(gemini_model, request))[-1]
        assert isinstance(final, ModelResponse) and final.message.content == "Sunny."
    else:
        gemini_fake.answer("gemini-01-text")
        response = await gemini_model.request(request)
        assert response.message.content == "Hello! How can I help you today?"
    contents = gemini_fake.bodies[-1]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[0]["parts"] == [{"text": " "}]
    assert contents[1]["parts"] == [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}}
    ]


async def test_recorded_invalid_argument_error_is_mapped(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    gemini_fake.answer("gemini-07-error-400-invalid-argument")
    with pytest.raises(ModelHTTPError) as caught:
        await gemini_model.request(ModelRequest(messages=[Message.user("hi")]))
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert caught.value.message == (
        'Invalid JSON payload received. Unknown name "additionalProperties" at '
        "'tools.function_declarations[0].parameters': Cannot find field."
    )
