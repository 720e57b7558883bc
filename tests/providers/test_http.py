"""The shared plumbing: SSE parsing, argument shaping, Retry-After, error messages, secrets."""

from __future__ import annotations

import json

import pytest

from golem.models._args import args_object, args_object_text
from golem.models._errors import error_message
from golem.models._retry_after import parse_retry_after
from golem.models._secrets import REDACTED, Secrets
from golem.models._sse import ServerSentEvent, SSEParser

STREAM = b': keep-alive comment\nevent: message_start\ndata: {"a":\ndata: 1}\n\ndata: [DONE]\n\n'
EXPECTED = [
    ServerSentEvent("message_start", '{"a":\n1}'),
    ServerSentEvent("message", "[DONE]"),
]


def parse_in_chunks(data: bytes, size: int) -> list[ServerSentEvent]:
    parser = SSEParser()
    events: list[ServerSentEvent] = []
    for start in range(0, len(data), size):
        events += parser.feed(data[start : start + size])
    return events + parser.close()


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_sse_parser_handles_every_line_ending_split_anywhere(ending: bytes, size: int) -> None:
    assert parse_in_chunks(STREAM.replace(b"\n", ending), size) == EXPECTED


def test_sse_parser_fields_bom_and_unterminated_event() -> None:
    parser = SSEParser()
    events = parser.feed(b"\xef\xbb\xbfid: 7\nretry: 300\ndata:no-space\ndata\n\n")
    assert events == [ServerSentEvent("message", "no-space\n", "7", 300)]
    assert parser.feed(b"data: cut") == []
    assert parser.close() == [] and parser.incomplete


def test_sse_parser_decodes_utf8_split_inside_a_character() -> None:
    data = "data: caf\u00e9 \U0001f44b\n\n".encode()
    assert parse_in_chunks(data, 1) == [ServerSentEvent("message", "caf\u00e9 \U0001f44b")]


def test_arguments_are_verbatim_objects_or_shaped_deterministically() -> None:
    assert args_object_text('{"b": 1,  "a": 2}') == '{"b": 1,  "a": 2}'
    assert args_object_text("") == "{}"
    shaped = args_object_text('{"city": "Par')
    assert shaped == '{"truncated_args":"{\\"city\\": \\"Par"}'
    assert args_object_text('{"city": "Par') == shaped
    assert args_object_text("[1, 2]") == '{"truncated_args":"[1, 2]"}'
    assert args_object_text("caf\u00e9") == '{"truncated_args":"caf\u00e9"}'
    assert args_object('{"a": [1]}') == {"a": [1]}
    assert args_object("") == {}
    assert args_object("null") == {"truncated_args": "null"}


@pytest.mark.parametrize("args", ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}'])
def test_arguments_with_non_json_numbers_are_shaped_like_any_non_object(args: str) -> None:
    assert args_object(args) == {"truncated_args": args}
    assert args_object_text(args) == '{"truncated_args":"' + args.replace('"', '\\"') + '"}'


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    date = {"retry-after": "Wed, 21 Oct 2026 07:28:30 GMT", "date": "Wed, 21 Oct 2026 07:28:00 GMT"}
    assert parse_retry_after(date) == 30.0
    past = {"retry-after": "Wed, 21 Oct 2026 07:27:00 GMT", "date": "Wed, 21 Oct 2026 07:28:00 GMT"}
    assert parse_retry_after(past) == 0.0
    retry_info = {
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}]
    }
    assert parse_retry_after({}, retry_info) == 0.5
    assert parse_retry_after({"retry-after": "2"}, retry_info) == 2.0


def test_error_messages_from_each_provider_shape() -> None:
    openai = {"error": {"message": "bad model", "type": "invalid_request_error"}}
    anthropic = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    gemini = [{"error": {"code": 400, "message": "bad arg", "status": "INVALID_ARGUMENT"}}]
    assert error_message(400, "Bad Request", "application/json", "", openai) == "bad model"
    assert error_message(529, "", "application/json", "", anthropic) == "Overloaded"
    assert error_message(400, "Bad Request", "application/json", "", gemini) == "bad arg"
    assert error_message(500, "Internal Server Error", "text/plain", "oops", None) == "oops"
    assert (
        error_message(504, "Gateway Timeout", "", "  ", None)
        == "empty response body (504 Gateway Timeout)"
    )


def test_secrets_are_the_key_extra_headers_auth_headers_and_secret_named_extra_body() -> None:
    extra_body = {
        "apiKey": "k-0123456789",
        "provider": {"auth": {"value": "nested-secret-1"}, "order": ["fast-provider"]},
        "access_token": ["listed-token-42"],
        "password": "short",  # under 8 characters: too likely an ordinary word
        "max_tokens": "not-a-secret-123",
        "tool_choice": "required",
    }
    secrets = Secrets.of(
        "sk-test-key-1",
        {"X-Tenant": "tenant-secret"},
        {"Authorization": "Bearer tok-0123456789", "accept": "application/json"},
        extra_body,
    )
    assert set(secrets.values) == {
        "sk-test-key-1",
        "tenant-secret",
        "Bearer tok-0123456789",
        "tok-0123456789",
        "k-0123456789",
        "nested-secret-1",
        "listed-token-42",
    }
    assert secrets.redact("Bearer tok-0123456789 / tok-0123456789: required") == (
        f"{REDACTED} / {REDACTED}: required"
    )


@pytest.mark.parametrize("depth", [257, 5000])
def test_arguments_nested_past_the_limit_are_sent_as_truncated_args(depth: int) -> None:
    # Issue 18 item 1: past golem's JSON limit the arguments are not-a-JSON-object, so the
    # provider gets them verbatim under truncated_args, never a RecursionError.
    deep = '{"a": ' + "[" * depth + "]" * depth + "}"
    assert args_object(deep) == {"truncated_args": deep}
    assert json.loads(args_object_text(deep)) == {"truncated_args": deep}
