"""Client-run tools through golem serve: AG-UI frontend tools (the real @ag-ui/client
HttpAgent and ag-ui-protocol's models) and REST tool results, with the requests it refuses
(each refused before anything reaches Temporal: the run still waits for the same call)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from serve_support import DEADLINE, node_client, refunds, serving
from temporalio.testing import WorkflowEnvironment
from test_serve_agui import EVENTS, kinds
from test_serve_rest import parse

from golem.client import DurableAgent
from golem.serve.results import MAX_RESULT_BYTES

sys.path.insert(0, str(Path(__file__).parents[1]))
from examples.client_tools import agent as scheduler

PICK_DATE = {
    "name": "pick_date",
    "description": "Ask the user to pick a date in the app's calendar",
    "parameters": {"type": "object", "properties": {"why": {"type": "string"}}},
}
ASKED = {"id": "u1", "role": "user", "content": "Book my delivery"}
CALLED = {
    "id": "a1",
    "role": "assistant",
    "toolCalls": [
        {
            "id": "date-1",
            "type": "function",
            "function": {"name": "pick_date", "arguments": '{"why": "delivery"}'},
        }
    ],
}


def answered(content: str, call_id: str = "date-1", **more: Any) -> dict[str, Any]:
    return {"id": f"t-{uuid.uuid4().hex[:6]}", "role": "tool", "toolCallId": call_id,
            "content": content, **more}  # fmt: skip


async def agui(http: httpx.AsyncClient, thread: str, **input: Any) -> list[Any]:
    """One AG-UI run of the scheduler, each event validated as an AG-UI event."""
    body = {"threadId": thread, "runId": str(uuid.uuid4()), "messages": [], **input}
    answer = await http.post("/agents/scheduler/agui", json=body)
    assert answer.status_code == 200, answer.text
    lines = answer.text.replace("\r\n", "\n").splitlines()
    return [EVENTS.validate_json(line[6:]) for line in lines if line.startswith("data: ")]


async def test_a_frontend_tool_call_ends_the_run_and_its_tool_message_completes_it(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    async with (
        serving(temporal_env, (scheduler,)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        first = await agui(http, thread, messages=[ASKED], tools=[PICK_DATE])
        reconnect = await agui(http, thread, messages=[ASKED, CALLED], tools=[PICK_DATE])
        done = await agui(
            http, thread, messages=[ASKED, CALLED, answered("2026-12-24")], tools=[PICK_DATE]
        )
        turns = await DurableAgent(temporal_env.client, "scheduler").conversation(thread)
        runs, transcript = await turns.runs(), await turns.messages()

    assert kinds(first) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert (first[1].tool_call_id, first[1].tool_call_name, first[2].delta) == (
        "date-1",
        "pick_date",
        '{"why": "delivery"}',
    )
    assert first[-1].outcome.type == "success"
    assert first[-1].outcome.pending_tool_call_ids == ["date-1"]
    assert kinds(reconnect) == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert reconnect[-1].outcome.pending_tool_call_ids == ["date-1"]
    assert kinds(done) == [  # no TOOL_CALL_RESULT: the client holds the result it sent
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert done[-1].result == "Delivery booked for 2026-12-24."
    assert len(runs) == 1  # the tool message went on with the same durable run
    assert [(m.role, m.content) for m in transcript] == [
        ("user", "Book my delivery"),
        ("assistant", ""),
        ("tool", "2026-12-24"),
        ("assistant", "Delivery booked for 2026-12-24."),
    ]


async def test_bad_frontend_tool_inputs_are_run_errors_and_change_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    other = {**PICK_DATE, "name": "open_camera"}
    async with (
        serving(temporal_env, (scheduler,)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        undeclared = await agui(http, thread, messages=[ASKED], tools=[PICK_DATE, other])
        await agui(http, thread, messages=[ASKED], tools=[PICK_DATE])
        refused = {
            "unknown call": await agui(
                http, thread, messages=[ASKED, CALLED, answered("2026-12-24", "date-9")]
            ),
            "a resume for it": await agui(
                http,
                thread,
                messages=[ASKED, CALLED],
                resume=[{"interruptId": "date-1", "status": "resolved", "payload": True}],
            ),
            "a schema it fails": await agui(
                http, thread, messages=[ASKED, CALLED, answered("next week")]
            ),
            "a new message": await agui(
                http, thread, messages=[ASKED, CALLED, {"id": "u2", "role": "user", "content": "?"}]
            ),
        }
        conversation = await DurableAgent(temporal_env.client, "scheduler").conversation(thread)
        still = await conversation.agent.attach((await conversation.runs())[-1])
        waiting = (await still.result()).pending_calls
        failed = await agui(
            http, thread, messages=[ASKED, CALLED, answered("", error="the user closed it")]
        )

    # Each run starts before its input is checked against the thread: its error follows.
    assert [e.type.value for e in undeclared[:1]] == ["RUN_STARTED"]
    assert [(e.type.value, e.code, e.message) for e in undeclared[1:]] == [
        (
            "RUN_ERROR",
            "unknown_tool",
            "frontend tool 'open_camera' is not a client-run tool of agent 'scheduler' "
            "(declare it with agent.external_tool; it has: pick_date)",
        )
    ]
    assert {run[0].type.value for run in refused.values()} == {"RUN_STARTED"}
    seen = {
        name: [(e.type.value, e.code, e.message) for e in run[1:]] for name, run in refused.items()
    }
    assert seen == {
        "unknown call": [
            (
                "RUN_ERROR",
                "not_waiting",
                f"thread {thread} does not wait for a result of date-9: it waits for date-1",
            )
        ],
        "a resume for it": [
            (
                "RUN_ERROR",
                "waits_for_result",
                "call 'date-1' is a client-run tool's: it waits for the application's result "
                "(tool-results), not a decision",
            )
        ],
        "a schema it fails": [
            (
                "RUN_ERROR",
                "invalid_result",
                "the result for call 'date-1' does not match its schema: "
                "'next week' does not match '^\\\\d{4}-\\\\d{2}-\\\\d{2}$'",
            )
        ],
        "a new message": [
            (
                "RUN_ERROR",
                "waiting",
                f"thread {thread} waits for the results of date-1: send their tool messages first",
            )
        ],
    }
    assert [c.id for c in waiting] == ["date-1"]  # none of them reached the run
    assert failed[-1].result == "No date yet (the user closed it); I will ask again later."


async def test_the_real_http_agent_answers_a_frontend_tool_and_the_run_goes_on(
    temporal_env: WorkflowEnvironment,
) -> None:
    thread = str(uuid.uuid4())
    async with serving(temporal_env, (scheduler,)) as server:
        seen = await node_client(
            "agui_client.mjs",
            {
                "url": f"{server.url}/agents/scheduler/agui",
                "threadId": thread,
                "tools": [PICK_DATE],
                "steps": [{"prompt": "Book my delivery"}, {"results": {"date-1": "2026-12-24"}}],
            },
        )

    first, second = seen["runs"]
    assert first["error"] is None and second["error"] is None, json.dumps(seen)
    assert (first["outcome"], first["pending"]) == ("success", ["date-1"])
    assert first["events"] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert (second["outcome"], second["pending"]) == ("success", [])
    assert second["result"] == "Delivery booked for 2026-12-24."
    assert [(m["role"], m["toolCalls"], m["toolCallId"]) for m in seen["messages"]] == [
        ("user", [], None),
        ("assistant", ["date-1"], None),
        ("tool", [], "date-1"),
        ("assistant", [], None),
    ]


async def test_rest_tool_results_complete_a_waiting_call_and_bad_ones_change_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with (
        serving(temporal_env, (scheduler, refunds)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        created = await http.post("/conversations", json={"agent": "scheduler"})
        url = f"/conversations/{created.json()['id']}"
        await http.post(f"{url}/messages", json={"text": "Book my delivery"})
        events = parse((await http.get(f"{url}/events")).text)  # until it waits
        read = (await http.get(url)).json()
        inbox = (await http.get("/pending")).json()["pending"]
        refund = (await http.post("/conversations", json={"agent": "refunds"})).json()["id"]
        await http.post(f"/conversations/{refund}/messages", json={"text": "Refund 42"})
        parse((await http.get(f"/conversations/{refund}/events")).text)
        results = f"{url}/tool-results"
        answers = {
            "unknown call": await http.post(
                results, json={"results": {"date-9": {"result": "2026-12-24"}}}
            ),
            "not a result": await http.post(results, json={"results": {"date-1": "2026-12-24"}}),
            "a schema it fails": await http.post(
                results, json={"results": {"date-1": {"result": "soon"}}}
            ),
            "oversized": await http.post(
                results, json={"results": {"date-1": {"result": "x" * (MAX_RESULT_BYTES + 1)}}}
            ),
            "a decision for it": await http.post(
                f"{url}/decisions", json={"decisions": {"date-1": {"approved": True}}}
            ),
            "a result for an approval": await http.post(
                f"/conversations/{refund}/tool-results",
                json={"results": {"refund-42": {"result": "order 42 refunded 150"}}},
            ),
            "no results": await http.post(results, json={}),
        }
        still = (await http.get(url)).json()
        done = await http.post(results, json={"results": {"date-1": {"result": "2026-12-24"}}})
        again = await http.post(results, json={"results": {"date-1": {"result": "2026-12-25"}}})
        after = (await http.get(url)).json()
        await http.post(
            f"/conversations/{refund}/decisions", json={"decisions": {"refund-42": False}}
        )

    assert [e["event"] for e in events] == [
        "model_start",
        "tool_call_delta",
        "model_end",
        "waiting",
    ]
    waiting = json.loads(events[-1]["data"])["waiting"]
    assert [(c["id"], c["name"], c["kind"]) for c in waiting] == [("date-1", "pick_date", "result")]
    assert [(c["id"], c["kind"]) for c in read["waiting"]] == [("date-1", "result")]
    assert read["waiting"][0]["resultSchema"] == scheduler.tools["pick_date"].result_schema
    assert waiting[0]["resultSchema"] == {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
    assert [(c["id"], c["kind"]) for c in inbox] == [("date-1", "result")]
    seen = {n: (r.status_code, r.json()["error"]) for n, r in answers.items()}
    conversation = created.json()["id"]
    assert seen == {
        "unknown call": (
            409,
            f"conversation {conversation} does not wait for a result of date-9: "
            "it waits for date-1",
        ),
        "not a result": (
            400,
            "the result for call 'date-1' must be {\"result\": <any JSON>} or "
            '{"error": "why it failed"}, not \'2026-12-24\'',
        ),
        "a schema it fails": (
            422,
            "the result for call 'date-1' does not match its schema: "
            "'soon' does not match '^\\\\d{4}-\\\\d{2}-\\\\d{2}$'",
        ),
        "oversized": (
            413,
            f"the result for call 'date-1' is {MAX_RESULT_BYTES + 1} bytes: "
            f"at most {MAX_RESULT_BYTES}",
        ),
        "a decision for it": (
            409,
            "call 'date-1' is a client-run tool's: it waits for the application's result "
            "(tool-results), not a decision",
        ),
        "a result for an approval": (
            409,
            "call 'refund-42' waits for a person's decision, not a result",
        ),
        "no results": (400, 'send {"results": {"<call id>": {"result": ...}}}'),
    }
    assert [c["id"] for c in still["waiting"]] == ["date-1"]  # none of them reached the run
    assert still["messages"] == []
    assert (done.status_code, done.json()["output"]) == (200, "Delivery booked for 2026-12-24.")
    assert (again.status_code, again.json()["error"]) == (
        409,
        f"conversation {conversation} does not wait for a result of date-1: it waits for nothing",
    )
    assert [(m["role"], m["content"]) for m in after["messages"][2:]] == [
        ("tool", "2026-12-24"),
        ("assistant", "Delivery booked for 2026-12-24."),
    ]


async def test_an_app_that_knows_the_agent_by_name_asks_the_run_which_calls_are_client_run(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with (
        serving(temporal_env, (scheduler,), by_name=True) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        created = await http.post("/conversations", json={"agent": "scheduler"})
        url = f"/conversations/{created.json()['id']}"
        await http.post(f"{url}/messages", json={"text": "Book my delivery"})
        parse((await http.get(f"{url}/events")).text)  # until it waits
        read = (await http.get(url)).json()
        decided = await http.post(f"{url}/decisions", json={"decisions": {"date-1": True}})
        done = await http.post(
            f"{url}/tool-results", json={"results": {"date-1": {"error": "no calendar"}}}
        )

    assert [(c["id"], c["kind"]) for c in read["waiting"]] == [("date-1", "result")]
    assert (decided.status_code, decided.json()["code"]) == (409, "waits_for_result")
    assert done.json()["output"] == "No date yet (no calendar); I will ask again later."
