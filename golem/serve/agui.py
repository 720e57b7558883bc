"""AG-UI 1.0 at ``POST /agents/{agent}/agui``: a ``RunAgentInput`` in, its events out (SSE).

``threadId`` is the golem conversation id (a new one starts a conversation); the user
messages past those the durable transcript holds are the turn's prompt. A turn that waits
for approvals ends its run with ``RUN_FINISHED`` whose outcome is an interrupt per waiting
call (the interrupt's id is the call id); the next input's ``resume`` answers them and the
same durable run goes on (``{"approved": true|false}``; status ``cancelled`` denies).

Frontend tools are the agent's client-run tools (``agent.external_tool``): the input's
``tools`` may name only those (the durable run's tools are the worker's agent's). A turn
that calls one ends its run with ``RUN_FINISHED`` (success) naming the calls in
``pendingToolCallIds``; the next input's trailing tool messages are their results, and
the same durable run goes on (with a ``resume`` too, when calls for a person wait beside
them). An input with no new message and nothing to answer is a reconnect:
``MESSAGES_SNAPSHOT`` of the transcript, then the rest of the turn in flight, if any.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from ag_ui.core import (
    PROTOCOL_VERSION,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import Message as AguiMessage
from ag_ui.core import ToolCall as AguiToolCall
from pydantic import ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from golem.client import DurableAgent
from golem.events import RunEvent
from golem.external import ExternalTool
from golem.ids import minted
from golem.messages import Message, ToolCall
from golem.serve.decisions import DECISION_SCHEMA, Decision
from golem.serve.errors import SEP, NoWorker, Problem, ended_code
from golem.serve.results import check_answers
from golem.serve.texts import OpenText
from golem.serve.threads import (
    Served,
    Thread,
    TurnEnd,
    Waiting,
    found_existing,
    no_worker_check,
    prompts_after,
    turn_events,
)
from golem.streaming import DurableRunStream
from golem.tools import ToolFailed

#: An interrupt's reason when a call waits for a person's approval.
APPROVAL = "tool_approval"
#: Events that arrived together are written together up to this many bytes.
MAX_WRITE = 64 * 1024


def agui_routes(served: Served) -> list[Route]:
    async def run(request: Request) -> Response:
        durable = served.agent(request.path_params["agent"])
        body = await served.body(request)
        subject = await served.subject(request)
        try:
            given = RunAgentInput.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise Problem(400, f"not a RunAgentInput: {where}: {first['msg']}") from None
        sent = _sent_first(served, durable.agent_name, given, subject)
        return EventSourceResponse(
            _events(served, durable.agent_name, given, subject, sent), ping=15, sep=SEP
        )

    return [Route("/agents/{agent}/agui", run, methods=["POST"])]


def _sse(event: BaseEvent) -> bytes:
    """The event as it goes out: encoded here, so an open stream holds bytes, not objects."""
    data = event.model_dump_json(by_alias=True, exclude_none=True)
    return ServerSentEvent(sep=SEP, data=data).encode()


class _First(NamedTuple):
    """A first turn's items, and the wait for the first, started as its request came."""

    items: AsyncGenerator[RunEvent | TurnEnd, None]
    head: asyncio.Future[RunEvent | TurnEnd]
    ready: Callable[[], bool]


def _sent_first(served: Served, agent: str, given: RunAgentInput, subject: str) -> _First | None:
    """The turn of an input that holds user messages only, sent now (``_first_turn``), before
    its response's stream is set up: when many requests come at once, each is sent once
    read, not once every other's response has started. ``None`` for any other input."""
    try:
        first = _first_turn(served, agent, given, subject)
    except Problem:  # said as the thread is: its prompt may be fewer of those messages
        return None
    if first is None:
        return None
    stream, durable = first
    items = turn_events(stream, no_worker_check(durable, stream.run_id))
    return _First(items, asyncio.ensure_future(anext(items)), stream.ready)


async def _events(
    served: Served, agent: str, given: RunAgentInput, subject: str, first: _First | None
) -> AsyncIterator[bytes]:
    thread_id, run_id = given.thread_id, given.run_id
    # The run starts once its input is read, before any call to Temporal returns: the
    # protocol lets a refusal found there follow as the run's RUN_ERROR.
    yield _sse(
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)
    )
    if first is not None:  # a new thread's, most likely: its turn starts its conversation
        items, head, ready = first
        item = await head
        del first, head
        if not found_existing(item):
            relayed = _relayed(Translator(thread_id, run_id), item, items, ready)
            del given, item  # an open stream holds what it relays, not the input
            async for sse in relayed:
                yield sse
            return
        await items.aclose()  # it started nothing: the thread is asked what it is
    try:
        thread = await served.thread(thread_id, subject, agent)
        plan = await _plan(thread, given)
    except Problem as exc:
        yield _sse(RunErrorEvent(message=exc.reason, code=exc.code))
        return
    # An open stream holds what it relays, not the input (the whole history a client sends
    # back) nor the thread's description.
    del given, thread
    translate = Translator(thread_id, run_id, plan.answered)
    if plan.snapshot is not None:
        snapshot, plan.snapshot = plan.snapshot, None  # sent once: not held while relaying
        yield _sse(MessagesSnapshotEvent(messages=to_agui_messages(snapshot)))
        del snapshot
    if plan.stream is None:
        for event in translate.end(TurnEnd(plan.turn, result=None), plan.waiting):
            yield _sse(event)
        return
    items = turn_events(plan.stream, plan.unserved)
    async for sse in _relayed(translate, await anext(items), items, plan.stream.ready):
        yield sse


async def _relayed(
    translate: Translator,
    first: RunEvent | TurnEnd,
    rest: AsyncIterator[RunEvent | TurnEnd],
    ready: Callable[[], bool],
) -> AsyncIterator[bytes]:
    """A turn's items (``first``, then ``rest``) as AG-UI events; those that arrived
    together (``ready``: the next item comes without a wait) go out in one write."""
    # Each item is let go once encoded: an open stream waits most of its life, and holds
    # the bytes it last sent then, not the objects they were made of.
    chunks, ended = _encoded(translate, first), isinstance(first, TurnEnd)
    del first
    while True:
        # A write costs the ASGI and HTTP layers (and a syscall) once, whatever its size.
        while not ended and ready() and sum(map(len, chunks)) < MAX_WRITE:
            item = await anext(rest)
            chunks += _encoded(translate, item)
            ended = isinstance(item, TurnEnd)
            del item
        if chunks:
            yield b"".join(chunks)
        if ended:
            return
        item = await anext(rest)
        chunks, ended = _encoded(translate, item), isinstance(item, TurnEnd)
        del item


def _encoded(translate: Translator, item: RunEvent | TurnEnd) -> list[bytes]:
    events = translate.end(item) if isinstance(item, TurnEnd) else translate.on(item)
    return [_sse(event) for event in events]


def _first_turn(
    served: Served, agent: str, given: RunAgentInput, subject: str
) -> tuple[DurableRunStream[Any], DurableAgent[Any]] | None:
    """The turn of an input that holds user messages only (a new thread's, but for a client
    that kept no answer), sent with its conversation's start: no call to Temporal before it.
    ``None`` for any other input, and for a thread id golem may have minted (a UUIDv7): it
    is asked first whether an inline turn holds that id, as a chat's is."""
    if given.resume or not all(isinstance(m, UserMessage) for m in given.messages):
        return None
    if minted(given.thread_id):  # maybe an inline turn's run id: no workflow holds it
        return None
    prompt = prompts_after([], [("user", _text(m)) for m in given.messages])
    if not prompt:
        return None
    thread = served.new_thread(given.thread_id, subject, agent)
    _check_tools(thread, given)
    return thread.send(prompt), thread.agent


class _Plan:
    """What one input asks of the thread: a stream to relay, a snapshot to send first."""

    def __init__(
        self,
        stream: Any = None,
        snapshot: list[Message] | None = None,
        waiting: Waiting | None = None,
        turn: str = "",
        answered: frozenset[str] = frozenset(),
        unserved: Callable[[], Awaitable[NoWorker | None]] | None = None,
    ) -> None:
        self.stream, self.snapshot, self.waiting, self.turn = stream, snapshot, waiting, turn
        self.answered = answered
        """The frontend tools' calls this input answers (the client holds their results)."""
        self.unserved = unserved
        """A new turn's: says when no worker polls for it (``turn_events``)."""


async def _plan(thread: Thread, given: RunAgentInput) -> _Plan:
    """Check the input against the thread (a ``Problem`` before anything is sent or
    changed in Temporal) and say what the run relays."""
    _check_tools(thread, given)
    waiting = await thread.waiting()
    transcript = await thread.messages()
    results = _results(given.messages, transcript)
    if given.resume or results:
        if waiting is None or not waiting.calls:
            raise Problem(
                409, f"thread {thread.id} waits for nothing: nothing to resume", "not_waiting"
            )
        decisions: dict[str, Decision] = {}
        for entry in given.resume or ():
            if entry.status == "cancelled":
                decisions[entry.interrupt_id] = {"approved": False}
            else:
                decisions[entry.interrupt_id] = _payload(entry.interrupt_id, entry.payload)
        check_answers(waiting, f"thread {thread.id}", decisions, results)
        stream = await thread.decide(waiting.run_id, decisions, results)
        return _Plan(stream, answered=frozenset(results))
    given_texts = [(m.role, _text(m)) for m in given.messages]
    prompt = prompts_after(transcript, given_texts, in_flight=waiting is not None)
    if not prompt:  # a reconnect: the transcript, then the rest of the turn in flight
        if waiting is not None and not waiting.calls:
            return _Plan(await thread.follow(waiting.run_id, 0), transcript)
        return _Plan(None, transcript, waiting, waiting.run_id if waiting is not None else "")
    if waiting is not None and waiting.approvals:
        ids = ", ".join(c.id for c in waiting.approvals)
        raise Problem(
            409, f"thread {thread.id} waits for decisions on {ids}: resume them first", "waiting"
        )
    if waiting is not None and waiting.client_calls:
        ids = ", ".join(c.id for c in waiting.client_calls)
        raise Problem(
            409,
            f"thread {thread.id} waits for the results of {ids}: send their tool messages first",
            "waiting",
        )
    stream = thread.send(prompt)  # checked before the conversation starts: a refusal starts none
    await thread.start()
    return _Plan(stream, unserved=no_worker_check(thread.agent, stream.run_id))


def _check_tools(thread: Thread, given: RunAgentInput) -> None:
    """The input's frontend tools must be the agent's client-run tools (when this app holds
    the agent): a durable run calls the tools its worker's agent declares, no others."""
    tools = thread.agent.tools
    if not tools or not given.tools:
        return
    declared = sorted(n for n, t in tools.items() if isinstance(t, ExternalTool))
    for tool in given.tools:
        if not isinstance(tools.get(tool.name), ExternalTool):
            agent = thread.agent.agent_name
            raise Problem(
                400,
                f"frontend tool {tool.name!r} is not a client-run tool of agent {agent!r} "
                f"(declare it with agent.external_tool; it has: {', '.join(declared) or 'none'})",
                "unknown_tool",
            )


def _results(messages: Sequence[AguiMessage], transcript: Sequence[Message]) -> dict[str, object]:
    """The frontend tools' results the input brings: its trailing tool messages (by call
    id), those the durable transcript already holds left out (a client sending them again)."""
    held = {m.tool_call_id for m in transcript if m.role == "tool"}
    trailing: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        trailing.insert(0, message)
    results: dict[str, object] = {}
    for message in trailing:
        if message.tool_call_id in held:
            continue
        text = _text(message)
        results[message.tool_call_id] = ToolFailed(message.error or text) if message.error else text
    return results


def _payload(call_id: str, payload: Any) -> Decision:
    if isinstance(payload, dict):
        return payload
    if isinstance(payload, bool):
        return {"approved": payload}
    raise Problem(
        400, f'the resume payload for interrupt {call_id!r} must be {{"approved": true|false}}'
    )


def _text(message: AguiMessage) -> str:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(getattr(part, "text", "") for part in content)
    return ""


class Translator:
    """A turn's ``RunEvent``s as AG-UI events, in the order the spec asks: a text message
    closes before a tool call starts, each call's start, arguments and end in turn."""

    def __init__(self, thread_id: str, run_id: str, answered: frozenset[str] = frozenset()) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.answered = answered  # frontend tools' results the client sent: it holds them
        self.texts: OpenText[BaseEvent] = OpenText(
            lambda key: TextMessageStartEvent(message_id=key, role="assistant"),
            lambda key: TextMessageEndEvent(message_id=key),
        )
        self.calls: dict[str, str] = {}  # call id -> "started" | "ended"
        self.indexes: dict[tuple[str, int, int], str] = {}  # (run, turn, index) -> call id

    def on(self, event: RunEvent) -> list[BaseEvent]:
        delta = event.delta
        if event.kind == "text_delta" and delta is not None and delta.text:
            out = self.texts.open(f"{event.run_id}-{event.turn}")
            return [
                *out,
                TextMessageContentEvent(message_id=self.texts.key or "", delta=delta.text),
            ]
        if event.kind == "tool_call_delta" and delta is not None:
            key = (event.run_id, event.turn, delta.index)
            call_id = self.indexes.setdefault(key, delta.call_id or f"{event.run_id}-{delta.index}")
            out = self.texts.close()
            if call_id not in self.calls:
                self.calls[call_id] = "started"
                out.append(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=delta.name))
            if delta.text:
                out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=delta.text))
            return out
        if event.kind == "model_end" and event.message is not None:
            return self._model_end(event)
        if event.kind == "tool_end" and event.call is not None and event.message is not None:
            call = event.call
            out = self.texts.close()  # a call announced by an earlier run of the thread stays so
            if call.id in self.answered:
                return out
            result = ToolCallResultEvent(
                message_id=f"{call.id}-result",
                tool_call_id=call.id,
                content=event.message.content,
                role="tool",
            )
            return [*out, result]
        if event.kind == "turn_restarted":
            restart = {"attempt": event.attempt, "model": event.model, "runId": event.run_id}
            return [*self.texts.close(), CustomEvent(name="golem.turn_restarted", value=restart)]
        return []

    def _model_end(self, event: RunEvent) -> list[BaseEvent]:
        assert event.message is not None
        message = event.message
        key = f"{event.run_id}-{event.turn}"
        out: list[BaseEvent] = []
        if message.content and key not in self.texts.texted:  # a model that did not stream its text
            out += self.texts.open(key)
            out.append(TextMessageContentEvent(message_id=key, delta=message.content))
        out += self.texts.close()
        for call in message.tool_calls:
            out += self._announce(call)
        return out

    def _announce(self, call: ToolCall) -> list[BaseEvent]:
        """A call's start (with all its arguments, if none streamed) and end, once."""
        out: list[BaseEvent] = []
        if call.id not in self.calls:
            out.append(ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name))
            if call.args:
                out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.args))
        if self.calls.get(call.id) != "ended":
            out.append(ToolCallEndEvent(tool_call_id=call.id))
        self.calls[call.id] = "ended"
        return out

    def end(self, end: TurnEnd, waiting: Waiting | None = None) -> list[BaseEvent]:
        """The run's last events: ``RUN_ERROR``, or ``RUN_FINISHED``: an interrupt per call
        that waits for a person; else success, with the turn's output or the frontend tools'
        calls left for the client (``pendingToolCallIds``)."""
        out = self.texts.close()
        if end.error is not None:
            message = getattr(end.error, "detail", None) or str(end.error)
            return [*out, RunErrorEvent(message=message, code=ended_code(end.error))]
        calls = waiting.approvals if waiting is not None else end.waiting
        frontend = waiting.client_calls if waiting is not None else end.calls
        for call in [*calls, *frontend]:  # a call that waits was announced, even on a reconnect
            if self.calls.get(call.id) != "ended":
                out += self._announce(call)
        ids = dict(thread_id=self.thread_id, run_id=self.run_id)
        if calls:
            interrupts = [
                Interrupt(
                    id=call.id,
                    reason=APPROVAL,
                    message=f"approve {call.name}({call.args})?",
                    tool_call_id=call.id,
                    response_schema=DECISION_SCHEMA,
                )
                for call in calls
            ]
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
            return [*out, RunFinishedEvent(**ids, outcome=outcome)]
        if frontend:
            pending = RunFinishedSuccessOutcome(pending_tool_call_ids=[c.id for c in frontend])
            return [*out, RunFinishedEvent(**ids, outcome=pending)]
        output = end.result.output if end.result is not None else None
        try:
            json.dumps(output)
        except TypeError:
            output = str(output)
        finished = RunFinishedEvent(**ids, result=output, outcome=RunFinishedSuccessOutcome())
        return [*out, finished]


def to_agui_messages(messages: Sequence[Message]) -> list[AguiMessage]:
    """A golem transcript as AG-UI messages (ids by position: the transcript only grows)."""
    out: list[AguiMessage] = []
    for index, message in enumerate(messages):
        ident = f"m{index}"
        if message.role == "user":
            out.append(UserMessage(id=ident, content=message.content))
        elif message.role == "assistant":
            calls = [
                AguiToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.args))
                for c in message.tool_calls
            ]
            out.append(
                AssistantMessage(
                    id=ident, content=message.content or None, tool_calls=calls or None
                )
            )
        elif message.role == "tool":
            out.append(
                ToolMessage(id=ident, content=message.content, tool_call_id=message.tool_call_id)
            )
    return out
