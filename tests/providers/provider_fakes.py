"""Fake providers for the adapter tests: check requests the way the real APIs do.

Each fake parses the body as strictly as the provider does (RFC 8259: a bare
``NaN`` or ``Infinity`` is a syntax error there, though Python's ``json`` accepts
it), checks the path and auth header and the tool-call pairing of the
conversation, rejects a broken request with the provider's own error body and
status, and otherwise answers with the next queued (recorded) response.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug import Request, Response

RECORDINGS = Path(__file__).parent.parent / "recordings"
API_KEY = "sk-test-0123456789abcdef"


def recording(name: str) -> dict[str, Any]:
    """A recorded exchange from tests/recordings (the name without ``.json``)."""
    data: dict[str, Any] = json.loads((RECORDINGS / f"{name}.json").read_text())
    return data


def completed_response(name: str) -> dict[str, Any]:
    """The whole response a recorded Responses stream ends with (its response.completed)."""
    last = [e for e in recording(name)["response"]["sse"].split("\n\n") if e][-1]
    response: dict[str, Any] = json.loads(last.split("data: ", 1)[1])["response"]
    return response


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def recorded(cls, name: str) -> Answer:
        response = recording(name)["response"]
        if "sse" in response:
            body = response["sse"].encode()
        else:
            body = json.dumps(response["body"]).encode()
        return cls(response["status"], body, response["content_type"])

    @classmethod
    def json(cls, status: int, body: Any, **headers: str) -> Answer:
        return cls(status, json.dumps(body).encode(), headers=headers)


Check = Callable[[Request, Any], Answer | None]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def strict_json(raw: bytes | str) -> Any:
    """Parse like the providers: ``NaN``, ``Infinity`` and ``-Infinity`` are errors."""
    return json.loads(raw, parse_constant=_reject_constant)


class FakeProvider:
    """A provider endpoint: validate each request, then answer from the queue."""

    def __init__(
        self, check: Check, path: re.Pattern[str], malformed: Callable[[str], Answer]
    ) -> None:
        self.check = check
        self.path = path
        self.malformed = malformed
        self.queue: list[Answer] = []
        self.bodies: list[Any] = []
        """Every request body the fake could parse, in order."""
        self.rejected: list[bytes] = []
        """Request bodies refused as invalid JSON."""

    def answer(self, *answers: Answer | str) -> None:
        """Queue answers: an :class:`Answer` or the name of a recording."""
        self.queue.extend(Answer.recorded(a) if isinstance(a, str) else a for a in answers)

    def handle(self, request: Request) -> Response:
        if not self.path.fullmatch(request.path):
            return Response("not found", status=404)
        raw = request.get_data()
        try:
            body = strict_json(raw)
        except ValueError as exc:
            self.rejected.append(raw)
            answer: Answer | None = self.malformed(str(exc))
        else:
            self.bodies.append(body)
            answer = self.check(request, body)
        if answer is None:
            assert self.queue, "the fake provider has no answer queued"
            answer = self.queue.pop(0)
        response = Response(answer.body, status=answer.status, content_type=answer.content_type)
        for name, value in answer.headers.items():
            response.headers[name] = value
        return response


# --- OpenAI Chat Completions -----------------------------------------------------------------


def openai_error(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> Answer:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Answer.json(status, {"error": error})


def openai_malformed(detail: str) -> Answer:
    return openai_error(
        400,
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
        "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
        "sent was not valid JSON.",
    )


def check_openai(request: Request, body: Any) -> Answer | None:
    if request.headers.get("authorization") != f"Bearer {API_KEY}":
        return openai_error(401, "Incorrect API key provided.", code="invalid_api_key")
    pending: list[str] = []
    answered: set[str] = set()
    for i, message in enumerate(body["messages"]):
        if message["role"] == "tool":
            if message["tool_call_id"] not in pending:
                return openai_error(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{i}].role",
                )
            pending.remove(message["tool_call_id"])
            answered.add(message["tool_call_id"])
            continue
        if pending:
            return openai_error(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                param=f"messages.[{i}].role",
            )
        for j, call in enumerate(message.get("tool_calls") or ()):
            try:
                args = strict_json(call["function"]["arguments"])
            except ValueError:
                args = None
            if not isinstance(args, dict):
                return openai_error(
                    400,
                    f"Invalid 'messages[{i}].tool_calls[{j}].function.arguments': "
                    "expected a JSON object.",
                    param=f"messages[{i}].tool_calls[{j}].function.arguments",
                    code="invalid_value",
                )
            pending.append(call["id"])
    if pending:
        return openai_error(
            400,
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(pending)}",
            param="messages",
        )
    return None


# --- Anthropic Messages ----------------------------------------------------------------------


def anthropic_error(status: int, kind: str, message: str) -> Answer:
    return Answer.json(status, {"type": "error", "error": {"type": kind, "message": message}})


def anthropic_malformed(detail: str) -> Answer:
    return anthropic_error(400, "invalid_request_error", f"invalid JSON in request body: {detail}")


def check_anthropic(request: Request, body: Any) -> Answer | None:
    if request.headers.get("x-api-key") != API_KEY:
        return anthropic_error(401, "authentication_error", "invalid x-api-key")
    if request.headers.get("anthropic-version") != "2023-06-01":
        return anthropic_error(
            400, "invalid_request_error", "anthropic-version: header is required"
        )
    if "max_tokens" not in body:
        return anthropic_error(400, "invalid_request_error", "max_tokens: Field required")
    if "output_format" in body:
        return anthropic_error(
            400, "invalid_request_error", "output_format: moved to output_config.format"
        )
    output_format = (body.get("output_config") or {}).get("format")
    if output_format is not None and (
        output_format.get("type") != "json_schema"
        or not isinstance(output_format.get("schema"), dict)
    ):
        return anthropic_error(
            400, "invalid_request_error", "output_config.format: expected a json_schema format"
        )
    messages = body["messages"]
    previous_uses: list[str] = []
    for i, message in enumerate(messages):
        content = message["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        for j, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block["tool_use_id"] not in previous_uses:
                return anthropic_error(
                    400,
                    "invalid_request_error",
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message.",
                )
            if block.get("type") == "tool_use" and not isinstance(block.get("input"), dict):
                return anthropic_error(
                    400,
                    "invalid_request_error",
                    f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary",
                )
            if block.get("type") == "thinking" and not block.get("signature"):
                return anthropic_error(
                    400,
                    "invalid_request_error",
                    f"messages.{i}.content.{j}.thinking.signature: Field required",
                )
        missing = [u for u in previous_uses if u not in results]
        if missing:
            return _anthropic_unanswered(i - 1, missing)
        previous_uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if previous_uses:
        return _anthropic_unanswered(len(messages) - 1, previous_uses)
    return None


def _anthropic_unanswered(index: int, ids: list[str]) -> Answer:
    # the recorded body of anthropic-08, for this request's ids
    return anthropic_error(
        400,
        "invalid_request_error",
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` "
        "block in the next message.",
    )


# --- Gemini ----------------------------------------------------------------------------------


def gemini_error(status: int, message: str, state: str = "INVALID_ARGUMENT") -> Answer:
    return Answer.json(status, {"error": {"code": status, "message": message, "status": state}})


def gemini_malformed(detail: str) -> Answer:
    return gemini_error(400, f"Invalid JSON payload received. Unexpected token.\n{detail}")


def check_gemini(request: Request, body: Any) -> Answer | None:
    if request.headers.get("x-goog-api-key") != API_KEY:
        return gemini_error(400, "API key not valid. Please pass a valid API key.")
    contents = body["contents"]
    for i, content in enumerate(contents):
        parts = content["parts"]
        responses = [p for p in parts if "functionResponse" in p]
        previous = contents[i - 1] if i else None
        calls = [p for p in previous["parts"] if "functionCall" in p] if previous else []
        if any(p.get("text") == "" for p in parts):
            return gemini_error(
                400,
                "Unable to submit request because it has an empty text parameter. Add a value "
                "to the parameter and try again.",
            )
        if any("functionCall" in p for p in parts) and (
            previous is None or previous["role"] != "user"
        ):
            return gemini_error(
                400,
                "Please ensure that function call turn comes immediately after a user turn or "
                "after a function response turn.",
            )
        if responses and not calls:
            return gemini_error(
                400,
                "Please ensure that function response turn comes immediately after a function "
                "call turn.",
            )
        if calls and len(responses) != len(calls):
            return gemini_error(
                400,
                "Please ensure that the number of function response parts is equal to the "
                "number of function call parts of the function call turn.",
            )
        for j, part in enumerate(parts):
            args = part.get("functionCall", {}).get("args", {})
            if not isinstance(args, dict):
                return gemini_error(
                    400,
                    f"Invalid value at 'contents[{i}].parts[{j}].function_call.args' "
                    f"(type.googleapis.com/google.protobuf.Struct), {json.dumps(args)}",
                )
    last = contents[-1] if contents else None
    if last and any("functionCall" in p for p in last["parts"]):
        return gemini_error(
            400,
            "Please ensure that the number of function response parts is equal to the "
            "number of function call parts of the function call turn.",
        )
    return None


# --- OpenAI Responses ------------------------------------------------------------------------

RESPONSES_PARAMETERS = frozenset(
    {
        "background", "conversation", "include", "input", "instructions", "max_output_tokens",
        "max_tool_calls", "metadata", "model", "parallel_tool_calls", "previous_response_id",
        "prompt", "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier",
        "service_tier", "store", "stream", "stream_options", "temperature", "text",
        "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
    }
)  # fmt: skip
"""The request body's top-level parameters the API reference lists; any other is refused."""
RESPONSES_CONTENT_TYPES = {
    "user": {"input_text", "input_image", "input_file"},
    "system": {"input_text"},
    "developer": {"input_text"},
    "assistant": {"output_text", "refusal"},
}
RESPONSES_OUTPUT_TYPES = {"input_text", "input_image", "input_file"}


def _missing(param: str) -> Answer:
    return openai_error(
        400,
        f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def _wrong_part(parts: Any, where: str, allowed: set[str]) -> Answer | None:
    """The refusal of the first content part (of a list; text is always fine) of a wrong type."""
    for j, part in enumerate(parts if isinstance(parts, list) else ()):
        if part.get("type") not in allowed:
            names = sorted(allowed)
            supported = ", ".join(f"'{n}'" for n in names[:-1]) + f", and '{names[-1]}'"
            return openai_error(
                400,
                f"Invalid value: '{part.get('type')}'. Supported values are: {supported}.",
                param=f"{where}[{j}].type",
                code="invalid_value",
            )
    return None


def check_openai_responses(request: Request, body: Any) -> Answer | None:
    """What POST /v1/responses refuses, with the API's own error bodies."""
    if request.headers.get("authorization") != f"Bearer {API_KEY}":
        return openai_error(401, "Incorrect API key provided.", code="invalid_api_key")
    for name in body:
        if name not in RESPONSES_PARAMETERS:
            return openai_error(
                400, f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter"
            )
    for i, tool in enumerate(body.get("tools") or ()):
        if tool.get("type") == "function" and not tool.get("name"):
            return _missing(f"tools[{i}].name")
    output_format = (body.get("text") or {}).get("format") or {}
    if output_format.get("type") == "json_schema":
        for field_name in ("name", "schema"):
            if field_name not in output_format:
                return _missing(f"text.format.{field_name}")
    items = body["input"] if isinstance(body["input"], list) else []
    stored = body.get("store", True) is not False
    calls: list[str] = []
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            allowed = RESPONSES_CONTENT_TYPES.get(item.get("role"), set())
            refused = _wrong_part(item.get("content"), f"input[{i}].content", allowed)
            if refused:
                return refused
        elif kind == "function_call":
            if not isinstance(item.get("arguments"), str):
                return openai_error(
                    400,
                    f"Invalid type for 'input[{i}].arguments': expected a string, but got "
                    f"{type(item.get('arguments')).__name__} instead.",
                    param=f"input[{i}].arguments",
                    code="invalid_type",
                )
            calls.append(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                return openai_error(
                    400,
                    f"No tool call found for function call output with call_id {item['call_id']}.",
                    param="input",
                )
            answered.add(item["call_id"])
            refused = _wrong_part(item.get("output"), f"input[{i}].output", RESPONSES_OUTPUT_TYPES)
            if refused:
                return refused
        elif kind == "reasoning":
            for field_name in ("id", "summary"):
                if field_name not in item:
                    return _missing(f"input[{i}].{field_name}")
            if not stored and not item.get("encrypted_content"):
                return openai_error(
                    404,
                    f"Item with id '{item['id']}' not found. Items are not persisted when "
                    "`store` is set to false. Try again with `store` set to true, or remove "
                    "this item from your input.",
                    param="input",
                )
            following = next((n for n in items[i + 1 :] if n.get("type") != "reasoning"), {})
            if following.get("type") != "function_call" and following.get("role") != "assistant":
                return openai_error(
                    400,
                    f"Item '{item['id']}' of type 'reasoning' was provided without its required "
                    "following item.",
                    param="input",
                )
    for call_id in calls:
        if call_id not in answered:
            return openai_error(
                400, f"No tool output found for function call {call_id}.", param="input"
            )
    return None


# --- a provider that drops the connection mid-stream -----------------------------------------


class StreamCutter:
    """A 127.0.0.1 HTTP/1.1 server that answers every POST with a 200 event stream, sends
    ``sent`` as its first chunk and then closes the connection: no final chunk, no end
    marker, as when a provider or a proxy in front of it drops the stream.

        async with StreamCutter(sent) as cutter:
            OpenAIChatModel("gpt-4o", base_url=cutter.url + "/v1", api_key=API_KEY)
    """

    def __init__(self, sent: bytes) -> None:
        self.sent = sent
        self.requests = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the cutter is not serving"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aenter__(self) -> StreamCutter:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        self.requests += 1
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            + f"{len(self.sent):x}\r\n".encode()
            + self.sent
            + b"\r\n"
        )
        await writer.drain()
        writer.close()  # mid-stream: the chunked body never ends
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
