"""OpenAI Responses API over httpx: items instead of messages, reasoning replayed encrypted.

    model = OpenAIResponsesModel("gpt-5")                    # OPENAI_API_KEY
    agent = Agent("openai-responses:gpt-5", name="helper")  # the same, by name
    response = await model.request(ModelRequest(messages=[Message.user("hi")]))

Nothing depends on OpenAI keeping state: every request says ``store: false`` and asks for
``reasoning.encrypted_content``. A reasoning item comes back as :class:`ThinkingBlock`\\ s
that carry its id: one per summary (as text) and one holding the encrypted content (as the
redacted payload). The next request sends them back as that same item, unchanged; a
reasoning item without encrypted content is not sent (the API could not read it).
"""

from __future__ import annotations

from typing import Any

from golem.messages import Message, Part, ThinkingBlock, ToolCall, Usage
from golem.models._args import args_object_text, read_call
from golem.models._body import (
    data_url,
    system_entry,
    tool_result_text,
    unsupported_part,
    with_format,
)
from golem.models._errors import event_data, raise_for_error, stream_error, unreadable_answer
from golem.models._sse import ServerSentEvent
from golem.models.base import FinishReason, ModelRequest, ModelResponse, StreamDelta
from golem.models.openai import OpenAIEndpoint

PROVIDER = "openai-responses"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value that returns reasoning as a payload the client can replay."""

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


class OpenAIResponsesModel(OpenAIEndpoint):
    """A model behind the Responses API: ``POST {base_url}/responses``.

    ``base_url`` follows the OpenAI SDK (it includes ``/v1``); ``OPENAI_BASE_URL`` is
    honoured. The key comes from ``api_key`` or ``OPENAI_API_KEY``. System messages become
    ``instructions``; a request's ``output_schema`` is sent as ``text.format``. Reasoning
    settings go in ``ModelSettings.extra_body`` (``{"reasoning": {"effort": "high",
    "summary": "auto"}}``); ``extra_body`` ``include`` and ``text`` entries are merged with
    the adapter's, and ``{"store": True}`` lets reasoning without encrypted content be
    replayed by id.
    """

    provider = PROVIDER
    path = "/responses"
    reads = (lambda data: parse_response(data), lambda: _EventAccumulator())  # defined below

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The Responses request body for ``request``."""
        settings = request.settings
        extra = dict(settings.extra_body)
        stored = extra.get("store") is True
        body: dict[str, Any] = {
            "model": self.name,
            "input": response_items(request.messages, stored=stored),
            "store": False,
            "include": [ENCRYPTED_REASONING],
            "stream": stream,
        }
        body.update(system_entry("instructions", request.messages))
        if request.tools:
            body["tools"] = [
                # strict is the Responses default; golem's schemas are not made strict-ready
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.output_schema is not None:
            named = {"name": "final_output", "schema": request.output_schema}
            body["text"] = with_format(extra, "text", {"type": "json_schema", **named})  # verbosity
        if isinstance(extra.get("include"), list):
            body["include"] = list(dict.fromkeys([*body["include"], *extra.pop("include")]))
        if settings.max_tokens is not None:
            body["max_output_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        body.update(extra)
        return body


def response_items(messages: list[Message], *, stored: bool = False) -> list[dict[str, Any]]:
    """golem messages as Responses input items (system messages go to ``instructions``).

    ``stored``: the conversation's items are kept by OpenAI (``store: true``), so reasoning
    without encrypted content may still be sent by id.
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            items.append({"type": "message", "role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            items.extend(_assistant_items(message, stored))
        elif message.role == "tool":
            output: str | list[dict[str, Any]] = tool_result_text(message)
            if message.parts:
                output = [{"type": "input_text", "text": output}] if output else []
                output.extend(_media(p) for p in message.parts)
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}
            )
    return items


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.parts:
        return message.content
    content = [{"type": "input_text", "text": message.content}] if message.content else []
    content.extend(_media(p) for p in message.parts)
    return content


def _media(part: Part) -> dict[str, Any]:
    if part.kind == "image":
        return {"type": "input_image", "image_url": part.url or data_url(part), "detail": "auto"}
    if part.kind == "document":
        if part.url:
            return {"type": "input_file", "file_url": part.url}
        return {"type": "input_file", "filename": "document", "file_data": data_url(part)}
    raise unsupported_part(PROVIDER, part, "the Responses API")


def _assistant_items(message: Message, stored: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.content or message.tool_calls:
        # the API refuses a reasoning item that no output item follows
        items.extend(_reasoning_items(message.thinking, stored))
    if message.content:
        items.append({"type": "message", "role": "assistant", "content": message.content})
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": args_object_text(call.args),
            }
        )
    return items


def _reasoning_items(thinking: list[ThinkingBlock], stored: bool) -> list[dict[str, Any]]:
    """This adapter's blocks, regrouped by item id into the reasoning items they came from."""
    items: dict[str, dict[str, Any]] = {}
    for block in thinking:
        if block.provider != PROVIDER or not block.id:
            continue  # another provider's reasoning means nothing to this API
        item = items.setdefault(block.id, {"type": "reasoning", "id": block.id, "summary": []})
        if block.text:
            item["summary"].append({"type": "summary_text", "text": block.text})
        elif block.redacted:
            item["encrypted_content"] = block.redacted
    return [item for item in items.values() if stored or "encrypted_content" in item]


def _thinking(item: dict[str, Any]) -> list[ThinkingBlock]:
    item_id = item.get("id") or ""
    blocks = [
        ThinkingBlock(text=summary["text"], provider=PROVIDER, id=item_id)
        for summary in item.get("summary") or ()
        if isinstance(summary, dict) and summary.get("text")
    ]
    if item.get("encrypted_content"):
        blocks.append(
            ThinkingBlock(redacted=item["encrypted_content"], provider=PROVIDER, id=item_id)
        )
    return blocks


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        input_tokens=data.get("input_tokens") or 0,
        output_tokens=data.get("output_tokens") or 0,
        cached_tokens=(data.get("input_tokens_details") or {}).get("cached_tokens") or 0,
        reasoning_tokens=(data.get("output_tokens_details") or {}).get("reasoning_tokens") or 0,
    )


def _finish(data: dict[str, Any], called: bool, refused: bool) -> FinishReason:
    status = data.get("status") or "completed"
    if status == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(str(reason), "other")
    if status != "completed":
        return "other"
    if refused:
        return "content_filter"
    return "tool_calls" if called else "stop"


def _answer(data: dict[str, Any], output: list[Any]) -> ModelResponse:
    text: list[str] = []
    refusal: list[str] = []
    thinking: list[ThinkingBlock] = []
    calls: list[ToolCall] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    text.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    refusal.append(part.get("refusal") or "")
        elif kind == "function_call":
            calls.append(read_call(item, "call_id", item.get("arguments") or ""))
        elif kind == "reasoning":
            thinking.extend(_thinking(item))
    content, refused = "".join(text), "".join(refusal)
    return ModelResponse(
        message=Message.assistant(content or refused, tool_calls=calls, thinking=thinking),
        usage=_usage(data.get("usage")),
        finish_reason=_finish(data, bool(calls), bool(refused and not content)),
        model_name=data.get("model") or "",
    )


def parse_response(data: Any) -> ModelResponse:
    """A Responses answer (a ``response`` object) as a :class:`ModelResponse`.

    A failed response raises the error it carries, as the HTTP error it stands for.
    """
    raise_for_error(data, PROVIDER)
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise unreadable_answer(data, "output list", PROVIDER)
    return _answer(data, data["output"])


class _EventAccumulator:
    """Deltas from the Responses stream events; the answer from its terminal event."""

    terminal = "response.completed"

    def __init__(self) -> None:
        self.items: dict[int, dict[str, Any]] = {}  # output_index -> the item as added
        self.done: dict[int, dict[str, Any]] = {}  # output_index -> the item as finished
        self.calls: dict[int, int] = {}  # output_index -> position among the calls
        self.text_chars = 0
        self.final: dict[str, Any] | None = None
        self.ended = False

    @property
    def complete(self) -> bool:
        return self.final is not None

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        data = event_data(event, PROVIDER)
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or event.event
        index = data.get("output_index")
        index = index if isinstance(index, int) else len(self.items)
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            piece = data.get("delta") or ""
            self.text_chars += len(piece)
            return [StreamDelta(kind="text", text=piece)] if piece else []
        if kind == "response.reasoning_summary_text.delta" and data.get("delta"):
            return [StreamDelta(kind="thinking", text=data["delta"])]
        if kind == "response.function_call_arguments.delta" and data.get("delta"):
            position = self.calls.setdefault(index, len(self.calls))
            return [StreamDelta(kind="tool_call", index=position, text=data["delta"])]
        if kind == "response.output_item.added":
            item = self.items[index] = data.get("item") or {}
            if item.get("type") == "function_call":
                position = self.calls.setdefault(index, len(self.calls))
                return [
                    StreamDelta(
                        kind="tool_call",
                        index=position,
                        call_id=item.get("call_id") or "",
                        name=item.get("name") or "",
                        text=item.get("arguments") or "",
                    )
                ]
        elif kind == "response.output_item.done":
            self.done[index] = data.get("item") or {}
        elif kind in ("response.completed", "response.incomplete"):
            self.final = data.get("response") or {}
            self.ended = True
        elif kind == "response.failed":
            response = data.get("response") or {}
            raise stream_error({"error": response.get("error") or {}}, PROVIDER)
        return []

    def progress(self) -> str:
        if self.items and max(self.items) not in self.done:
            item = self.items[max(self.items)]
            if item.get("type") == "function_call":
                return f"in the middle of tool call {item.get('name') or ''!r}"
            return f"in the middle of a {item.get('type') or 'output'} item"
        return f"after {self.text_chars} characters of text"

    def response(self) -> ModelResponse:
        final = self.final or {}
        # the terminal event carries the whole response; its finished items stand in if not
        output = final.get("output") or [item for _, item in sorted(self.done.items())]
        return _answer(final, output)
