"""The REST half of ``golem serve``: conversations, their turns, events and decisions.

    POST /conversations                    {"agent": "refunds"} -> 201 {"id": ...}
    GET  /conversations                    the newest conversations (mine, with auth)
    GET  /conversations/{id}               transcript, what waits, its turns
    POST /conversations/{id}/messages      {"text": "..."} -> 202 {"runId": ...}
    GET  /conversations/{id}/events        SSE of the turn in flight (Last-Event-ID resumes)
    POST /conversations/{id}/decisions     {"decisions": {call_id: {"approved": true}}}
                                           (Accept: text/event-stream: what the run does next)
    POST /conversations/{id}/tool-results  {"results": {call_id: {"result": ...}}} (client-run
                                           tools' calls; {"error": "why"} fails one; as above)
    POST /conversations/{id}/close
    GET  /pending                          every call that waits for a person (mine)

The events are the turn's, from its first run on: a turn that hands over goes on with the
events of the run it was handed to. An event's id is ``<run id>:<offset>`` (the run of the
turn whose stream holds it), followed, while runs it delegated to may still stream, by
``.<position>``: where the reader stood in each of their streams (base64url JSON, opaque
to a client); a reader that reconnects with ``Last-Event-ID`` gets the rest of that turn,
each event once, a delegate's too. The turn's last event is ``waiting`` (the calls it
waits for, each of ``kind`` approval or result), ``result`` or ``failed``, with id
``<run id>:end``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import Field, StrictStr, TypeAdapter
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from golem.client.inbox import pending as inbox
from golem.client.lookups import list_conversations
from golem.events import RunEvent
from golem.external import ExternalTool
from golem.messages import Message, ToolCall, dump_messages
from golem.serve.decisions import decision
from golem.serve.errors import SEP, Problem
from golem.serve.results import check_answers, tool_result
from golem.serve.threads import Served, Thread, TurnEnd, Waiting, turn_events
from golem.streaming import DurableRunStream
from golem.tools import Tool

#: The offset part of a turn's last event id.
END = "end"
_EVENT = TypeAdapter(RunEvent)
#: An event id's ``.<position>``: each run below, its agent, where the reader stood in it.
_POSITION = TypeAdapter(list[tuple[StrictStr, StrictStr, Annotated[int, Field(strict=True, ge=0)]]])
#: An agent's tools by name (empty when the app knows the agent by name only).
Tools = Mapping[str, Tool]
NO_TOOLS: Tools = MappingProxyType({})


def messages_json(messages: list[Message]) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(dump_messages(messages))
    return loaded


def call_json(
    call: ToolCall, run_id: str, served: Served, kind: str = "approval", tools: Tools = NO_TOOLS
) -> dict[str, Any]:
    """A waiting call; ``kind``: ``approval`` (a person decides) or ``result`` (a client-run
    tool's: the application answers with its result, matching ``resultSchema`` when its
    tool, among ``tools``, declares one)."""
    entry: dict[str, Any] = {
        "id": call.id,
        "name": call.name,
        "args": call.args,
        "kind": kind,
        "runId": run_id,
        "link": served.link(run_id),
    }
    tool = tools.get(call.name)
    if kind == "result" and isinstance(tool, ExternalTool) and tool.result_schema is not None:
        entry["resultSchema"] = tool.result_schema
    return entry


def waiting_json(waiting: Waiting | None, served: Served, tools: Tools) -> list[dict[str, Any]]:
    if waiting is None:
        return []
    return [
        call_json(
            c, waiting.run_id, served, "result" if c.id in waiting.external else "approval", tools
        )
        for c in waiting.calls
    ]


#: How long the inbox waits for one conversation's worker to say what it waits for.
ASKED_FOR = 5.0


async def _waiting_somewhere(served: Served) -> set[str] | None:
    """The conversations a run (or the conversation itself) waits in, from visibility
    (``GolemWaiting``): the inbox asks only those. ``None`` where the namespace lacks it."""
    try:
        return {call.conversation_id for call in await inbox(served.client)}
    except LookupError:
        return None


def rest_routes(served: Served) -> list[Route]:
    async def create(request: Request) -> Response:
        body = await served.body(request)
        agent = body.get("agent")
        if not isinstance(agent, str) or not agent:
            raise Problem(400, 'send {"agent": "<name>"}: the agent the conversation talks to')
        given = body.get("id")
        if given is not None and not isinstance(given, str):
            raise Problem(400, f'"id" must be a string, not {given!r}')
        durable = served.agent(agent)
        subject = await served.subject(request)
        if given:  # an id in use, whoever's it is, is refused without saying whose
            try:
                await served.thread(given, subject)
            except Problem as exc:
                if exc.status != 404 or "not a conversation" in exc.reason:
                    raise
            else:
                raise Problem(409, f"conversation {given!r} exists already")
        conversation = await durable.conversation(
            given or None, owner=subject, inline_turns=served.inline_turns
        )
        return JSONResponse({"id": conversation.id, "agent": agent}, status_code=201)

    async def listing(request: Request) -> Response:
        owner = served.owner(await served.subject(request))
        found = await list_conversations(served.client, agents=sorted(served.agents), owner=owner)
        return JSONResponse(
            {
                "conversations": [
                    {
                        "id": c.conversation_id,
                        "agent": c.agent,
                        "status": c.status,
                        "startTime": c.start_time.isoformat() if c.start_time else None,
                        "link": served.link(c.conversation_id),
                    }
                    for c in found
                ]
            }
        )

    async def thread(request: Request) -> Thread:
        subject = await served.subject(request)
        return await served.thread(request.path_params["id"], subject)

    async def read(request: Request) -> Response:
        found = await thread(request)
        waiting = await found.waiting()
        return JSONResponse(
            {
                "id": found.id,
                "agent": found.agent.agent_name,
                "status": found.info.status if found.info else "unknown",
                "messages": messages_json(await found.messages()),
                "turn": waiting.run_id if waiting is not None else None,
                "prompt": await found.prompt(waiting.run_id) if waiting is not None else None,
                "waiting": waiting_json(waiting, served, found.agent.tools),
                "link": served.link(found.id),
            }
        )

    async def send(request: Request) -> Response:
        found = await thread(request)
        body = await served.body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise Problem(400, 'send {"text": "..."} with a non-empty text')
        waiting = await found.waiting()
        if waiting is not None and waiting.calls:
            ids = ", ".join(c.id for c in waiting.calls)
            raise Problem(409, f"conversation {found.id} waits for answers on {ids}")
        run_id = await found.begin(text, served.in_flight)
        events = f"/conversations/{found.id}/events"
        return JSONResponse(
            {"runId": run_id, "events": events, "link": served.turn_link(run_id, found.id)},
            status_code=202,
        )

    async def events(request: Request) -> Response:
        found = await thread(request)
        last = request.headers.get("last-event-id") or request.query_params.get("after", "")
        below: dict[str, tuple[str, int]] = {}
        if last:
            run_id, sep, at = last.rpartition(":")
            at, _, position = at.partition(".")
            if at == END:
                return Response(status_code=204)  # the reader has the turn's last event
            if not sep or not at.isdigit():
                raise Problem(400, f"Last-Event-ID must be <run id>:<offset>, not {last!r}")
            below = unpacked(position, last)
            turn = await found.conversation.turn_of(run_id)
            if not turn:
                raise Problem(404, f"run {run_id!r} is not a turn of conversation {found.id}")
            offset = int(at)
        else:
            waiting = await found.waiting()
            latest = waiting.run_id if waiting is not None else None
            # From the turn's first run: a handed-over turn's latest run is its target's.
            turn = await found.conversation.turn_of(latest) or {latest or "": ""}
            run_id, offset = next(iter(turn)), 0
            if not run_id:
                return Response(status_code=204)  # no turn yet: nothing to follow
        stream = await found.follow(run_id, offset, turn[run_id], below)
        tools = found.agent.tools
        events = relay(stream, run_id, served, tools, found.handed_to)
        return EventSourceResponse(events, ping=15, sep=SEP)

    async def decide(request: Request) -> Response:
        return await answered(request, "decisions", '{"approved": true}')

    async def answered(request: Request, key: str, shape: str) -> Response:
        """The waiting turn, answered by the body's ``decisions`` or ``results`` (``key``)."""
        found = await thread(request)
        body = await served.body(request)
        given = body.get(key)
        if not isinstance(given, dict) or not given:
            raise Problem(400, f'send {{"{key}": {{"<call id>": {shape}}}}}')
        wants_decisions = key == "decisions"
        decisions = (
            {str(k): decision(str(k), v) for k, v in given.items()} if wants_decisions else {}
        )
        results = (
            {} if wants_decisions else {str(k): tool_result(str(k), v) for k, v in given.items()}
        )
        where = f"conversation {found.id}"
        waiting = check_answers(await found.waiting(), where, decisions=decisions, results=results)
        stream = await found.decide(waiting.run_id, decisions, results)
        return await answer(request, stream, waiting, found)

    async def answer(
        request: Request, stream: DurableRunStream[Any], waiting: Waiting, found: Thread
    ) -> Response:
        """What the run does next: as SSE (``Accept: text/event-stream``), or its end."""
        tools = found.agent.tools
        if "text/event-stream" in request.headers.get("accept", ""):
            events = relay(stream, waiting.run_id, served, tools, found.handed_to)
            return EventSourceResponse(events, ping=15, sep=SEP)
        end: TurnEnd | None = None
        async for item in turn_events(stream):
            if isinstance(item, TurnEnd):
                end = item
        assert end is not None
        return JSONResponse(json.loads(end_event(end, waiting.run_id, served, tools).data or "{}"))

    async def close(request: Request) -> Response:
        found = await thread(request)
        await found.conversation.close()
        return JSONResponse({"id": found.id, "status": "closed"})

    async def pending(request: Request) -> Response:
        subject = await served.subject(request)
        owner = served.owner(subject)
        found = await list_conversations(served.client, agents=sorted(served.agents), owner=owner)
        waits = await _waiting_somewhere(served)
        calls, unreachable = [], []
        for listed in found:
            if listed.status != "running" or (
                waits is not None and listed.conversation_id not in waits
            ):
                continue
            try:  # a conversation whose worker is gone fails its query: named, not a 500
                listed_thread = await served.thread(listed.conversation_id, subject)
                waiting = await asyncio.wait_for(listed_thread.waiting(), ASKED_FOR)
            except (RPCError, WorkflowQueryFailedError, TimeoutError) as exc:
                why = str(exc) or f"no answer within {ASKED_FOR:g} s"
                error = f"it waits, but its worker does not answer for it: {why}"
                unreachable.append({"conversationId": listed.conversation_id, "error": error})
                continue
            for entry in waiting_json(waiting, served, listed_thread.agent.tools):
                calls.append({**entry, "conversationId": listed.conversation_id})
        return JSONResponse({"pending": calls, "unreachable": unreachable})

    async def tool_results(request: Request) -> Response:
        return await answered(request, "results", '{"result": ...}')

    return [
        Route("/conversations", create, methods=["POST"]),
        Route("/conversations", listing, methods=["GET"]),
        Route("/conversations/{id}", read, methods=["GET"]),
        Route("/conversations/{id}/messages", send, methods=["POST"]),
        Route("/conversations/{id}/events", events, methods=["GET"]),
        Route("/conversations/{id}/decisions", decide, methods=["POST"]),
        Route("/conversations/{id}/tool-results", tool_results, methods=["POST"]),
        Route("/conversations/{id}/close", close, methods=["POST"]),
        Route("/pending", pending, methods=["GET"]),
    ]


async def relay(
    stream: DurableRunStream[Any],
    run_id: str,
    served: Served,
    tools: Tools = NO_TOOLS,
    handed: Callable[[str], Awaitable[bool]] | None = None,
) -> AsyncIterator[bytes]:
    """A turn's events as SSE (id ``<run id>:<offset>``), then its last event; encoded
    here, so an open stream holds the bytes it last sent, not the objects they came from.
    ``handed``: whether a run the stream of run ``run_id`` names is one the turn was
    handed over to (its events' ids name it), not a delegate."""
    ids = _EventIds(stream, run_id, handed)
    async for item in turn_events(stream):
        if isinstance(item, TurnEnd):
            yield end_event(item, run_id, served, tools).encode()
            return
        data = _EVENT.dump_json(item, by_alias=True, exclude_defaults=True).decode()
        ident = await ids.of(item, *stream.read_from)
        sse = ServerSentEvent(sep=SEP, data=data, event=item.kind, id=ident).encode()
        del item  # not held while the next is awaited: an open stream waits most of its life
        yield sse


class _EventIds:
    """Each event's id: ``<run id>:<offset>`` of the run of the turn whose stream holds it
    (the run followed, or one the turn was handed over to), where a reader resumes from;
    a delegate's event has the offset of the last event of the turn's own runs before it.
    Then, while runs below may still stream, ``.<position>``: where the reader stood in
    each (``DurableRunStream.resume_below``), so a resume repeats and loses none of their
    events."""

    def __init__(
        self,
        stream: DurableRunStream[Any],
        run_id: str,
        handed: Callable[[str], Awaitable[bool]] | None,
    ) -> None:
        self.stream = stream
        self.followed = self.root = run_id  # root: the turn's run the id names
        self.last = f"{run_id}:{stream.offset}"
        self.handed = handed
        self.turns: dict[str, bool] = {}  # a run the stream named -> whether it is the turn's

    async def of(self, event: RunEvent, source: str, offset: int) -> str:
        if source == self.followed:  # inline, the turn's runs share it: each item names its run
            self.root, self.last = source, f"{event.run_id}:{offset}"
        elif self.handed is not None:
            if source not in self.turns:
                self.turns[source] = await self.handed(source)
            if self.turns[source]:
                self.root, self.last = source, f"{source}:{offset}"
        below = self.stream.resume_below(self.root)
        return f"{self.last}.{packed(below)}" if below else self.last


def packed(below: Mapping[str, tuple[str, int]]) -> str:
    """The runs below and where a reader stood in each, as an event id's ``.<position>``."""
    listed = [[run_id, agent, offset] for run_id, (agent, offset) in below.items()]
    text = json.dumps(listed, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


def unpacked(position: str, last: str) -> dict[str, tuple[str, int]]:
    """``packed``'s runs again (none for an id without them); 400 for one it did not make."""
    if not position:
        return {}
    try:
        text = base64.urlsafe_b64decode(position + "=" * (-len(position) % 4))
        listed = _POSITION.validate_json(text)
    except (binascii.Error, ValueError):
        raise Problem(400, f"Last-Event-ID {last!r} names no position this server gave") from None
    return {run_id: (agent, offset) for run_id, agent, offset in listed}


def end_event(
    end: TurnEnd, run_id: str, served: Served, tools: Tools = NO_TOOLS
) -> ServerSentEvent:
    """A turn's last event: what it waits for, its result, or why it failed."""
    rid = end.run_id or run_id
    ident = f"{rid}:{END}"
    if end.error is not None:
        stage = getattr(end.error, "stage", "refused")
        message = getattr(end.error, "detail", None) or str(end.error)
        data = {"status": "failed", "runId": rid, "stage": stage, "message": message}
        return ServerSentEvent(sep=SEP, data=json.dumps(data), event="failed", id=ident)
    result = end.result
    assert result is not None
    if end.waiting or end.calls:
        calls = [call_json(c, rid, served) for c in end.waiting]
        calls += [call_json(c, rid, served, "result", tools) for c in end.calls]
        data = {"status": "waiting", "runId": rid, "waiting": calls}
        return ServerSentEvent(sep=SEP, data=json.dumps(data), event="waiting", id=ident)
    output = result.output
    try:
        json.dumps(output)
    except TypeError:
        output = str(output)
    link = served.turn_link(rid, result.conversation_id)
    data = {"status": "done", "runId": rid, "output": output, "link": link}
    return ServerSentEvent(sep=SEP, data=json.dumps(data), event="result", id=ident)
