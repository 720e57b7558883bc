"""The Vercel AI SDK's UI message stream at ``POST /agents/{agent}/chat`` (``useChat``).

The request is ``useChat``'s body: its ``id`` is the golem conversation id, the user
message past those the transcript holds is the turn's prompt. A turn that waits ends its
message with a ``tool-approval-request`` per waiting call (the approval id is the call
id); the follow-up request, whose last assistant message carries the approval responses
(``addToolApprovalResponse``), continues the same durable run and the same message.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from golem.events import RunEvent
from golem.ids import new_id
from golem.messages import ToolCall
from golem.serve.decisions import Decision
from golem.serve.errors import SEP, NoWorker, Problem, ended_code
from golem.serve.results import check_answers
from golem.serve.texts import OpenText
from golem.serve.threads import (
    Served,
    Thread,
    TurnEnd,
    no_worker_check,
    prompts_after,
    turn_events,
)
from golem.streaming import DurableRunStream

#: The header that tells the SDK's reader this is a UI message stream.
HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "x-accel-buffering": "no"}

Chunk = dict[str, Any]


def chat_routes(served: Served) -> list[Route]:
    async def chat(request: Request) -> Response:
        durable = served.agent(request.path_params["agent"])
        body = await served.body(request)
        subject = await served.subject(request)
        chat_id, messages = body.get("id"), body.get("messages")
        if not isinstance(chat_id, str) or not isinstance(messages, list) or not messages:
            raise Problem(400, 'send useChat\'s body: {"id": "<chat id>", "messages": [...]}')
        if not all(isinstance(m, dict) and isinstance(m.get("parts"), list) for m in messages):
            raise Problem(400, "every message needs its parts (a list), as useChat sends them")
        thread = await served.thread(chat_id, subject, durable.agent_name)
        stream, message_id, denied, unserved = await _plan(thread, messages)
        chunks = _chunks(stream, message_id, denied, unserved)
        return EventSourceResponse(_sse(chunks), headers=HEADERS, ping=15, sep=SEP)

    return [Route("/agents/{agent}/chat", chat, methods=["POST"])]


async def _plan(
    thread: Thread, messages: list[dict[str, Any]]
) -> tuple[DurableRunStream[Any], str, set[str], Callable[[], Awaitable[NoWorker | None]] | None]:
    """The stream to relay, the id of the message it writes, the calls it denies, and for
    a new turn what says when no worker polls for it."""
    last = messages[-1]
    waiting = await thread.waiting()
    responses = _responses(last) if last.get("role") == "assistant" else {}
    if responses:
        waiting = check_answers(waiting, f"chat {thread.id}", responses)
        stream = await thread.decide(waiting.run_id, responses)
        denied = {call for call, d in responses.items() if not d.get("approved")}
        return stream, str(last.get("id") or new_id()), denied, None
    transcript = await thread.messages()
    prompt = prompts_after(transcript, [(str(m.get("role")), _text(m)) for m in messages])
    if not prompt:
        raise Problem(400, f"chat {thread.id}: no new user message and no approval response")
    if waiting is not None and waiting.calls:
        ids = ", ".join(c.id for c in waiting.calls)
        raise Problem(409, f"chat {thread.id} waits for approval of {ids}: answer that first")
    stream = thread.send(prompt)  # checked before the chat's conversation starts
    await thread.start()
    return stream, new_id(), set(), no_worker_check(thread.agent, stream.run_id)


def _responses(message: Mapping[str, Any]) -> dict[str, Decision]:
    """The approval responses an assistant message carries, by approval (call) id."""
    found: dict[str, Decision] = {}
    for part in message.get("parts", []):
        kind = str(part.get("type", "")) if isinstance(part, dict) else ""
        approval = part.get("approval") if isinstance(part, dict) else None
        if not (kind.startswith("tool-") or kind == "dynamic-tool"):
            continue
        if part.get("state") == "approval-responded" and isinstance(approval, dict):
            decision = {"approved": approval.get("approved")}
            if approval.get("reason"):
                decision["reason"] = approval["reason"]
            found[str(approval.get("id"))] = decision
    return found


def _text(message: Mapping[str, Any]) -> str:
    parts = message.get("parts", [])
    return "".join(
        str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


async def _sse(chunks: AsyncIterator[Chunk]) -> AsyncIterator[bytes]:
    """The chunks as they go out: encoded here, so an open stream holds bytes, not objects."""
    async for chunk in chunks:
        data = json.dumps(chunk)
        del chunk  # not held while the next is awaited: an open stream waits most of its life
        yield ServerSentEvent(sep=SEP, data=data).encode()
    yield ServerSentEvent(sep=SEP, data="[DONE]").encode()


async def _chunks(
    stream: DurableRunStream[Any],
    message_id: str,
    denied: set[str],
    unserved: Callable[[], Awaitable[NoWorker | None]] | None = None,
) -> AsyncIterator[Chunk]:
    translate = Translator(denied)
    yield {"type": "start", "messageId": message_id}
    async for item in turn_events(stream, unserved):
        chunks = translate.end(item) if isinstance(item, TurnEnd) else translate.on(item)
        del item  # not held while the next is awaited
        while chunks:
            yield chunks.pop(0)


class Translator:
    """A turn's ``RunEvent``s as UI message stream chunks: a step per model call, its text
    and tool input, each tool's output (or its denial), approval requests at a pause."""

    def __init__(self, denied: set[str]) -> None:
        self.denied = denied
        self.texts: OpenText[Chunk] = OpenText(
            lambda key: {"type": "text-start", "id": key},
            lambda key: {"type": "text-end", "id": key},
        )
        self.inputs: set[str] = set()  # calls whose input started
        self.indexes: dict[tuple[str, int, int], str] = {}
        self.stepping = False

    def on(self, event: RunEvent) -> list[Chunk]:
        delta = event.delta
        if event.kind == "model_start":
            self.stepping = True
            return [{"type": "start-step"}]
        if event.kind == "text_delta" and delta is not None and delta.text:
            key = f"{event.run_id}-{event.turn}"
            return [*self.texts.open(key), {"type": "text-delta", "id": key, "delta": delta.text}]
        if event.kind == "tool_call_delta" and delta is not None:
            key3 = (event.run_id, event.turn, delta.index)
            call_id = self.indexes.setdefault(
                key3, delta.call_id or f"{event.run_id}-{delta.index}"
            )
            out = self.texts.close()
            if call_id not in self.inputs:
                self.inputs.add(call_id)
                out.append(
                    {"type": "tool-input-start", "toolCallId": call_id, "toolName": delta.name}
                )
            if delta.text:
                out.append(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": call_id,
                        "inputTextDelta": delta.text,
                    }
                )
            return out
        if event.kind == "model_end" and event.message is not None:
            out = []
            key = f"{event.run_id}-{event.turn}"
            if event.message.content and key not in self.texts.texted:
                out += self.texts.open(key)
                out.append({"type": "text-delta", "id": key, "delta": event.message.content})
            out += self.texts.close()
            for call in event.message.tool_calls:
                out += self._input(call)
            return [*out, *self._finish_step()]
        if event.kind == "tool_end" and event.call is not None and event.message is not None:
            call_id = event.call.id
            if call_id in self.denied:
                return [{"type": "tool-output-denied", "toolCallId": call_id}]
            if event.message.failed:
                return [
                    {
                        "type": "tool-output-error",
                        "toolCallId": call_id,
                        "errorText": event.message.content,
                    }
                ]
            return [
                {
                    "type": "tool-output-available",
                    "toolCallId": call_id,
                    "output": event.message.content,
                }
            ]
        return []

    def _input(self, call: ToolCall) -> list[Chunk]:
        out: list[Chunk] = []
        if call.id not in self.inputs:
            self.inputs.add(call.id)
            out.append({"type": "tool-input-start", "toolCallId": call.id, "toolName": call.name})
        try:
            given: Any = json.loads(call.args or "{}")
        except ValueError:
            given = call.args  # the model's text, kept as it came
        out.append(
            {
                "type": "tool-input-available",
                "toolCallId": call.id,
                "toolName": call.name,
                "input": given,
            }
        )
        return out

    def _finish_step(self) -> list[Chunk]:
        if not self.stepping:
            return []
        self.stepping = False
        return [{"type": "finish-step"}]

    def end(self, end: TurnEnd, waiting: Sequence[ToolCall] = ()) -> list[Chunk]:
        out = [*self.texts.close(), *self._finish_step()]
        if end.error is not None:
            message = getattr(end.error, "detail", None) or str(end.error)
            # The error chunk carries text only: its code goes first, to useChat's onData.
            code = {"type": "data-golem-error", "data": {"code": ended_code(end.error)}}
            return [*out, {**code, "transient": True}, {"type": "error", "errorText": message}]
        for call in list(waiting) or end.waiting:
            out.append(
                {"type": "tool-approval-request", "approvalId": call.id, "toolCallId": call.id}
            )
        reason = "tool-calls" if end.waiting else "stop"
        return [*out, {"type": "finish", "finishReason": reason}]
