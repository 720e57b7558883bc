"""OpenAI Chat Completions over httpx, for OpenAI and every compatible server.

model = OpenAIChatModel("gpt-4o")                        # OPENAI_API_KEY
model = OpenAIChatModel("llama3.1", base_url="http://localhost:11434/v1")
response = await model.request(ModelRequest(messages=[Message.user("hi")]))
"""

from __future__ import annotations

from typing import Any, get_args

from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models._args import args_object_text
from golem.models._body import base64_text, data_url, tool_result_text, unsupported_part
from golem.models._errors import event_data, unreadable_answer
from golem.models._http import HTTPModel
from golem.models._sse import ServerSentEvent
from golem.models.base import FinishReason, ModelRequest, ModelResponse, StreamDelta

PROVIDER = "openai"

# Chat Completions names its finish reasons as golem does, but for the legacy function_call
_FINISH: dict[str, FinishReason] = {r: r for r in get_args(FinishReason)}
_FINISH["function_call"] = "tool_calls"

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


class OpenAIEndpoint(HTTPModel):
    """OpenAI's host, key and environment, shared by its Chat Completions and Responses APIs."""

    default_base_url = "https://api.openai.com/v1"
    api_key_env = ("OPENAI_API_KEY",)
    base_url_env = ("OPENAI_BASE_URL",)
    key_header = "authorization"
    key_scheme = "Bearer "


class OpenAIChatModel(OpenAIEndpoint):
    """A Chat Completions model: ``POST {base_url}/chat/completions``.

    ``base_url`` follows the OpenAI SDK (it includes ``/v1``); ``OPENAI_BASE_URL`` is
    honoured, so Azure, vLLM, Ollama or OpenRouter work. The key comes from
    ``api_key`` or ``OPENAI_API_KEY``; a custom base URL may go without one.
    ``headers`` are sent with every request (and redacted from errors).
    """

    provider = PROVIDER
    path = "/chat/completions"
    reads = (lambda data: parse_completion(data), lambda: _ChunkAccumulator())  # defined below

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The Chat Completions request body for ``request``."""
        body: dict[str, Any] = {
            "model": self.name,
            "messages": chat_messages(request.messages),
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "final_output", "schema": request.output_schema},
            }
        settings = request.settings
        if settings.max_tokens is not None:
            body["max_completion_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        body.update(settings.extra_body)
        return body


def chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """golem messages as Chat Completions messages, system messages first."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": m.content} for m in messages if m.role == "system"
    ]
    # Tool messages take text only: their media follows the run of results as a user turn.
    pending_media: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and pending_media:
            out.append({"role": "user", "content": pending_media})
            pending_media = []
        if message.role == "user":
            out.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            out.append(_assistant(message))
        elif message.role == "tool":
            content = tool_result_text(message)
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": content})
            if message.parts:
                pending_media.append(
                    {"type": "text", "text": f"Media from tool result {message.tool_call_id}:"}
                )
                pending_media.extend(_media(p) for p in message.parts)
    if pending_media:
        out.append({"role": "user", "content": pending_media})
    return out


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.parts:
        return message.content
    content: list[dict[str, Any]] = []
    if message.content:
        content.append({"type": "text", "text": message.content})
    content.extend(_media(p) for p in message.parts)
    return content


def _media(part: Part) -> dict[str, Any]:
    if part.kind == "image":
        url = part.url or data_url(part)
        return {"type": "image_url", "image_url": {"url": url}}
    if part.kind == "audio" and part.data:
        fmt = _AUDIO_FORMATS.get(part.media_type, part.media_type.rpartition("/")[2])
        return {
            "type": "input_audio",
            "input_audio": {"data": base64_text(part.data), "format": fmt},
        }
    if part.kind == "document" and part.data:
        return {"type": "file", "file": {"file_data": data_url(part), "filename": "document"}}
    raise unsupported_part(PROVIDER, part, "Chat Completions")


def _assistant(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": args_object_text(call.args)},
            }
            for call in message.tool_calls
        ]
    return out


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    prompt = data.get("prompt_tokens_details") or {}
    completion = data.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=data.get("prompt_tokens") or 0,
        output_tokens=data.get("completion_tokens") or 0,
        cached_tokens=prompt.get("cached_tokens") or 0,
        reasoning_tokens=completion.get("reasoning_tokens") or 0,
    )


def _finish(reason: str | None, refused: bool) -> FinishReason:
    if refused:
        return "content_filter"
    if reason is None:
        return "stop"
    return _FINISH.get(reason, "other")


def _reasoning(text: str) -> list[ThinkingBlock]:
    # compatible servers (DeepSeek, vLLM, OpenRouter) return reasoning text; never replayed
    return [ThinkingBlock(text=text, provider=PROVIDER)] if text else []


def parse_completion(data: Any) -> ModelResponse:
    """A non-streaming Chat Completions answer as a :class:`ModelResponse`."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise unreadable_answer(data, "choices", PROVIDER)
    choice = choices[0]
    message = choice.get("message") or {}
    content = message.get("content") or ""
    refusal = message.get("refusal") or ""
    calls = [
        ToolCall(
            id=call.get("id") or "",
            name=(call.get("function") or {}).get("name") or "",
            args=(call.get("function") or {}).get("arguments") or "",
        )
        for call in message.get("tool_calls") or []
    ]
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    return ModelResponse(
        message=Message.assistant(
            content or refusal,
            tool_calls=calls,
            thinking=_reasoning(reasoning if isinstance(reasoning, str) else ""),
        ),
        usage=_usage(data.get("usage")),
        finish_reason=_finish(choice.get("finish_reason"), bool(refusal and not content)),
        model_name=data.get("model") or "",
    )


class _ChunkAccumulator:
    """Builds the complete answer from ``chat.completion.chunk`` events."""

    terminal = "data: [DONE]"

    def __init__(self) -> None:
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, [args pieces]]
        self.usage = Usage()
        self.finish: str | None = None
        self.model = ""
        self.ended = False

    @property
    def complete(self) -> bool:
        return self.ended or self.finish is not None

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        if event.data == "[DONE]":
            self.ended = True
            return []
        return self.feed_chunk(event_data(event, PROVIDER))

    def feed_chunk(self, chunk: Any) -> list[StreamDelta]:
        if not isinstance(chunk, dict):
            return []
        deltas: list[StreamDelta] = []
        if chunk.get("model") and not self.model:
            self.model = chunk["model"]
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                deltas.append(StreamDelta(kind="thinking", text=reasoning))
            text = delta.get("content")
            if text:
                self.content.append(text)
                deltas.append(StreamDelta(kind="text", text=text))
            refusal = delta.get("refusal")
            if refusal:
                self.refusal.append(refusal)
                deltas.append(StreamDelta(kind="text", text=refusal))
            for call in delta.get("tool_calls") or ():
                deltas.extend(self._call_piece(call))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return deltas

    def _call_piece(self, call: dict[str, Any]) -> list[StreamDelta]:
        index = call.get("index")
        if not isinstance(index, int):
            index = len(self.calls)  # some compatible servers send whole calls without an index
        function = call.get("function") or {}
        piece = function.get("arguments") or ""
        state = self.calls.get(index)
        if state is None:
            state = self.calls[index] = [call.get("id") or "", function.get("name") or "", []]
            if piece:
                state[2].append(piece)
            return [
                StreamDelta(
                    kind="tool_call", index=index, call_id=state[0], name=state[1], text=piece
                )
            ]
        if not state[0] and call.get("id"):
            state[0] = call["id"]
        if not state[1] and function.get("name"):
            state[1] = function["name"]
        if not piece:
            return []
        state[2].append(piece)
        return [StreamDelta(kind="tool_call", index=index, text=piece)]

    def progress(self) -> str:
        if self.calls:
            return f"in the middle of tool call {max(self.calls)}"
        return f"after {sum(map(len, self.content))} characters of text"

    def response(self) -> ModelResponse:
        content = "".join(self.content)
        refusal = "".join(self.refusal)
        calls = [
            ToolCall(id=state[0], name=state[1], args="".join(state[2]))
            for _, state in sorted(self.calls.items())
        ]
        return ModelResponse(
            message=Message.assistant(
                content or refusal, tool_calls=calls, thinking=_reasoning("".join(self.reasoning))
            ),
            usage=self.usage,
            finish_reason=_finish(self.finish, bool(refusal and not content)),
            model_name=self.model,
        )
