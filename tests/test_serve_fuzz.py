# ruff: noqa: E501  (the bodies are tables: one body per line)
"""golem serve meets generated bad input (arbitrary bytes and JSON, mutations of valid
AG-UI, useChat and REST bodies, odd path ids) with a 4xx stating the problem in one line
or a protocol's error event with a code, never a 500, a hang, a dropped connection or a
silent stream; a request it refuses changes nothing in Temporal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from json_places import REMOVE, changed, places
from serve_support import refunds
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_serve_rest import parse
from waiting import eventually

from golem.client import DurableAgent
from golem.serve import create_app
from golem.worker import GolemPlugin

LIMIT = 64 * 1024
"""The app's body bound (small: bodies near it stay cheap to generate)."""
#: The update a workflow stream's reader long-polls with.
POLL = "__temporal_workflow_stream_poll"
BOUND = 30.0
"""Seconds one request may take before it counts as a hang."""
FUZZ = settings(
    max_examples=25,  # per shape of conversation
    deadline=None,
    derandomize=True,  # CI runs the same examples each time: a failure is a finding, not luck
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- the world the requests name ------------------------------------------------------------


@dataclass
class World:
    """The app, and conversations a request may name: ``waiting`` (its turn waits for a
    decision on refund-42, ``turn``), ``closed`` (its turn done), ``run`` (a run's id)."""

    client: Client
    http: httpx.AsyncClient
    waiting: str = ""
    turn: str = ""
    closed: str = ""
    run: str = ""
    taken: str = ""
    """The last request that was not refused (what may still be changing in Temporal)."""
    task_queue: str = ""
    started: set[str] = field(default_factory=set)
    """The ids of workflows requests that were not refused may have started."""

    def names(self, new: str) -> dict[str, str]:
        return {
            "@waiting": self.waiting,
            "@turn": self.turn,
            "@closed": self.closed,
            "@run": self.run,
            "@new": new,
            "@agent": refunds.name,
        }

    async def converse(self, text: str) -> tuple[str, str]:
        """A new conversation and its turn's run id, once the turn has ended or waits."""
        created = await self.http.post("/conversations", json={"agent": refunds.name})
        conversation = created.json()["id"]
        sent = await self.http.post(f"/conversations/{conversation}/messages", json={"text": text})
        events = parse((await self.http.get(f"/conversations/{conversation}/events")).text)
        assert events[-1]["event"] in ("waiting", "result"), events
        turn = sent.json()["runId"]
        self.started.add(conversation)
        await eventually(lambda: self.settled(conversation, turn), what="the turn to settle")
        return conversation, turn

    async def settled(self, *workflow_ids: str) -> bool:
        """Whether the workflows have no task nor activity pending: their histories rest
        (a refused request must leave them as they were)."""
        for workflow_id in workflow_ids:
            handle = self.client.get_workflow_handle(workflow_id)
            try:
                raw = (await handle.describe()).raw_description
            except RPCError as exc:  # a turn run inline is no workflow of its own
                if exc.status == RPCStatusCode.NOT_FOUND:
                    continue
                raise
            if raw.HasField("pending_workflow_task") or raw.pending_activities:
                return False
        return True

    async def refresh(self) -> None:
        """A new waiting conversation when a request took the old one's turn on."""
        read = await self.http.get(f"/conversations/{self.waiting}")
        if [c["id"] for c in read.json()["waiting"]] != ["refund-42"]:
            self.waiting, self.turn = await self.converse("Refund order 42")

    async def stop(self) -> None:
        """Terminate what the examples left running: later tests list the namespace's
        conversations, and would ask these with no worker left to answer."""
        query = f'TaskQueue = "{self.task_queue}" AND ExecutionStatus = "Running"'
        listed = {w.id async for w in self.client.list_workflows(query)}
        for workflow_id in self.started | listed:
            with contextlib.suppress(Exception):  # ended already, or an id Temporal refuses
                await self.client.get_workflow_handle(workflow_id).terminate("the test is over")

    async def footprint(self, workflow_id: str) -> tuple[str, ...] | None:
        """What the workflow's history records, less its workflow tasks and the stream's
        long polls (an earlier request's reader may end its poll at any time); ``None``
        when there is no workflow by that id (or the id is none Temporal takes)."""
        try:
            history = await self.client.get_workflow_handle(workflow_id).fetch_history()
        except Exception:
            return None
        polls, kept = set(), []
        for item in history.events:
            kind = item.WhichOneof("attributes") or ""
            accepted = item.workflow_execution_update_accepted_event_attributes
            if accepted.accepted_request.input.name == POLL:
                polls.add(accepted.accepted_request.meta.update_id)
            elif item.workflow_execution_update_completed_event_attributes.meta.update_id in polls:
                continue
            elif not kind.startswith("workflow_task_"):
                kept.append(kind)
        return tuple(kept)


@pytest.fixture(scope="module", params=["child runs", "inline"])
async def world(
    temporal_env: WorkflowEnvironment, request: pytest.FixtureRequest
) -> AsyncIterator[World]:
    """The world, once with conversations whose turns are child runs, once inline."""
    client = temporal_env.client
    task_queue = f"fuzz-{uuid.uuid4().hex[:8]}"
    inline = request.param == "inline"
    app = create_app(
        client, [refunds], task_queue=task_queue, max_body_bytes=LIMIT, inline_turns=inline
    )
    plugin = GolemPlugin(refunds, heartbeat_timeout=timedelta(seconds=5))
    # App exceptions are raised, not turned into a 500: a crash mid-stream (a dropped
    # connection to a real client) fails the example too.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
    async with (
        Worker(client, task_queue=task_queue, plugins=[plugin]),
        httpx.AsyncClient(transport=transport, base_url="http://golem", timeout=BOUND) as http,
    ):
        world = World(client, http, task_queue=task_queue)
        world.waiting, world.turn = await world.converse("Refund order 42")
        world.closed, _ = await world.converse("Refund order 7 for 30")
        await http.post(f"/conversations/{world.closed}/close")
        durable = DurableAgent(client, refunds, task_queue=task_queue)
        world.run = (await durable.run("Refund order 5 for 10")).run_id
        try:
            yield world
        finally:
            await world.stop()


# -- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """One request: ``path`` and ``body`` may hold the world's names (``@waiting``...),
    filled in when it is sent; ``kind`` says how a 200 is judged."""

    method: str
    path: str
    body: Any = None
    raw: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    kind: str = "json"
    ids: tuple[str, ...] = field(default=())
    """The path's conversation id (before quoting), a conversation a request may start."""

    def __repr__(self) -> str:  # a failing example is read by a person: long bodies cut
        body = self.raw if self.raw is not None else self.body
        return f"Ask({self.method} {self.path} {self.headers} {self.kind} body={body!r:.400})"


def fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, real in names.items():
            value = value.replace(name, real)
        return value
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    if isinstance(value, dict):
        return {fill(k, names): fill(v, names) for k, v in value.items()}
    return value


def user(text: str, ident: str = "u1") -> dict[str, Any]:
    return {"id": ident, "role": "user", "content": text}


def chat_user(text: str, ident: str = "m1") -> dict[str, Any]:
    return {"id": ident, "role": "user", "parts": [{"type": "text", "text": text}]}


APPROVAL = {"approved": False, "reason": "not today"}
AGUI = "/agents/@agent/agui"
CHAT = "/agents/@agent/chat"
#: Valid bodies (each names an endpoint, a path, a body, how its 200 is judged).
VALID: list[tuple[str, str, Any, str]] = [
    ("POST", AGUI, {"threadId": "@new", "runId": "r1", "messages": [user("Refund order 9 for 20")], "state": {}, "tools": [], "context": [], "forwardedProps": {}}, "agui"),
    ("POST", AGUI, {"threadId": "@waiting", "runId": "r2", "messages": [user("Refund order 42")], "resume": [{"interruptId": "refund-42", "status": "resolved", "payload": APPROVAL}]}, "agui"),
    ("POST", AGUI, {"threadId": "@waiting", "runId": "r3", "messages": [user("Refund order 42")]}, "agui"),
    ("POST", AGUI, {"threadId": "@waiting", "runId": "r4", "messages": [user("Refund order 42"), {"id": "a1", "role": "assistant", "toolCalls": [{"id": "refund-42", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]}, {"id": "t1", "role": "tool", "toolCallId": "refund-42", "content": "done"}]}, "agui"),
    ("POST", AGUI, {"threadId": "@closed", "runId": "r5", "messages": [user("Refund order 7 for 30")], "resume": [{"interruptId": "refund-7", "status": "cancelled"}]}, "agui"),
    ("POST", CHAT, {"id": "@waiting", "messages": [chat_user("Refund order 42"), {"id": "a1", "role": "assistant", "parts": [{"type": "tool-refund", "toolCallId": "refund-42", "state": "approval-responded", "input": {"order": 42, "amount": 150}, "approval": {"id": "refund-42", **APPROVAL}}]}]}, "chat"),
    ("POST", CHAT, {"id": "@waiting", "messages": [chat_user("Refund order 42"), chat_user("and more", "m2")]}, "chat"),
    ("POST", CHAT, {"id": "@new", "messages": [chat_user("Refund order 9 for 20")]}, "chat"),
    ("POST", "/conversations", {"agent": "@agent", "id": "@new"}, "json"),
    ("POST", "/conversations/@waiting/messages", {"text": "more"}, "json"),
    ("POST", "/conversations/@closed/messages", {"text": "more"}, "json"),
    ("POST", "/conversations/@waiting/decisions", {"decisions": {"refund-42": {"approved": True, "args": {"order": 42, "amount": 5}}}}, "json"),
    ("POST", "/conversations/@waiting/tool-results", {"results": {"refund-42": {"result": "x"}}}, "json"),
    ("POST", "/conversations/@closed/decisions", {"decisions": {"refund-7": True}}, "json"),
]  # fmt: skip
#: Endpoints without a body: their path (and a header) is what varies.
BODILESS: list[tuple[str, str, str]] = [
    ("GET", "/conversations/@id", "json"),
    ("GET", "/conversations/@id/events", "events"),
    ("POST", "/conversations/@id/close", "json"),
]

ODD_IDS = [
    "", " ", "a b", "a/b", "a:b", "..", "../..", "x" * 201, "x" * 5000, "\ud800", "é字🌧",
    "\x00", "a\nb", "%2F", "?x=1", "#", "@run", "@turn", "@closed", "@waiting", "@new",
    "@turn:0", "@closed/../@waiting",
]  # fmt: skip
odd_ids = st.sampled_from(ODD_IDS) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and Infinity too: Python's json writes and reads them as literals
    | odd_ids
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_ids, inner, max_size=3)
)
OTHER_TYPES: list[Any] = [None, True, 0, -1, 2**64, 1.5, math.nan, math.inf, "", "x", [], {}, [{}], {"x": None}]  # fmt: skip
DEEP = b"[" * 3000 + b"]" * 3000
RAW = [
    b"", b"null", b"[]", b"{", b"}", b"NaN", b'{"a": NaN}', b'{"threadId": Infinity}',
    b'"\\ud800"', b'{"text": "\\udc00"}', b'{"id": "\\ud83d", "messages": []}', b"\xff\xfe\x00",
    b"text=hi&agent=refunds", DEEP, b'{"a": ' + DEEP + b"}", b"{" * 3000,
]  # fmt: skip
CONTENT_TYPES = ["application/json", "text/plain", "", "multipart/form-data; boundary=x"]


def near_the_bound(size: int) -> bytes:
    """A JSON object of ``size`` bytes: a string near the body bound."""
    return b'{"text": "' + b"x" * max(0, size - 12) + b'"}'


raw_bodies = (
    st.binary(max_size=40)
    | st.sampled_from(RAW)
    | st.integers(LIMIT - 4, LIMIT + 4).map(near_the_bound)
    | json_values.map(lambda v: json.dumps(v).encode())
)


@st.composite
def mutations(draw: st.DrawFn, valid: Any) -> Any:
    """``valid`` with one place replaced, retyped, removed, or given an unknown field."""
    at = draw(st.sampled_from(places(valid)))
    how = draw(st.sampled_from(["replace", "retype", "remove", "unknown"]))
    if how == "replace":
        new = draw(json_values)
        return changed(valid, at, lambda old: new)
    if how == "retype":
        new = draw(st.sampled_from(OTHER_TYPES))
        return changed(valid, at, lambda old: new if type(new) is not type(old) else [old])
    if how == "remove" and at:
        return changed(valid, at, lambda old: REMOVE)
    key, new = draw(odd_ids), draw(json_values)
    return changed(valid, at, lambda old: {**old, key: new} if isinstance(old, dict) else old)


@st.composite
def asks(draw: st.DrawFn, endpoints: str) -> Ask:
    """A request to one of ``endpoints`` (``agui``, ``chat``, ``rest``)."""
    bodied = [v for v in VALID if endpoint_of(v[1]) == endpoints]
    bodiless = [b for b in BODILESS if endpoints == "rest"]
    if bodiless and draw(st.booleans()):
        method, template, kind = draw(st.sampled_from(bodiless))
        given = draw(st.sampled_from(["@waiting", "@closed", "@run", "@turn", "@new"]) | odd_ids)
        headers: tuple[tuple[str, str], ...] = ()
        if kind == "events":
            last = draw(
                st.sampled_from(["@turn:0", "@turn:end", "@turn:99999", "@run:0", "@turn:-1"])
                | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
            )
            headers = (("last-event-id", last),)
        return Ask(method, template, headers=headers, kind=kind, ids=(given,))
    method, path, valid, kind = draw(st.sampled_from(bodied))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    headers = (("content-type", content_type),) if content_type else ()
    agent = draw(st.sampled_from(["@agent"] * 8 + ["nobody", "", "a/b", "refunds "]))
    path = path.replace("@agent", agent if agent == "@agent" else quote(agent, safe=""))
    body_kind = draw(st.sampled_from(["mutated"] * 6 + ["raw", "json"]))
    if body_kind == "raw":
        return Ask(method, path, raw=draw(raw_bodies), headers=headers, kind=kind)
    body = draw(mutations(valid)) if body_kind == "mutated" else draw(json_values)
    return Ask(method, path, body=body, headers=headers, kind=kind)


def endpoint_of(path: str) -> str:
    return "agui" if path == AGUI else "chat" if path == CHAT else "rest"


# -- judging an answer ---------------------------------------------------------------------------


def seen(outcome: str) -> None:
    """Counted among the examples' outcomes (pytest --hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(outcome)


def one_line_problem(answer: httpx.Response) -> None:
    """A 4xx says what is wrong in one line, in the project's shape."""
    problem = answer.json()
    assert set(problem) == {"error", "code"}, problem
    assert problem["error"] and "\n" not in problem["error"], problem
    assert problem["code"] and isinstance(problem["code"], str), problem


def agui_refused(answer: httpx.Response) -> bool:
    """The stream ends with RUN_FINISHED, or RUN_ERROR with a code; whether it was refused
    (RUN_ERROR right after RUN_STARTED)."""
    events = [json.loads(e["data"]) for e in parse(answer.text)]
    types = [e["type"] for e in events]
    assert types and types[0] == "RUN_STARTED", types
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR"), types
    seen(f"AG-UI {types[-1]} {events[-1].get('code', '')}: {events[-1].get('message', '')[:40]}")
    if types[-1] == "RUN_ERROR":
        assert events[-1].get("code") and "\n" not in events[-1]["message"], events[-1]
    return types == ["RUN_STARTED", "RUN_ERROR"]


def chat_ended(answer: httpx.Response) -> None:
    """The stream starts, ends with ``finish`` or ``error``, then ``[DONE]``."""
    data = [e["data"] for e in parse(answer.text)]
    assert data[-1] == "[DONE]", data
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[0]["type"] == "start" and chunks[-1]["type"] in ("finish", "error"), chunks


def events_ended(answer: httpx.Response) -> None:
    events = parse(answer.text)
    assert events and events[-1]["event"] in ("waiting", "result", "failed"), events


async def check(world: World, ask: Ask) -> None:
    names = world.names(f"fuzz-{uuid.uuid4().hex}")
    path, body = fill(ask.path, names), fill(ask.body, names)
    for named_id in ask.ids:  # quoted once filled in: "/" and "?" in an id stay in its segment
        path = path.replace("@id", quote(fill(named_id, names), safe="", errors="surrogatepass"))
    content = (
        ask.raw if ask.raw is not None else None if body is None else json.dumps(body).encode()
    )
    headers = {k: fill(v, names) for k, v in ask.headers}
    named = {*names.values(), *(fill(i, names) for i in ask.ids)}
    if isinstance(body, dict):
        named |= {v for k, v in body.items() if k in ("threadId", "id") and isinstance(v, str)}
    before = {n: await world.footprint(n) for n in named}
    async with asyncio.timeout(BOUND):
        answer = await world.http.request(ask.method, path, content=content, headers=headers)
    said = f"{ask.method} {path} {content!r:.300} -> {answer.status_code} {answer.text[:300]!r}"
    assert answer.status_code < 500, said
    refused = 400 <= answer.status_code < 500
    seen(f"{ask.method} {ask.path.split('/')[-1]} -> {answer.status_code}")
    if refused:
        one_line_problem(answer)
        seen(f"code {answer.json()['code']}: {answer.json()['error'][:40]}")
    elif answer.status_code == 200 and ask.kind == "agui":
        refused = agui_refused(answer)
    elif answer.status_code == 200 and ask.kind == "chat":
        chat_ended(answer)
    elif answer.status_code == 200 and ask.kind == "events":
        events_ended(answer)
    if refused:  # nothing started, nothing recorded
        after = {n: await world.footprint(n) for n in named}
        moved = {
            n: (*(before[n] or ())[-3:], "->", *(after[n] or ())[-3:])
            for n in named
            if before[n] != after[n]
        }
        assert not moved, (said, moved, world.names(""), f"after {world.taken}")
    else:
        world.taken = said
        world.started |= named
        if answer.status_code == 201:
            world.started.add(answer.json()["id"])
        await world.refresh()


@FUZZ
@given(ask=asks("agui"))
async def test_agui_answers_bad_input_with_a_run_error_or_a_4xx(world: World, ask: Ask) -> None:
    await check(world, ask)


@FUZZ
@given(ask=asks("chat"))
async def test_chat_answers_bad_input_with_a_4xx_or_an_error_chunk(world: World, ask: Ask) -> None:
    await check(world, ask)


@FUZZ
@given(ask=asks("rest"))
async def test_rest_answers_bad_input_with_a_4xx_in_one_line(world: World, ask: Ask) -> None:
    await check(world, ask)


def agui(thread: str, text: str = "Refund order 3 for 4", **extra: Any) -> Ask:
    body = {"threadId": thread, "runId": "r", "messages": [user(text)], **extra}
    return Ask("POST", AGUI, body, kind="agui")


def resume(payload: Any) -> dict[str, Any]:
    return {"resume": [{"interruptId": "refund-42", "status": "resolved", "payload": payload}]}


def chat(chat_id: str, *messages: dict[str, Any]) -> Ask:
    return Ask("POST", CHAT, {"id": chat_id, "messages": list(messages)}, kind="chat")


def responded(approval: dict[str, Any]) -> dict[str, Any]:
    part = {"type": "tool-refund", "state": "approval-responded", "approval": approval}
    return {"id": "a", "role": "assistant", "parts": [part]}


def rest(method: str, path: str, conversation: str, body: Any = None, **options: Any) -> Ask:
    return Ask(method, f"/conversations/@id{path}", body, ids=(conversation,), **options)


def decisions(decided: dict[str, Any]) -> Ask:
    return rest("POST", "/decisions", "@waiting", {"decisions": decided})


def after(last_event_id: str, conversation: str = "@waiting") -> Ask:
    return rest(
        "GET", "/events", conversation, headers=(("last-event-id", last_event_id),), kind="events"
    )


#: The kinds of bad input the issue names, each once: lone surrogates where they once broke
#: (S), ids of runs and turns given as threads, resumes of calls that do not wait.
S = "\ud800"
NAMED = [
    Ask("POST", "/conversations", {"agent": "@agent", "id": S}),
    Ask("POST", "/conversations", {"agent": "@agent", "id": "a\nb"}),
    Ask("POST", "/conversations", {"agent": "@agent", "id": "x" * 1500}),
    rest("POST", "/messages", "@closed", {"text": "Refund order " + S}),
    rest("POST", "/messages", S, {"text": S}),
    rest("GET", "", S),
    agui(S),
    Ask("POST", AGUI, {"threadId": "@new", "runId": S, "messages": [user(S)]}, kind="agui"),
    agui("@new", "x" * 60000),
    agui("@new", tools=[{"name": "refund", "description": "x", "parameters": {}}]),
    agui("@run"),
    agui("@turn"),
    agui(""),
    agui("x" * 1500),
    agui("@waiting", "Refund order 42", **resume({"approved": True, "args": {"order": S}})),
    agui("@waiting", "Refund order 42", **resume({"approved": False, "reason": S})),
    agui("@closed", "Refund order 7 for 30", **resume(True)),
    decisions({"refund-42": {"approved": False, "reason": S}}),
    decisions({"refund-42": {"approved": True, "args": {"order": 10**30, "amount": 1}}}),
    decisions({"refund-42": {"approved": True, "always": "yes"}}),
    decisions({S: True}),
    chat(S, chat_user("Refund order 3 for 4")),
    chat("@new", chat_user("Refund order 3 for 4" + S)),
    chat("@closed", chat_user("Refund order 7 for 30"), chat_user("again", "m2")),
    chat("@turn", chat_user("Refund order 3 for 4")),
    chat("@waiting", chat_user("Refund order 42"), responded({"id": "refund-42", "approved": "maybe"})),
    chat("@waiting", chat_user("Refund order 42"), responded({"id": "refund-42", "approved": True, "reason": 5})),
    after("@turn:99999999999999999999999"),
    after("@run:0"),
    after("@turn:1", "@closed"),
]  # fmt: skip


@pytest.mark.parametrize("ask", NAMED, ids=lambda ask: f"{ask.method} {ask.path}")
async def test_named_bad_inputs_get_a_4xx_or_a_protocol_error(world: World, ask: Ask) -> None:
    await check(world, ask)
