"""AG-UI 1.0 at POST /agents/{agent}/agui: the stream validated with ag-ui-protocol's
models, and consumed by the real @ag-ui/client HttpAgent (tests/serve/agui_client.mjs),
through an interrupt and its resume."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, RunFinishedEvent
from pydantic import TypeAdapter
from serve_support import DEADLINE, node_client, refunds, serving
from temporalio.testing import WorkflowEnvironment
from waiting import eventually, within

from golem.client import DurableAgent
from golem.client.lookups import existing_run
from golem.ids import minted
from golem.serve import create_app

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


async def agui(http: httpx.AsyncClient, thread: str, **input: Any) -> list[Any]:
    """One run's events, each validated as an AG-UI event."""
    body = {"threadId": thread, "runId": str(uuid.uuid4()), "messages": [], **input}
    answer = await http.post("/agents/refunds/agui", json=body)
    assert answer.status_code == 200, answer.text
    lines = answer.text.replace("\r\n", "\n").splitlines()
    return [
        EVENTS.validate_json(line[len("data: ") :]) for line in lines if line.startswith("data: ")
    ]


def kinds(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


@pytest.mark.usefixtures("both_shapes")
async def test_an_interrupt_per_waiting_call_then_a_resume_continues_the_same_run(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "Refund order 42"}]
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        first = await agui(http, thread, messages=asked)
        resume = [{"interruptId": "refund-42", "status": "resolved", "payload": {"approved": True}}]
        second = await agui(http, thread, messages=asked, resume=resume)
        again = await agui(http, thread, messages=asked)
        runs = await DurableAgent(temporal_env.client, "refunds").conversation(thread)
        turns = await runs.runs()

    assert kinds(first) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert first[0].protocol_version == "1.0"
    assert (first[1].tool_call_id, first[1].tool_call_name, first[2].delta) == (
        "refund-42",
        "refund",
        '{"order": 42, "amount": 150}',
    )
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is not None
    assert finished.outcome.type == "interrupt"
    interrupt = finished.outcome.interrupts[0]
    assert (interrupt.id, interrupt.reason, interrupt.tool_call_id, interrupt.message) == (
        "refund-42",
        "tool_approval",
        "refund-42",
        'approve refund({"order": 42, "amount": 150})?',
    )
    assert kinds(second) == [
        "RUN_STARTED",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert second[1].content == "order 42 refunded 150"
    assert second[3].delta == "Done: order 42 refunded 150."
    assert second[-1].outcome.type == "success"
    assert second[-1].result == "Done: order 42 refunded 150."
    assert len(turns) == 1  # the resume went on with the same durable run
    assert kinds(again) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [m.role for m in again[1].messages] == ["user", "assistant", "tool", "assistant"]


async def test_refusals_are_run_errors_with_a_code_or_a_400_and_change_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        run = await DurableAgent(
            temporal_env.client, "refunds", task_queue=server.task_queue
        ).start("Refund 5")
        nothing = await agui(
            http, thread, resume=[{"interruptId": "refund-1", "status": "cancelled"}]
        )
        a_run = await agui(
            http, run.run_id, messages=[{"id": "u", "role": "user", "content": "hi"}]
        )
        malformed = await http.post("/agents/refunds/agui", json={"threadId": thread})
        unknown = await http.post(
            "/agents/nobody/agui", json={"threadId": thread, "runId": "r", "messages": []}
        )
        absent = await existing_run(temporal_env.client, thread)
        await run.result()  # it waits: deny, so the worker leaves nothing running
        await run.approve({"refund-5": False})

    assert absent is None  # no conversation was started by any of them
    # The run starts before Temporal is asked anything: a refusal found there is its error.
    assert kinds(nothing) == kinds(a_run) == ["RUN_STARTED", "RUN_ERROR"]
    assert (nothing[1].code, nothing[1].message) == (
        "not_waiting",
        f"thread {thread} waits for nothing: nothing to resume",
    )
    assert a_run[1].code == "not_found"
    assert (malformed.status_code, malformed.json()["error"]) == (
        400,
        "not a RunAgentInput: runId: Field required",
    )
    assert (unknown.status_code, unknown.json()["error"]) == (
        404,
        "no agent 'nobody' is served here (served: refunds)",
    )


@pytest.mark.usefixtures("both_shapes")
async def test_a_thread_id_that_is_a_turns_run_id_is_a_run_error_and_starts_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "Refund 7"}]
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        await agui(http, thread, messages=asked)  # it waits for approval
        conversation = await DurableAgent(temporal_env.client, "refunds").conversation(thread)
        (turn,) = await conversation.runs()
        as_thread = await agui(http, turn, messages=asked)
        held = await existing_run(temporal_env.client, turn)
        turns = await conversation.runs()
        await agui(
            http,
            thread,
            messages=asked,
            resume=[{"interruptId": "refund-7", "status": "cancelled"}],
        )

    # An inline turn's run id names no workflow (a search attribute lists it): asked first.
    assert kinds(as_thread) == ["RUN_STARTED", "RUN_ERROR"]
    assert as_thread[1].code == "not_found"
    assert turn in as_thread[1].message
    assert turns == [turn]  # nothing was sent to its conversation
    if held is not None:  # a child turn's workflow is still the turn's, nothing else
        assert held.workflow_type != "ConversationWorkflow"
    assert minted(turn) and not minted(thread)


@pytest.mark.usefixtures("both_shapes")
async def test_a_resume_the_worker_refuses_is_a_run_error_and_the_call_still_waits(
    temporal_env: WorkflowEnvironment,
) -> None:
    """An app that knows its agent by name cannot check edited arguments: the worker's
    validator refuses them, and the resume's stream waited for ever for a run that does
    not go on."""
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "Refund order 42"}]
    bad = {"approved": True, "args": {"order": "x", "amount": []}}
    async with (
        serving(temporal_env, by_name=True) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        await agui(http, thread, messages=asked)
        refused = await agui(
            http,
            thread,
            messages=asked,
            resume=[{"interruptId": "refund-42", "status": "resolved", "payload": bad}],
        )
        again = await agui(http, thread, messages=asked)
        resume = [{"interruptId": "refund-42", "status": "resolved", "payload": {"approved": True}}]
        done = await agui(http, thread, messages=asked, resume=resume)

    assert kinds(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused[1].code == "refused"
    assert "call 'refund-42' (refund): invalid arguments: order:" in refused[1].message
    assert [i.id for i in again[-1].outcome.interrupts] == ["refund-42"]  # it still waits
    assert done[-1].result == "Done: order 42 refunded 150."


@pytest.mark.usefixtures("both_shapes")
async def test_the_real_http_agent_reads_an_interrupt_and_resumes_it(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    async with serving(temporal_env) as server:
        resume = [{"interruptId": "refund-7", "status": "resolved", "payload": {"approved": False}}]
        seen = await node_client(
            "agui_client.mjs",
            {
                "url": f"{server.url}/agents/refunds/agui",
                "threadId": thread,
                "steps": [{"prompt": "Refund order 7"}, {"resume": resume}],
            },
        )

    first, second = seen["runs"]
    assert first["error"] is None and second["error"] is None, json.dumps(seen)
    assert first["outcome"] == "interrupt"
    assert [(i["id"], i["toolCallId"]) for i in first["interrupts"]] == [("refund-7", "refund-7")]
    assert first["events"] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert second["outcome"] == "success"
    assert second["result"].startswith("No refund: ")
    assert [(m["role"], m["toolCalls"], m["toolCallId"]) for m in seen["messages"]] == [
        ("user", [], None),
        ("assistant", ["refund-7"], None),
        ("tool", [], "refund-7"),
        ("assistant", [], None),
    ]


async def test_a_request_describes_its_thread_once(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "Refund order 42"}]
    service = temporal_env.client.workflow_service
    describe = service.describe_workflow_execution
    described: list[str] = []

    async def counted(request: Any, *args: Any, **kwargs: Any) -> Any:
        described.append(request.execution.workflow_id)
        return await describe(request, *args, **kwargs)

    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        await agui(http, thread, messages=asked)  # the turn waits for refund-42's approval
        monkeypatch.setattr(service, "describe_workflow_execution", counted)
        again = await agui(http, thread, messages=asked)  # a reconnect
        monkeypatch.undo()
        denied = [{"interruptId": "refund-42", "status": "cancelled"}]
        await agui(http, thread, messages=asked, resume=denied)  # nothing left waiting

    assert kinds(again)[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert kinds(again)[-1] == "RUN_FINISHED"
    assert described.count(thread) == 1  # what waits is read from that same description


async def test_a_new_threads_turn_carries_its_conversations_start(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is asked of Temporal before a new thread's turn: no describe of the thread, no
    start of its own; the turn's call starts the conversation too (update-with-start). Nor
    after it: the turn's end says how it ended, its transcript is not queried for it."""
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "Refund order 42 for 30"}]  # no approval
    service = temporal_env.client.workflow_service
    called: list[tuple[str, str]] = []
    for name in ("describe_workflow_execution", "start_workflow_execution", "query_workflow"):
        call = getattr(service, name)

        async def counted(request: Any, *args: Any, _call: Any = call, **kwargs: Any) -> Any:
            execution = getattr(request, "execution", None)
            workflow = execution.workflow_id if execution is not None else request.workflow_id
            called.append((type(request).__name__, workflow))
            return await _call(request, *args, **kwargs)

        monkeypatch.setattr(service, name, counted)
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        first = await agui(http, thread, messages=asked)
        monkeypatch.undo()
        found = await existing_run(temporal_env.client, thread)

    assert kinds(first)[0] == "RUN_STARTED" and kinds(first)[-1] == "RUN_FINISHED"
    assert first[-1].outcome.type == "success"
    assert first[-1].result == "Done: order 42 refunded 30."
    assert [c for c in called if c[1] == thread] == []
    assert found is not None and (found.workflow_type, found.agent) == (
        "ConversationWorkflow",
        "refunds",
    )


async def test_a_new_threads_turn_is_sent_before_its_response_starts(
    temporal_env: WorkflowEnvironment,
) -> None:
    """A new thread's turn goes to Temporal as its request is read, not once its response
    has started (RUN_STARTED written): when many requests come at once, none waits for the
    others' responses to start before its turn is sent."""
    thread = str(uuid.uuid4())
    asked = [{"id": "u1", "role": "user", "content": "Refund order 42 for 30"}]  # no approval
    body = json.dumps({"threadId": thread, "runId": "r", "messages": asked}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/agents/refunds/agui",
        "raw_path": b"/agents/refunds/agui",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    started, done = asyncio.Event(), asyncio.Event()
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    written: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await done.wait()  # no disconnect while the response goes on
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            await started.wait()  # the response starts only once its conversation has
        written.append(message.get("body", b""))
        if not message.get("more_body", True):
            done.set()

    async with serving(temporal_env) as server:
        app = create_app(temporal_env.client, [refunds], task_queue=server.task_queue)
        responding = asyncio.ensure_future(app(scope, receive, send))
        found = await eventually(
            lambda: existing_run(temporal_env.client, thread),
            what="the thread's conversation to start before its response",
            timeout=DEADLINE,
        )
        started.set()
        await within(responding, what="the response to end")

    assert found.workflow_type == "ConversationWorkflow"
    sent = b"".join(written).decode().replace("\r\n", "\n").splitlines()
    events = [
        EVENTS.validate_json(line[len("data: ") :]) for line in sent if line.startswith("data: ")
    ]
    assert kinds(events)[0] == "RUN_STARTED" and kinds(events)[-1] == "RUN_FINISHED"
    assert events[-1].result == "Done: order 42 refunded 30."


@pytest.mark.parametrize("together", [True, False])
async def test_the_events_of_items_that_arrived_together_go_out_in_one_write(
    together: bool,
) -> None:
    from golem.events import RunEvent
    from golem.models import StreamDelta
    from golem.serve.agui import Translator, _relayed
    from golem.serve.threads import TurnEnd

    def delta(text: str) -> RunEvent:
        return RunEvent("text_delta", "r", "c", 1, delta=StreamDelta(kind="text", text=text))

    items: list[RunEvent | TurnEnd] = [delta("a"), delta("b"), TurnEnd("r", error=ValueError("x"))]

    async def rest() -> Any:
        for item in items[1:]:
            yield item

    writes = [w async for w in _relayed(Translator("t", "r"), items[0], rest(), lambda: together)]

    sent = [line for w in writes for line in w.decode().splitlines() if line.startswith("data:")]
    types = [json.loads(line[len("data: ") :])["type"] for line in sent]
    assert types == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert len(writes) == (1 if together else 3)  # arrived apart: a write per item
