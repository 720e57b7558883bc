"""Google Gemini (Generative Language API) over httpx.

    model = GeminiModel("gemini-2.5-flash")                  # GEMINI_API_KEY or GOOGLE_API_KEY
    response = await model.request(ModelRequest(messages=[Message.user("hi")]))

Gemini returns function calls without ids. The adapter mints a deterministic id
for each: ``gemini_`` + the first 16 hex digits of a SHA-256 over the response id,
the request's message count, the call's position in the answer, its name and its
arguments. No clock and no randomness, so the same answer always yields the same
ids (replay-safe); the response id and message count keep ids distinct across turns.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models._args import args_object, args_text
from golem.models._body import base64_text, merge_turns, system_text
from golem.models._errors import event_data, raise_for_error, unreadable_answer
from golem.models._http import HTTPModel
from golem.models._sse import ServerSentEvent
from golem.models.base import FinishReason, ModelRequest, ModelResponse, StreamDelta

PROVIDER = "gemini"

_FILTERED = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
}
_BROKEN_CALL = {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}

EMPTY_USER_TEXT = " "
"""What an empty user message is sent as: Gemini rejects an empty text part, and dropping
the turn would leave a model function-call turn without the user turn it must follow."""


class GeminiModel(HTTPModel):
    """A Gemini model: ``POST {base_url}/v1beta/models/{name}:generateContent``.

    ``base_url`` follows the google-genai SDK (host only). The key comes from
    ``api_key``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` and is sent as ``x-goog-api-key``.
    """

    provider = PROVIDER
    default_base_url = "https://generativelanguage.googleapis.com"
    api_key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_env = ("GOOGLE_GEMINI_BASE_URL",)
    key_header = "x-goog-api-key"

    def _model_id(self, name: str) -> str:
        return name.removeprefix("models/")

    def _url(self, *, stream: bool) -> str:
        if stream:
            return f"{self.base_url}/v1beta/models/{self.name}:streamGenerateContent?alt=sse"
        return f"{self.base_url}/v1beta/models/{self.name}:generateContent"

    def _parse(self, data: Any, request: ModelRequest) -> ModelResponse:
        raise_for_error(data, PROVIDER)
        answer = _ChunkAccumulator(len(request.messages))
        answer.feed_chunk(data)
        if not answer.complete:
            raise unreadable_answer(data, "candidate", PROVIDER)
        return answer.response()

    def _accumulator(self, request: ModelRequest) -> _ChunkAccumulator:
        return _ChunkAccumulator(len(request.messages))

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The generateContent request body for ``request``."""
        body: dict[str, Any] = {"contents": gemini_contents(request.messages)}
        system = system_text(request.messages)
        if system:
            body["systemInstruction"] = {"role": "user", "parts": [{"text": system}]}
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "parametersJsonSchema": t.parameters,
                        }
                        for t in request.tools
                    ]
                }
            ]
        config: dict[str, Any] = {}
        settings = request.settings
        if settings.max_tokens is not None:
            config["maxOutputTokens"] = settings.max_tokens
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        if request.output_schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = request.output_schema
        if config:
            body["generationConfig"] = config
        body.update(settings.extra_body)
        return body


def gemini_contents(messages: list[Message]) -> list[dict[str, Any]]:
    """golem messages as Gemini contents (roles user and model), same-role turns merged."""
    names = {c.id: c.name for m in messages for c in m.tool_calls if c.id}
    turns: list[tuple[str, list[Any]]] = []
    for message in messages:
        if message.role == "user":
            parts: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
            parts.extend(_media(p) for p in message.parts)
            turns.append(("user", parts or [{"text": EMPTY_USER_TEXT}]))
        elif message.role == "assistant":
            turns.append(("model", _model_parts(message)))
        elif message.role == "tool":
            key = "error" if message.failed else "result"
            response: dict[str, Any] = {
                "name": message.tool_name or names.get(message.tool_call_id, ""),
                "response": {key: message.content},
            }
            if message.tool_call_id:
                response["id"] = message.tool_call_id
            turns.append(("user", [{"functionResponse": response}, *map(_media, message.parts)]))
    return [{"role": role, "parts": parts} for role, parts in merge_turns(turns)]


def _media(part: Part) -> dict[str, Any]:
    if part.url:
        data: dict[str, Any] = {"fileUri": part.url}
        if part.media_type:
            data["mimeType"] = part.media_type
        return {"fileData": data}
    return {"inlineData": {"mimeType": part.media_type, "data": base64_text(part.data)}}


def _model_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    text_signature = ""
    for block in message.thinking:
        if block.provider != PROVIDER:
            continue  # another provider's reasoning and signatures mean nothing to Gemini
        if block.text:
            part: dict[str, Any] = {"text": block.text, "thought": True}
            if block.signature:
                part["thoughtSignature"] = block.signature
            parts.append(part)
        elif block.redacted and not text_signature:
            text_signature = block.redacted
    if message.content or text_signature:
        part = {"text": message.content}
        if text_signature:
            part["thoughtSignature"] = text_signature
        parts.append(part)
    for call in message.tool_calls:
        function: dict[str, Any] = {"name": call.name, "args": args_object(call.args)}
        if call.id:
            function["id"] = call.id
        part = {"functionCall": function}
        if call.signature:
            part["thoughtSignature"] = call.signature
        parts.append(part)
    return parts


def mint_call_id(response_id: str, message_count: int, position: int, name: str, args: str) -> str:
    """A deterministic id for a call Gemini returned without one (see the module docstring)."""
    seed = json.dumps([response_id, message_count, position, name, args], ensure_ascii=False)
    return "gemini_" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:16]


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    thoughts = data.get("thoughtsTokenCount") or 0
    return Usage(
        input_tokens=(data.get("promptTokenCount") or 0)
        + (data.get("toolUsePromptTokenCount") or 0),
        # golem counts reasoning as part of the output, Gemini reports it beside
        output_tokens=(data.get("candidatesTokenCount") or 0) + thoughts,
        cached_tokens=data.get("cachedContentTokenCount") or 0,
        reasoning_tokens=thoughts,
    )


class _ChunkAccumulator:
    """Builds the answer from GenerateContentResponse chunks (one chunk when not streaming)."""

    terminal = "a chunk with finishReason"
    ended = False  # Gemini has no end marker: the stream is read to its end

    def __init__(self, message_count: int) -> None:
        self.message_count = message_count
        self.text: list[str] = []
        self.thinking: list[dict[str, Any]] = []
        self.thought_open = False
        self.calls: list[ToolCall] = []
        self.usage = Usage()
        self.finish: str | None = None
        self.blocked = False
        self.model = ""
        self.response_id = ""

    @property
    def complete(self) -> bool:
        return self.finish is not None or self.blocked

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        return self.feed_chunk(event_data(event, PROVIDER))

    def feed_chunk(self, chunk: Any) -> list[StreamDelta]:
        if not isinstance(chunk, dict):
            return []
        self.model = chunk.get("modelVersion") or self.model
        self.response_id = chunk.get("responseId") or self.response_id
        if chunk.get("usageMetadata"):
            self.usage = _usage(chunk["usageMetadata"])  # cumulative: the last one counts
        if (chunk.get("promptFeedback") or {}).get("blockReason"):
            self.blocked = True
        candidates = chunk.get("candidates") or []
        if not candidates:
            return []
        candidate = candidates[0]
        deltas: list[StreamDelta] = []
        for part in (candidate.get("content") or {}).get("parts") or ():
            deltas.extend(self._part(part))
        if candidate.get("finishReason"):
            self.finish = candidate["finishReason"]
        return deltas

    def _part(self, part: dict[str, Any]) -> list[StreamDelta]:
        signature = part.get("thoughtSignature") or ""
        if "functionCall" in part:
            self.thought_open = False
            return [self._call(part["functionCall"] or {}, signature)]
        if part.get("thought"):
            text = part.get("text") or ""
            if text:
                if not self.thought_open:
                    self.thinking.append({"text": [], "signature": ""})
                self.thinking[-1]["text"].append(text)
                self.thought_open = True
            if signature:
                if self.thought_open:
                    self.thinking[-1]["signature"] = signature
                else:
                    self.thinking.append({"redacted": signature})
                self.thought_open = False
            return [StreamDelta(kind="thinking", text=text)] if text else []
        self.thought_open = False
        if signature:
            # a signature on an answer part: kept as an opaque block, replayed on the text part
            self.thinking.append({"redacted": signature})
        text = part.get("text") or ""
        if not text:
            return []
        self.text.append(text)
        return [StreamDelta(kind="text", text=text)]

    def _call(self, function: dict[str, Any], signature: str) -> StreamDelta:
        position = len(self.calls)
        name = function.get("name") or ""
        args = args_text(function.get("args") or {})
        call_id = function.get("id") or mint_call_id(
            self.response_id, self.message_count, position, name, args
        )
        self.calls.append(ToolCall(id=call_id, name=name, args=args, signature=signature))
        return StreamDelta(kind="tool_call", index=position, call_id=call_id, name=name, text=args)

    def progress(self) -> str:
        if self.calls:
            return f"after tool call {self.calls[-1].name!r}"
        return f"after {sum(map(len, self.text))} characters of text"

    def _finish_reason(self) -> FinishReason:
        if self.blocked or self.finish in _FILTERED:
            return "content_filter"
        if self.finish == "MAX_TOKENS":
            return "length"
        if self.finish in _BROKEN_CALL:
            return "error"
        if self.finish == "STOP":
            return "tool_calls" if self.calls else "stop"
        return "other"

    def response(self) -> ModelResponse:
        thinking = [
            ThinkingBlock(
                text="".join(block["text"]), signature=block["signature"], provider=PROVIDER
            )
            if "text" in block
            else ThinkingBlock(redacted=block["redacted"], provider=PROVIDER)
            for block in self.thinking
        ]
        return ModelResponse(
            message=Message.assistant("".join(self.text), tool_calls=self.calls, thinking=thinking),
            usage=self.usage,
            finish_reason=self._finish_reason(),
            model_name=self.model,
        )
