"""OpenAI Responses adapter against exchanges built from the API reference and a checking fake.

The fake (provider_fakes.check_openai_responses) refuses what the API refuses, with its own
error bodies: unknown parameters, a function_call_output without its call, a call without
its output, reasoning replayed under ``store: false`` without its encrypted content.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from provider_fakes import API_KEY, Answer, FakeProvider, completed_response, recording
from test_openai import DANGLING, ORPHAN

from golem import Agent, Retry
from golem.history import normalize_history
from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models import (
    FallbackModel,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OpenAIResponsesModel,
    ScriptedModel,
    StreamDelta,
    ToolDefinition,
    infer_model,
)
from golem.models.openai_responses import parse_response, response_items

P = "openai-responses"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
FILE_TOOLS = [
    ToolDefinition(name="create_file", parameters=PATH_SCHEMA),
    ToolDefinition(name="delete_file", parameters=PATH_SCHEMA),
]
SUMMARIES = {"reasoning": {"effort": "medium", "summary": "auto"}}


def output(name: str) -> list[dict[str, Any]]:
    """The output items of a recorded JSON answer, or of a streamed one's response.completed."""
    response = recording(name)["response"]
    if "body" in response:
        items: list[dict[str, Any]] = response["body"]["output"]
        return items
    completed: list[dict[str, Any]] = completed_response(name)["output"]
    return completed


def encrypted(name: str, index: int = 0) -> tuple[str, str]:
    """The id and encrypted content of the index-th reasoning item of a recording."""
    item = [i for i in output(name) if i["type"] == "reasoning"][index]
    return item["id"], item["encrypted_content"]


async def collect(
    model: OpenAIResponsesModel, request: ModelRequest
) -> list[StreamDelta | ModelResponse]:
    return [item async for item in model.request_stream(request)]


async def test_text_answer_with_instructions_is_parsed_exactly(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer("openai-responses-01-text")
    request = ModelRequest(
        messages=[
            Message.system("You are a helpful assistant."),
            Message.user("What is the capital of France?"),
        ]
    )
    response = await responses_model.request(request)
    item_id, blob = encrypted("openai-responses-01-text")
    assert response == ModelResponse(
        message=Message.assistant(
            "The capital of France is Paris.",
            thinking=[ThinkingBlock(redacted=blob, provider=P, id=item_id)],
        ),
        usage=Usage(input_tokens=24, output_tokens=80, reasoning_tokens=64),
        finish_reason="stop",
        model_name="gpt-5-2025-08-07",
    )
    # instructions, store false and the encrypted reasoning asked for, nothing else
    assert responses_fake.bodies[0] == recording("openai-responses-01-text")["request"]["body"]


async def test_parallel_calls_then_outputs_replay_the_reasoning_item_as_it_came(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer(
        "openai-responses-02-parallel-function-calls",
        "openai-responses-03-function-call-output-followup",
    )
    settings = ModelSettings(extra_body=SUMMARIES)
    history = [
        Message.system("Just call tools without asking for confirmation."),
        Message.user("Delete the file `.env` and create `test.txt`"),
    ]
    first = await responses_model.request(
        ModelRequest(messages=history, tools=FILE_TOOLS, settings=settings)
    )
    item_id, blob = encrypted("openai-responses-02-parallel-function-calls")
    assert first.message == Message.assistant(
        tool_calls=[
            ToolCall(
                id="call_Xq2bLd0CkqVb7l4JrNw8aHtP", name="delete_file", args='{"path":".env"}'
            ),
            ToolCall(
                id="call_Hn5sTg2MzPqR8vW1yKc4eJuA", name="create_file", args='{"path":"test.txt"}'
            ),
        ],
        thinking=[
            ThinkingBlock(
                text="**Planning the file changes**\n\nThe user wants two operations; I can do "
                "both at once.",
                provider=P,
                id=item_id,
            ),
            ThinkingBlock(
                text="**Calling both tools**\n\nDelete first, then create.", provider=P, id=item_id
            ),
            ThinkingBlock(redacted=blob, provider=P, id=item_id),
        ],
    )
    assert (first.finish_reason, first.usage) == (
        "tool_calls",
        Usage(input_tokens=118, output_tokens=245, reasoning_tokens=192),
    )
    assert (
        responses_fake.bodies[0]
        == recording("openai-responses-02-parallel-function-calls")["request"]["body"]
    )
    calls = first.message.tool_calls
    history += [
        first.message,
        Message.tool(calls[0].id, "delete_file", "true"),
        Message.tool(calls[1].id, "create_file", "Success"),
    ]
    second = await responses_model.request(
        ModelRequest(messages=history, tools=FILE_TOOLS, settings=settings)
    )
    assert second.message.content == (
        "The file `.env` has been deleted and `test.txt` has been created."
    )
    assert second.usage == Usage(
        input_tokens=402, output_tokens=58, cached_tokens=256, reasoning_tokens=32
    )
    recorded = recording("openai-responses-03-function-call-output-followup")["request"]["body"]
    assert responses_fake.bodies[1]["input"] == recorded["input"]


async def test_stream_function_call_yields_summary_and_argument_pieces_then_the_response(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer("openai-responses-04-stream-function-call")
    request = ModelRequest(
        messages=[Message.user("What's the weather in Paris?")],
        tools=[WEATHER],
        settings=ModelSettings(extra_body=SUMMARIES),
    )
    items = await collect(responses_model, request)
    call_id = "call_ZR5UUuTt3pf61kjwAJIYdVMj"
    assert items[:-1] == [
        StreamDelta(kind="thinking", text="**Looking up the weather**"),
        StreamDelta(kind="thinking", text="\n\nI should call the tool for Paris."),
        StreamDelta(kind="tool_call", index=0, call_id=call_id, name="get_weather"),
        *(
            StreamDelta(kind="tool_call", index=0, text=piece)
            for piece in ['{"', "city", '":"', "Paris", '"}']
        ),
    ]
    item_id, blob = encrypted("openai-responses-04-stream-function-call")
    assert items[-1] == ModelResponse(
        message=Message.assistant(
            tool_calls=[ToolCall(id=call_id, name="get_weather", args='{"city":"Paris"}')],
            thinking=[
                ThinkingBlock(
                    text="**Looking up the weather**\n\nI should call the tool for Paris.",
                    provider=P,
                    id=item_id,
                ),
                ThinkingBlock(redacted=blob, provider=P, id=item_id),
            ],
        ),
        usage=Usage(input_tokens=81, output_tokens=150, reasoning_tokens=128),
        finish_reason="tool_calls",
        model_name="gpt-5-2025-08-07",
    )
    recorded = recording("openai-responses-04-stream-function-call")["request"]["body"]
    assert responses_fake.bodies[0] == recorded


async def test_stream_text_after_a_function_call_output(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer("openai-responses-05-stream-text-after-function-call-output")
    call_id = "call_ZR5UUuTt3pf61kjwAJIYdVMj"
    item_id, blob = encrypted("openai-responses-04-stream-function-call")
    summary = "**Looking up the weather**\n\nI should call the tool for Paris."
    history = [
        Message.user("What's the weather in Paris?"),
        Message.assistant(
            tool_calls=[ToolCall(id=call_id, name="get_weather", args='{"city":"Paris"}')],
            thinking=[
                ThinkingBlock(text=summary, provider=P, id=item_id),
                ThinkingBlock(redacted=blob, provider=P, id=item_id),
            ],
        ),
        Message.tool(call_id, "get_weather", "sunny, 22°C"),
    ]
    items = await collect(responses_model, ModelRequest(messages=history, tools=[WEATHER]))
    pieces = ["The", " weather", " in", " Paris", " is", " sunny", ",", " 22", "°C", "."]
    assert items[:-1] == [StreamDelta(kind="text", text=p) for p in pieces]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert (final.message.content, final.finish_reason, final.usage) == (
        "The weather in Paris is sunny, 22°C.",
        "stop",
        Usage(input_tokens=236, output_tokens=30, reasoning_tokens=16),
    )
    recorded = recording("openai-responses-05-stream-text-after-function-call-output")
    assert responses_fake.bodies[0] == recorded["request"]["body"]


async def test_streamed_and_whole_answers_are_equal(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    completed = completed_response("openai-responses-04-stream-function-call")
    responses_fake.answer(Answer.json(200, completed), "openai-responses-04-stream-function-call")
    request = ModelRequest(messages=[Message.user("What's the weather in Paris?")], tools=[WEATHER])
    whole = await responses_model.request(request)
    streamed = (await collect(responses_model, request))[-1]
    assert streamed == whole
    assert responses_fake.bodies[0]["stream"] is False and responses_fake.bodies[1]["stream"]


async def test_structured_output_goes_as_text_format_and_comes_back_as_json_text(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer("openai-responses-06-structured-output")
    recorded = recording("openai-responses-06-structured-output")["request"]["body"]
    schema = recorded["text"]["format"]["schema"]
    request = ModelRequest(
        messages=[Message.user("Which is the largest city in France?")], output_schema=schema
    )
    response = await responses_model.request(request)
    assert json.loads(response.message.content) == {"city": "Paris", "country": "France"}
    assert responses_fake.bodies[0] == recorded


async def test_an_answer_cut_by_max_output_tokens_finishes_with_length(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer("openai-responses-07-incomplete-max-output-tokens")
    request = ModelRequest(
        messages=[Message.user("Write a long essay about Paris.")],
        settings=ModelSettings(max_tokens=16),
    )
    response = await responses_model.request(request)
    item_id, blob = encrypted("openai-responses-07-incomplete-max-output-tokens")
    assert response.message == Message.assistant(
        thinking=[ThinkingBlock(redacted=blob, provider=P, id=item_id)]
    )
    assert (response.finish_reason, response.usage.reasoning_tokens) == ("length", 16)
    recorded = recording("openai-responses-07-incomplete-max-output-tokens")["request"]["body"]
    assert responses_fake.bodies[0] == recorded


def test_refusals_and_content_filter_stops_are_read() -> None:
    refused = {
        "status": "completed",
        "model": "gpt-5",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}],
            }
        ],
    }
    response = parse_response(refused)
    assert (response.message, response.finish_reason) == (
        Message.assistant("I can't help with that."),
        "content_filter",
    )
    filtered = {
        **refused,
        "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"},
    }
    assert parse_response(filtered).finish_reason == "content_filter"


def test_the_string_form_names_the_responses_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = infer_model("openai-responses:gpt-5")
    assert isinstance(model, OpenAIResponsesModel)
    assert (model.model_name, model.base_url) == ("gpt-5", "https://api.openai.com/v1")
    agent: Agent[None, str] = Agent("openai-responses:gpt-5-mini", name="by-name")
    assert isinstance(agent.model, OpenAIResponsesModel) and agent.model_name == "gpt-5-mini"
    with pytest.raises(ValueError) as caught:
        infer_model("openai-response:gpt-5")
    assert str(caught.value) == (
        "unknown model 'openai-response:gpt-5': expected 'provider:name' with one of 'openai:', "
        "'openai-responses:', 'anthropic:', 'gemini:', 'google-gla:'"
    )


def test_request_body_carries_media_failures_tool_media_settings_and_merged_extras() -> None:
    model = OpenAIResponsesModel("gpt-5", api_key="sk-x")
    call = ToolCall(id="c1", name="render", args='{"x": 1')
    request = ModelRequest(
        messages=[
            Message.system("sys"),
            Message.user(
                "look",
                parts=[
                    Part(kind="image", url="https://example.com/a.png"),
                    Part(kind="image", data=b"\x89PNG", media_type="image/png"),
                    Part(kind="document", data=b"%PDF", media_type="application/pdf"),
                    Part(kind="document", url="https://example.com/a.pdf"),
                ],
            ),
            Message.assistant("let me draw", tool_calls=[call]),
            Message.tool(
                "c1", "render", "drawn", parts=[Part(kind="image", url="https://example.com/d.png")]
            ),
            Message.assistant(tool_calls=[ToolCall(id="c2", name="render", args="")]),
            Message.tool("c2", "render", "boom", failed=True),
        ],
        output_schema={"type": "object"},
        settings=ModelSettings(
            max_tokens=50,
            temperature=0.1,
            extra_body={
                "include": ["message.output_text.logprobs"],
                "text": {"verbosity": "low"},
                "seed_like": 7,
            },
        ),
    )
    body = model.build_body(request, stream=False)
    assert body["instructions"] == "sys"
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBORw==",
                    "detail": "auto",
                },
                {
                    "type": "input_file",
                    "filename": "document",
                    "file_data": "data:application/pdf;base64,JVBERg==",
                },
                {"type": "input_file", "file_url": "https://example.com/a.pdf"},
            ],
        },
        {"type": "message", "role": "assistant", "content": "let me draw"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "render",
            "arguments": '{"truncated_args":"{\\"x\\": 1"}',
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "drawn"},
                {"type": "input_image", "image_url": "https://example.com/d.png", "detail": "auto"},
            ],
        },
        {"type": "function_call", "call_id": "c2", "name": "render", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": '{"error": "boom"}'},
    ]
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "final_output", "schema": {"type": "object"}},
        "verbosity": "low",
    }
    assert body["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert (body["store"], body["max_output_tokens"], body["temperature"], body["seed_like"]) == (
        False,
        50,
        0.1,
        7,
    )


async def test_media_in_prompts_and_tool_results_is_accepted_and_chat_parts_are_refused(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    image = Part(kind="image", data=b"\x89PNG", media_type="image/png")
    pdf = Part(kind="document", data=b"%PDF", media_type="application/pdf")
    call = ToolCall(id="c1", name="render", args="{}")
    history = [
        Message.user("look", parts=[image, pdf]),
        Message.assistant(tool_calls=[call]),
        Message.tool("c1", "render", "drawn", parts=[image]),
    ]
    responses_fake.answer("openai-responses-01-text")
    response = await responses_model.request(ModelRequest(messages=history))
    assert response.message.content == "The capital of France is Paris."
    chat_style = {
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
    }
    async with httpx.AsyncClient() as client:
        refused = await client.post(
            f"{responses_model.base_url}/responses",
            json=chat_style,
            headers={"authorization": f"Bearer {API_KEY}"},
        )
    assert (refused.status_code, refused.json()["error"]["message"]) == (
        400,
        "Invalid value: 'image_url'. Supported values are: 'input_file', 'input_image', and "
        "'input_text'.",
    )


def test_audio_is_refused_before_sending_naming_the_part() -> None:
    model = OpenAIResponsesModel("gpt-5", api_key="sk-x")
    audio = Message.user("hear", parts=[Part(kind="audio", data=b"RIFF", media_type="audio/wav")])
    with pytest.raises(ModelError) as caught:
        model.build_body(ModelRequest(messages=[audio]))
    assert str(caught.value) == (
        "openai-responses: audio parts given as inline data are not supported in the Responses API"
    )


def test_only_this_adapters_reasoning_with_an_output_after_it_is_replayed() -> None:
    mine = ThinkingBlock(redacted="enc-1", provider=P, id="rs_1")
    history = [
        Message.user("hi"),
        # cut during reasoning: no output item would follow it, which the API refuses
        Message.assistant(thinking=[mine]),
        Message.assistant(
            "hello",
            thinking=[
                ThinkingBlock(text="from claude", signature="sig", provider="anthropic"),
                ThinkingBlock(text="no id", provider=P),
                ThinkingBlock(text="summary only", provider=P, id="rs_2"),
                ThinkingBlock(text="kept", provider=P, id="rs_3"),
                ThinkingBlock(redacted="enc-3", provider=P, id="rs_3"),
            ],
        ),
    ]
    assert response_items(history) == [
        {"type": "message", "role": "user", "content": "hi"},
        {
            "type": "reasoning",
            "id": "rs_3",
            "summary": [{"type": "summary_text", "text": "kept"}],
            "encrypted_content": "enc-3",
        },
        {"type": "message", "role": "assistant", "content": "hello"},
    ]
    # when OpenAI keeps the items (store true) a reasoning item is found by its id alone
    stored = response_items(history, stored=True)
    assert [i.get("id") for i in stored if i["type"] == "reasoning"] == ["rs_2", "rs_3"]


# --- what the API refuses ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "message"),
    [
        (DANGLING, "No tool output found for function call call_1."),
        (ORPHAN, "No tool call found for function call output with call_id call_9."),
    ],
    ids=["dangling-call", "orphan-output"],
)
async def test_broken_history_is_refused_and_the_normalized_one_accepted(
    responses_fake: FakeProvider,
    responses_model: OpenAIResponsesModel,
    history: list[Message],
    message: str,
) -> None:
    with pytest.raises(ModelHTTPError) as caught:
        await responses_model.request(ModelRequest(messages=history, tools=[WEATHER]))
    error = caught.value
    assert (error.status, error.message, error.retryable) == (400, message, False)
    assert json.loads(error.body) == {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
    responses_fake.answer("openai-responses-01-text")
    repaired, _ = normalize_history(history)
    response = await responses_model.request(ModelRequest(messages=repaired, tools=[WEATHER]))
    assert response.message.content == "The capital of France is Paris."


async def test_an_unknown_parameter_is_refused_with_the_recorded_error(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    settings = ModelSettings(extra_body={"max_completion_tokens": 50})
    request = ModelRequest(messages=[Message.user("hello")], settings=settings)
    with pytest.raises(ModelHTTPError) as caught:
        await responses_model.request(request)
    recorded = recording("openai-responses-08-error-400-unknown-parameter")["response"]
    assert json.loads(caught.value.body) == recorded["body"]
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert str(caught.value) == (
        "openai-responses: HTTP 400: Unknown parameter: 'max_completion_tokens'."
    )


async def test_reasoning_without_encrypted_content_is_refused_and_never_sent(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    bare = {"type": "reasoning", "id": "rs_1", "summary": []}
    raw = {
        "model": "gpt-5",
        "store": False,
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            bare,
            {"type": "message", "role": "assistant", "content": "hello"},
            {"type": "message", "role": "user", "content": "again"},
        ],
    }
    async with httpx.AsyncClient() as client:
        refused = await client.post(
            f"{responses_model.base_url}/responses",
            json=raw,
            headers={"authorization": f"Bearer {API_KEY}"},
        )
    assert refused.status_code == 404
    assert refused.json()["error"]["message"] == (
        "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input."
    )
    responses_fake.answer("openai-responses-01-text")
    history = [
        Message.user("hi"),
        Message.assistant("hello", thinking=[ThinkingBlock(text="thought", provider=P, id="rs_1")]),
        Message.user("again"),
    ]
    await responses_model.request(ModelRequest(messages=history))
    assert [i["type"] for i in responses_fake.bodies[-1]["input"]] == ["message"] * 3


# --- errors inside answers and streams ---------------------------------------------------------


def sse_events(name: str) -> list[str]:
    sse: str = recording(name)["response"]["sse"]
    return [e + "\n\n" for e in sse.split("\n\n") if e]


def event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


def stream_of(*events: str) -> Answer:
    return Answer(200, "".join(events).encode(), "text/event-stream")


async def test_a_stream_cut_mid_call_is_a_retryable_error_naming_the_call(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    responses_fake.answer(stream_of(*sse_events("openai-responses-04-stream-function-call")[:12]))
    request = ModelRequest(messages=[Message.user("What's the weather in Paris?")])
    with pytest.raises(ModelConnectionError) as caught:  # a FallbackModel moves on from it
        await collect(responses_model, request)
    assert caught.value.retryable
    assert str(caught.value) == (
        "openai-responses: stream ended before response.completed "
        "(in the middle of tool call 'get_weather')"
    )


@pytest.mark.parametrize(
    ("error", "status", "retryable"),
    [
        ({"code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-5."}, 429, True),
        ({"code": "server_error", "message": "The server had an error."}, 500, True),
        ({"code": "invalid_prompt", "message": "Invalid prompt: flagged."}, 400, False),
        ({"code": "invalid_value", "message": "Invalid 'input[2]'.", "param": "input"}, 400, False),
        (
            {
                "error": {
                    "type": "invalid_request_error",
                    "code": None,
                    "message": "Invalid 'input'.",
                    "param": None,
                }
            },
            400,
            False,
        ),
    ],
    ids=["rate-limit", "server-error", "invalid-prompt", "names-a-parameter", "nested-error"],
)
async def test_an_error_event_mid_stream_is_the_http_error_it_stands_for(
    responses_fake: FakeProvider,
    responses_model: OpenAIResponsesModel,
    error: dict[str, Any],
    status: int,
    retryable: bool,
) -> None:
    start = sse_events("openai-responses-05-stream-text-after-function-call-output")[:2]
    failure = event({"type": "error", "param": None, **error, "sequence_number": 2})
    responses_fake.answer(stream_of(*start, failure))
    with pytest.raises(ModelHTTPError) as caught:
        await collect(responses_model, ModelRequest(messages=[Message.user("hi")]))
    message = error.get("error", error)["message"]
    assert (caught.value.status, caught.value.message, caught.value.retryable) == (
        status,
        message,
        retryable,
    )


async def test_a_failed_response_raises_its_error_streamed_or_not(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    whole = recording("openai-responses-01-text")["response"]["body"]
    error = {"code": "server_error", "message": "An error occurred while processing your request."}
    failed = {**whole, "status": "failed", "output": [], "error": error}
    responses_fake.answer(
        Answer.json(200, failed),
        stream_of(event({"type": "response.failed", "response": failed, "sequence_number": 0})),
    )
    for stream in (False, True):
        with pytest.raises(ModelHTTPError) as caught:
            if stream:
                await collect(responses_model, ModelRequest(messages=[Message.user("hi")]))
            else:
                await responses_model.request(ModelRequest(messages=[Message.user("hi")]))
        assert (caught.value.status, caught.value.message, caught.value.retryable) == (
            500,
            "An error occurred while processing your request.",
            True,
        )


async def test_a_server_error_event_falls_over_to_the_next_model(
    responses_fake: FakeProvider, responses_model: OpenAIResponsesModel
) -> None:
    start = sse_events("openai-responses-05-stream-text-after-function-call-output")[:2]
    failure = event({"type": "error", "code": "server_error", "message": "down", "param": None})
    responses_fake.answer(stream_of(*start, failure))
    backup = ScriptedModel([Message.assistant("from the backup")], model_name="backup")
    agent: Agent[None, str] = Agent(
        FallbackModel(responses_model, backup, retry=Retry(max_attempts=1)), name="resilient"
    )
    stream = agent.run_stream("hi")
    async for _ in stream:
        pass
    assert (stream.result.output, stream.result.model) == ("from the backup", "backup")
    assert len(responses_fake.bodies) == 1
