"""The durable message contract: the JSON round trip and the structural rules."""

from __future__ import annotations

import json

import pytest

from golem.messages import (
    HistoryError,
    Message,
    Part,
    ThinkingBlock,
    ToolCall,
    Usage,
    dump_messages,
    load_messages,
    validate_history,
)


def _conversation() -> list[Message]:
    return [
        Message.system("You are terse."),
        Message.user("Weather?", parts=[Part(kind="image", url="https://maps.example/p.png")]),
        Message.assistant(
            "",
            tool_calls=[ToolCall(id="c1", name="weather", args='{"city": "Paris"}')],
            thinking=[ThinkingBlock(text="check", signature="sig", provider="anthropic")],
        ),
        Message.tool(
            "c1",
            "weather",
            "sunny",
            parts=[Part(kind="image", data=b"\x89PNG", media_type="image/png")],
        ),
        Message.assistant("Sunny.").stamped("run-1", "conv-1"),
    ]


def test_round_trip_is_exact() -> None:
    history = _conversation()
    assert load_messages(dump_messages(history)) == history


def test_round_trip_reproduces_the_same_bytes() -> None:
    data = dump_messages(_conversation())
    assert dump_messages(load_messages(data)) == data


def test_json_names_are_camel_case() -> None:
    data = json.loads(dump_messages(_conversation()))
    assert set(data[3]) == {"role", "content", "parts", "toolCallId", "toolName"}
    assert set(data[4]) == {"role", "content", "runId", "conversationId"}
    assert data[3]["parts"][0]["mediaType"] == "image/png"
    assert set(data[2]) == {"role", "toolCalls", "thinking"}


def test_empty_fields_are_omitted() -> None:
    assert dump_messages([Message.user("hi"), Message.assistant()]) == (
        b'[{"role":"user","content":"hi"},{"role":"assistant"}]'
    )


def test_load_accepts_python_names_too() -> None:
    [message] = load_messages('[{"role": "tool", "tool_call_id": "c1", "tool_name": "t"}]')
    assert message == Message.tool("c1", "t", "")


def test_unknown_top_level_fields_are_kept() -> None:
    data = b'[{"role":"user","content":"hi","priority":3,"meta":{"a":[1,2]}}]'
    assert dump_messages(load_messages(data)) == data


def test_unknown_nested_fields_are_kept() -> None:
    data = (
        b'[{"role":"assistant","toolCalls":[{"id":"c1","name":"t","args":"{}","cost":{"usd":1}}],'
        b'"thinking":[{"text":"t","tier":"deep"}]},'
        b'{"role":"user","parts":[{"kind":"image","url":"https://a/b.png","alt":"map"}]}]'
    )
    assert dump_messages(load_messages(data)) == data


@pytest.mark.parametrize(
    "args",
    [
        '{"city": "Par',
        "not json at all",
        '{"b": 1,   "a": 2}',
        '{"city": "Zürich", "emoji": "🌧️"}',
        "[1, 2]",
        "",
    ],
)
def test_args_are_kept_byte_for_byte(args: str) -> None:
    history = [Message.assistant(tool_calls=[ToolCall(id="c1", name="t", args=args)])]
    [loaded] = load_messages(dump_messages(history))
    assert loaded.tool_calls[0].args == args


def test_inline_data_round_trips_through_base64() -> None:
    part = Part(kind="document", data=b"%PDF-1.7\x00\xff\xfb", media_type="application/pdf")
    data = dump_messages([Message.user("", parts=[part])])
    assert load_messages(data)[0].parts[0].data == b"%PDF-1.7\x00\xff\xfb"


def test_inline_data_loads_from_standard_base64() -> None:
    data = (
        b'[{"role":"user","parts":'
        b'[{"kind":"image","data":"JVBERi0xLjcA/+8=","mediaType":"image/png"}]}]'
    )
    assert load_messages(data)[0].parts[0].data == b"%PDF-1.7\x00\xff\xef"


def test_inline_data_is_standard_base64_in_json() -> None:
    part = Part(kind="document", data=b"%PDF-1.7\x00\xff", media_type="application/pdf")
    data = dump_messages([Message.user("", parts=[part])])
    # Standard alphabet with padding, as Go's encoding/json writes []byte.
    assert json.loads(data)[0]["parts"][0]["data"] == "JVBERi0xLjcA/w=="


def test_load_accepts_str() -> None:
    assert load_messages('[{"role": "user", "content": "hi"}]') == [Message.user("hi")]


def test_unreadable_json_raises_history_error_without_index() -> None:
    with pytest.raises(HistoryError) as info:
        load_messages(b"[{")
    assert info.value.index is None
    assert str(info.value).startswith("history: not a JSON list of messages")


def test_a_document_that_is_not_a_list_raises_history_error() -> None:
    with pytest.raises(HistoryError, match="not a JSON list of messages") as info:
        load_messages(b'{"role": "user"}')
    assert info.value.index is None


@pytest.mark.parametrize(
    ("data", "index", "problem"),
    [
        (b'[{"role":"user"},{"role":"wizard"}]', 1, "role: Input should be"),
        (
            b'[{"role":"user","parts":[{"kind":"image","url":"https://a","data":"aGk=",'
            b'"mediaType":"image/png"}]}]',
            0,
            "part 0: needs exactly one of url or data",
        ),
        (
            b'[{"role":"user","parts":[{"kind":"image"}]}]',
            0,
            "part 0: needs exactly one of url or data",
        ),
        (
            b'[{"role":"user"},{"role":"user"},{"role":"user","parts":[{"kind":"image","data":"aGk="}]}]',
            2,
            "part 0: inline data needs a media type",
        ),
        (
            b'[{"role":"user","parts":[{"kind":"hologram","url":"https://a"}]}]',
            0,
            "part 0: unknown kind 'hologram'",
        ),
        (
            b'[{"role":"user","thinking":[{"text":"x"}]}]',
            0,
            "thinking is only allowed on assistant messages, not on user",
        ),
        (
            b'[{"role":"assistant","thinking":[{"text":"x","redacted":"y"}]}]',
            0,
            "thinking 0: needs exactly one of text or redacted",
        ),
        (
            b'[{"role":"assistant","thinking":[{"redacted":"y","signature":"s"}]}]',
            0,
            "thinking 0: a signature is only allowed beside text",
        ),
        (
            b'[{"role":"user","toolCalls":[{"id":"c","name":"t"}]}]',
            0,
            "tool calls are only allowed on assistant messages, not on user",
        ),
        (
            b'[{"role":"assistant","parts":[{"kind":"image","url":"https://a"}]}]',
            0,
            "parts are only allowed on user and tool messages, not on assistant",
        ),
        (b'[{"role":"user"},{"role":"tool","failed":"maybe"}]', 1, "failed: Input should be"),
    ],
)
def test_malformed_history_raises_history_error_naming_the_message(
    data: bytes, index: int, problem: str
) -> None:
    with pytest.raises(HistoryError) as info:
        load_messages(data)
    assert info.value.index == index
    assert problem in info.value.problem
    assert str(info.value).startswith(f"message {index}: ")


@pytest.mark.parametrize(
    "message",
    [
        Message.user("", parts=[Part(kind=kind, url="https://a/b")])
        for kind in ("image", "document", "audio", "video")
    ]
    + [
        Message.tool("c1", "t", "", parts=[Part(kind="audio", data=b"x", media_type="audio/wav")]),
        Message.assistant(thinking=[ThinkingBlock(redacted="opaque")]),
        Message.assistant(thinking=[ThinkingBlock(text="why", signature="sig")]),
        Message.assistant(tool_calls=[ToolCall(id="c2", name="t", args="{")]),
    ],
)
def test_validate_history_accepts_each_rule_at_its_edge(message: Message) -> None:
    history = [*_conversation(), message]
    validate_history(history)  # raises HistoryError naming the message otherwise
    assert load_messages(dump_messages(history)) == history


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            b'[{"role":"user"},{"role":"wizard"}]',
            "role: Input should be 'system', 'user', 'assistant' or 'tool' (got 'wizard')",
        ),
        (
            b'[{"role":"user"},{"role":"assistant","toolCalls":[{"id":"c1"}]}]',
            "toolCalls.0.name: Field required (got {'id': 'c1'})",
        ),
        (
            b'[{"role":"user"},42]',
            "message: Input should be an object",
        ),
    ],
)
def test_a_field_error_names_the_field_path_and_the_value_it_got(data: bytes, problem: str) -> None:
    with pytest.raises(HistoryError) as info:
        load_messages(data)
    assert (info.value.index, info.value.problem) == (1, problem)


def test_validate_history_names_the_offending_message() -> None:
    history = [
        Message.user("hi"),
        Message(role="tool", tool_call_id="c", thinking=[ThinkingBlock(text="x")]),
    ]
    with pytest.raises(HistoryError, match=r"^message 1: thinking is only allowed") as info:
        validate_history(history)
    assert info.value.index == 1


def test_messages_are_immutable() -> None:
    message = Message.user("hi")
    with pytest.raises(ValueError, match="frozen"):
        message.content = "changed"  # type: ignore[misc]


def test_stamped_copies_with_identity_and_leaves_the_original() -> None:
    message = Message.user("hi")
    stamped = message.stamped("run-1", "conv-1")
    assert (stamped.run_id, stamped.conversation_id, stamped.content) == ("run-1", "conv-1", "hi")
    assert (message.run_id, message.conversation_id) == ("", "")


def test_constructors_set_the_fields_they_name() -> None:
    assert Message.system("be terse") == Message(role="system", content="be terse")
    failed = Message.tool("c1", "t", "boom", failed=True)
    assert (failed.role, failed.tool_call_id, failed.tool_name, failed.content, failed.failed) == (
        "tool",
        "c1",
        "t",
        "boom",
        True,
    )


def test_usage_adds_field_by_field_and_totals_input_and_output() -> None:
    a = Usage(
        input_tokens=1, output_tokens=2, cached_tokens=3, cache_write_tokens=4, reasoning_tokens=5
    )
    b = Usage(
        input_tokens=10,
        output_tokens=20,
        cached_tokens=30,
        cache_write_tokens=40,
        reasoning_tokens=50,
    )
    assert a + b == Usage(
        input_tokens=11,
        output_tokens=22,
        cached_tokens=33,
        cache_write_tokens=44,
        reasoning_tokens=55,
    )
    assert (a + b).total_tokens == 33
