"""Anthropic Messages over httpx.

model = AnthropicModel("claude-sonnet-4-5")              # ANTHROPIC_API_KEY
response = await model.request(ModelRequest(messages=[Message.user("hi")]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Unpack

from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models._args import args_object, args_text, read_call
from golem.models._body import base64_text, merge_turns, system_entry, unsupported_part, with_format
from golem.models._errors import event_data, unreadable_answer
from golem.models._http import HTTPModel, HTTPOptions
from golem.models._sse import ServerSentEvent
from golem.models.base import FinishReason, ModelRequest, ModelResponse, StreamDelta
from golem.strict_json import loads_strict

PROVIDER = "anthropic"
API_VERSION = "2023-06-01"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


class AnthropicModel(HTTPModel):
    """A Claude model: ``POST {base_url}/v1/messages``.

    ``base_url`` follows the Anthropic SDK (no ``/v1``); ``ANTHROPIC_BASE_URL`` is
    honoured. The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``. ``max_tokens``
    is required by the API; ``ModelSettings.max_tokens`` overrides it per request.
    A request's ``output_schema`` is sent as ``output_config.format`` (JSON outputs).
    """

    provider = PROVIDER
    default_base_url = "https://api.anthropic.com"
    api_key_env = ("ANTHROPIC_API_KEY",)
    base_url_env = ("ANTHROPIC_BASE_URL",)
    key_header = "x-api-key"
    fixed_headers: ClassVar[Mapping[str, str]] = {"anthropic-version": API_VERSION}
    path = "/v1/messages"
    reads = (lambda data: parse_message(data), lambda: _EventAccumulator())  # defined below

    def __init__(
        self, name: str, *, max_tokens: int = 4096, **options: Unpack[HTTPOptions]
    ) -> None:
        super().__init__(name, **options)
        self.max_tokens = max_tokens

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The Messages request body for ``request``."""
        settings = request.settings
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "messages": anthropic_messages(request.messages),
            "stream": stream,
        }
        body.update(system_entry("system", request.messages))
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        extra = dict(settings.extra_body)
        if request.output_schema is not None:
            # JSON outputs (constrained decoding): the answer is one text block of JSON
            schema = {"type": "json_schema", "schema": request.output_schema}
            body["output_config"] = with_format(extra, "output_config", schema)  # e.g. effort
        body.update(extra)
        return body


def anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """golem messages as Messages turns; consecutive same-role turns merged."""
    turns: list[tuple[str, list[Any]]] = []
    for message in messages:
        if message.role == "user":
            blocks = [_text(message.content)] if message.content else []
            blocks.extend(_media(p) for p in message.parts)
            turns.append(("user", blocks))
        elif message.role == "assistant":
            turns.append(("assistant", _assistant_blocks(message)))
        elif message.role == "tool":
            turns.append(("user", [_tool_result(message)]))
    return [{"role": role, "content": blocks} for role, blocks in merge_turns(turns)]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _media(part: Part) -> dict[str, Any]:
    if part.kind not in ("image", "document"):
        raise unsupported_part(PROVIDER, part, "Messages")
    if part.url:
        source: dict[str, Any] = {"type": "url", "url": part.url}
    else:
        source = {"type": "base64", "media_type": part.media_type, "data": base64_text(part.data)}
    return {"type": part.kind, "source": source}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.thinking:
        if block.provider not in ("", PROVIDER):
            continue  # another provider's reasoning: its signature means nothing here
        if block.redacted:
            blocks.append({"type": "redacted_thinking", "data": block.redacted})
        elif block.signature:
            blocks.append(
                {"type": "thinking", "thinking": block.text, "signature": block.signature}
            )
    if message.content:
        blocks.append(_text(message.content))
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": args_object(call.args)}
        )
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    content: str | list[dict[str, Any]] = message.content
    if message.parts:
        content = [_text(message.content)] if message.content else []
        content.extend(_media(p) for p in message.parts)
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
        "is_error": message.failed,
    }


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    cache_read = data.get("cache_read_input_tokens") or 0
    cache_write = data.get("cache_creation_input_tokens") or 0
    return Usage(
        # Anthropic's input_tokens excludes cache reads and writes; golem's counts all input
        input_tokens=(data.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=data.get("output_tokens") or 0,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _finish(reason: str | None) -> FinishReason:
    return _FINISH.get(reason, "other") if reason else "stop"


def parse_message(data: Any) -> ModelResponse:
    """A non-streaming Messages answer as a :class:`ModelResponse`."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise unreadable_answer(data, "content list", PROVIDER)
    text: list[str] = []
    thinking: list[ThinkingBlock] = []
    calls: list[ToolCall] = []
    for block in data["content"]:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text") or "")
        elif kind == "thinking":
            thinking.append(
                ThinkingBlock(
                    text=block.get("thinking") or "",
                    signature=block.get("signature") or "",
                    provider=PROVIDER,
                )
            )
        elif kind == "redacted_thinking":
            thinking.append(ThinkingBlock(redacted=block.get("data") or "", provider=PROVIDER))
        elif kind == "tool_use":
            calls.append(read_call(block, "id", args_text(block.get("input", {}))))
    return ModelResponse(
        message=Message.assistant("".join(text), tool_calls=calls, thinking=thinking),
        usage=_usage(data.get("usage")),
        finish_reason=_finish(data.get("stop_reason")),
        model_name=data.get("model") or "",
    )


class _EventAccumulator:
    """Builds the complete answer from Messages stream events."""

    terminal = "message_stop"

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.call_index: dict[int, int] = {}  # content block index -> tool call position
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.model = ""
        self.ended = False

    @property
    def complete(self) -> bool:
        return self.ended

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        data = event_data(event, PROVIDER)
        kind = data.get("type") if isinstance(data, dict) else None
        return self.feed_data(kind or event.event, data)

    def feed_data(self, kind: str, data: Any) -> list[StreamDelta]:
        if not isinstance(data, dict):
            return []
        if kind == "message_start":
            message = data.get("message") or {}
            self.model = message.get("model") or ""
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            return self._start(data.get("index", len(self.blocks)), data.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(data.get("index", 0), data.get("delta") or {})
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            # message_delta usage is cumulative; fields it omits keep message_start's values
            self.usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.ended = True
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamDelta]:
        kind = block.get("type")
        state: dict[str, Any] = {"type": kind, "pieces": []}
        self.blocks[index] = state
        if kind == "text":
            state["pieces"].append(block.get("text") or "")
            return [StreamDelta(kind="text", text=block["text"])] if block.get("text") else []
        if kind == "thinking":
            state["pieces"].append(block.get("thinking") or "")
            state["signature"] = block.get("signature") or ""
        elif kind == "redacted_thinking":
            state["data"] = block.get("data") or ""
        elif kind == "tool_use":
            position = self.call_index[index] = len(self.call_index)
            state["id"], state["name"] = block.get("id") or "", block.get("name") or ""
            # a non-empty start input is the whole input (some proxies send calls unsplit)
            start_input = block.get("input")
            state["start_input"] = args_text(start_input) if start_input else ""
            return [
                StreamDelta(
                    kind="tool_call", index=position, call_id=state["id"], name=state["name"]
                )
            ]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamDelta]:
        state = self.blocks.get(index)
        if state is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            state["pieces"].append(delta["text"])
            return [StreamDelta(kind="text", text=delta["text"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            state["pieces"].append(delta["thinking"])
            return [StreamDelta(kind="thinking", text=delta["thinking"])]
        if kind == "signature_delta":
            state["signature"] = state.get("signature", "") + (delta.get("signature") or "")
        elif kind == "input_json_delta" and delta.get("partial_json"):
            state["pieces"].append(delta["partial_json"])
            return [
                StreamDelta(
                    kind="tool_call", index=self.call_index[index], text=delta["partial_json"]
                )
            ]
        return []

    def progress(self) -> str:
        if not self.blocks:
            return "before any content"
        last = self.blocks[max(self.blocks)]
        if last["type"] == "tool_use":
            return f"in the middle of tool call {last['name']!r}"
        return f"in the middle of a {last['type']} block"

    def response(self) -> ModelResponse:
        text: list[str] = []
        thinking: list[ThinkingBlock] = []
        calls: list[ToolCall] = []
        for _, state in sorted(self.blocks.items()):
            kind = state["type"]
            if kind == "text":
                text.extend(state["pieces"])
            elif kind == "thinking":
                thinking.append(
                    ThinkingBlock(
                        text="".join(state["pieces"]),
                        signature=state.get("signature", ""),
                        provider=PROVIDER,
                    )
                )
            elif kind == "redacted_thinking":
                thinking.append(ThinkingBlock(redacted=state["data"], provider=PROVIDER))
            elif kind == "tool_use":
                calls.append(ToolCall(id=state["id"], name=state["name"], args=_stream_args(state)))
        return ModelResponse(
            message=Message.assistant("".join(text), tool_calls=calls, thinking=thinking),
            usage=_usage(self.usage),
            finish_reason=_finish(self.stop_reason),
            model_name=self.model,
        )


def _stream_args(state: dict[str, Any]) -> str:
    raw = "".join(state["pieces"])
    if not raw:
        return state["start_input"] or "{}"
    try:
        value = loads_strict(raw)
    except ValueError:
        return raw  # cut by max_tokens mid-arguments, or NaN: kept verbatim
    # the same text the non-streaming answer gives for this input
    return args_text(value) if isinstance(value, dict) else raw
