"""golem serve's REST API on 127.0.0.1 against the dev server: a conversation's turn,
its events resumed with Last-Event-ID, an approval, and requests it refuses."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from delegation_agents import read_late
from serve_support import DEADLINE, refunds, serving
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_serve_agui import agui, kinds
from test_serve_chat import chunks
from waiting import eventually

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.client.lookups import awaiting_approval
from golem.models import FunctionModel, ToolDefinition
from golem.serve import threads as threads_module
from golem.serve.rest import packed
from golem.worker import GolemPlugin

sys.path.insert(0, str(Path(__file__).parents[1]))
from examples.triage import triage


def parse(body: str) -> list[dict[str, str]]:
    """SSE events as dicts of their fields (comments, such as pings, left out)."""
    events = []
    for block in body.replace("\r\n", "\n").strip().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if fields:
            events.append(fields)
    return events


async def charged_twice(http: httpx.AsyncClient) -> tuple[str, list[dict[str, str]]]:
    """A triage conversation (examples/triage.py) and its turn's events, until billing's
    refund waits for approval."""
    created = await http.post("/conversations", json={"agent": "triage"})
    url = f"/conversations/{created.json()['id']}"
    await http.post(f"{url}/messages", json={"text": "I was charged twice"})
    return url, parse((await http.get(f"{url}/events")).text)


async def started(http: httpx.AsyncClient) -> str:
    """A new conversation of refunds' (its id)."""
    conversation: str = (await http.post("/conversations", json={"agent": "refunds"})).json()["id"]
    return conversation


async def test_a_turn_waits_for_approval_streams_resumes_and_finishes_after_a_decision(
    temporal_env: WorkflowEnvironment, both_shapes: str
) -> None:
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        created = await http.post("/conversations", json={"agent": "refunds"})
        conversation = created.json()["id"]
        url = f"/conversations/{conversation}"
        sent = await http.post(f"{url}/messages", json={"text": "Refund 42"})
        run_id = sent.json()["runId"]
        events = parse((await http.get(f"/conversations/{conversation}/events")).text)
        read = (await http.get(f"/conversations/{conversation}")).json()
        decided = await http.post(
            f"/conversations/{conversation}/decisions",
            json={"decisions": {"refund-42": {"approved": True}}},
        )
        rest = parse(
            (
                await http.get(
                    f"/conversations/{conversation}/events",
                    headers={"Last-Event-ID": events[-2]["id"]},
                )
            ).text
        )
        ended = await http.get(
            f"/conversations/{conversation}/events", headers={"Last-Event-ID": rest[-1]["id"]}
        )
        listed = (await http.get("/conversations")).json()["conversations"]
        after = (await http.get(f"/conversations/{conversation}")).json()
        try:
            parent = (await temporal_env.client.get_workflow_handle(run_id).describe()).parent_id
        except RPCError as exc:
            parent = exc.status.name
    # Inline, the turn is no workflow of its own: it ran in its conversation's.
    assert parent == ("NOT_FOUND" if both_shapes == "inline" else conversation)

    assert (created.status_code, sent.status_code) == (201, 202)
    assert [e["event"] for e in events] == [
        "model_start",
        "tool_call_delta",
        "model_end",
        "waiting",
    ]
    assert [e["id"] for e in events] == [f"{run_id}:{n}" for n in (1, 2, 3, "end")]
    waiting = json.loads(events[-1]["data"])
    assert [(c["id"], c["name"], c["args"]) for c in waiting["waiting"]] == [
        ("refund-42", "refund", '{"order": 42, "amount": 150}')
    ]
    assert read["turn"] == run_id
    assert [c["id"] for c in read["waiting"]] == ["refund-42"]
    assert read["messages"] == []  # a waiting turn is not in the transcript yet
    assert read["prompt"] == "Refund 42"  # its question, for a page opened now
    assert after["prompt"] is None
    assert decided.json() == {
        "status": "done",
        "runId": run_id,
        "output": "Done: order 42 refunded 150.",
        "link": "",
    }
    assert [e["event"] for e in rest] == [
        "tool_start",
        "tool_end",
        "model_start",
        "text_delta",
        "model_end",
        "result",
    ]
    assert json.loads(rest[-1]["data"])["output"] == "Done: order 42 refunded 150."
    assert ended.status_code == 204
    assert conversation in [c["id"] for c in listed]
    assert [m["role"] for m in after["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert after["waiting"] == []


def triage_to_billing() -> Agent[None, str]:
    """Triage hands every turn over to billing, which answers it."""

    def triage(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        call = ToolCall(id="hand-1", name="transfer_to_billing", args='{"reason": "a refund"}')
        return Message.assistant(tool_calls=[call])

    billing = Agent(
        FunctionModel(lambda m, t: Message.assistant("billing: refunded"), model_name="stand-in"),
        name="billing",
    )
    return Agent(FunctionModel(triage, model_name="stand-in"), name="triage", handoffs=[billing])


async def test_a_handed_over_turns_events_are_both_runs_and_resume_after_either(
    temporal_env: WorkflowEnvironment, both_shapes: str
) -> None:
    """The events of a turn that handed over: the caller's run's, then its target's, read
    live or after the turn ended (its latest run is then the target's); a Last-Event-ID
    naming either run resumes right after it."""
    async with (
        serving(temporal_env, [triage_to_billing()]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        created = await http.post("/conversations", json={"agent": "triage"})
        events = f"/conversations/{created.json()['id']}/events"
        sent = await http.post(
            f"/conversations/{created.json()['id']}/messages", json={"text": "a refund, please"}
        )
        turn = sent.json()["runId"]
        live = parse((await http.get(events)).text)  # until the turn ends
        later = parse((await http.get(events)).text)
        resumed = [
            parse((await http.get(events, headers={"Last-Event-ID": e["id"]})).text)
            for e in later[:-1]
        ]

    def agents(read: list[dict[str, str]]) -> list[tuple[str, str]]:
        return [(e["event"], json.loads(e["data"])["agent"]) for e in read[:-1]]

    assert live == later
    assert agents(later) == [
        ("model_start", "triage"),
        ("tool_call_delta", "triage"),
        ("model_end", "triage"),
        ("tool_end", "triage"),  # transfer_to_billing's
        ("model_start", "billing"),
        ("text_delta", "billing"),
        ("model_end", "billing"),
    ]
    target = later[4]["id"].split(":")[0]
    assert target != turn
    assert [e["id"].split(":")[0] for e in later[:-1]] == [turn] * 4 + [target] * 3
    assert len({e["id"] for e in later}) == len(later)
    assert later[-1]["event"] == "result" and later[-1]["id"].endswith(":end")
    assert json.loads(later[-1]["data"])["output"] == "billing: refunded"
    # Resumed after each event: the rest of the turn, each event once.
    assert resumed == [later[n + 1 :] for n in range(len(later) - 1)]


async def test_a_turn_handed_over_to_a_run_that_waits_streams_both_and_resumes_in_either(
    temporal_env: WorkflowEnvironment, both_shapes: str
) -> None:
    """examples/triage.py: triage asks its delegate ledger, then hands over to billing,
    whose refund waits for a person. The turn's events: triage's (ledger's among them),
    then billing's, up to the wait; resumed after billing's first, the rest of them."""
    async with (
        serving(temporal_env, [triage]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        created = await http.post("/conversations", json={"agent": "triage"})
        url = f"/conversations/{created.json()['id']}"
        sent = await http.post(f"{url}/messages", json={"text": "I was charged twice"})
        turn = sent.json()["runId"]
        waiting = parse((await http.get(f"{url}/events")).text)  # until billing's refund waits
        billing = next(n for n, e in enumerate(waiting) if '"agent":"billing"' in e["data"])
        after = {"Last-Event-ID": waiting[billing]["id"]}
        resumed = parse((await http.get(f"{url}/events", headers=after)).text)
        decided = await http.post(
            f"{url}/decisions", json={"decisions": {"refund-1": {"approved": True}}}
        )

    runs = [e["id"].split(":")[0] for e in waiting]
    agents = [json.loads(e["data"]).get("agent") for e in waiting[:-1]]
    assert runs[0] == turn and agents[0] == "triage"
    assert "ledger" in agents[:billing]  # the delegate's events, among the caller's
    assert set(agents[billing:]) == {"billing"} and runs[billing] != turn
    assert [e["event"] for e in waiting[billing:]] == [
        "model_start",
        "tool_call_delta",
        "model_end",
        "waiting",
    ]
    assert resumed == waiting[billing + 1 :]
    [call] = json.loads(waiting[-1]["data"])["waiting"]
    assert (call["id"], call["name"]) == ("refund-1", "refund")
    assert decided.json()["output"] == "Done: refunded 19.90 on order 42."


async def test_a_resume_after_a_delegates_event_repeats_none_of_its_events_and_loses_none(
    temporal_env: WorkflowEnvironment, both_shapes: str
) -> None:
    """examples/triage.py: triage's delegate ledger streams among triage's events. A
    Last-Event-ID naming one of ledger's events names where ledger's stream stood too:
    resumed after any event of triage's run, the rest of the turn, each event once (issue
    32); before, a resume after one of ledger's read ledger's events again."""
    async with (
        serving(temporal_env, [triage]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        url, waiting = await charged_twice(http)
        billing = next(n for n, e in enumerate(waiting) if '"agent":"billing"' in e["data"])
        resumed = [
            parse((await http.get(f"{url}/events", headers={"Last-Event-ID": e["id"]})).text)
            for e in waiting[:billing]
        ]
        # A position naming a run of no run of this conversation's is refused, read nowhere.
        at = waiting[1]["id"].partition(".")[0]
        elsewhere = {"Last-Event-ID": f"{at}.{packed({'another-run': ('ledger', 0)})}"}
        refused = await http.get(f"{url}/events", headers=elsewhere)
        garbled = await http.get(f"{url}/events", headers={"Last-Event-ID": f"{at}.e30"})
        await http.post(f"{url}/decisions", json={"decisions": {"refund-1": {"approved": True}}})

    assert refused.status_code == 400 and "'another-run' is not a run of" in refused.text
    assert garbled.status_code == 400 and "names no position" in garbled.text
    ledger = [n for n, e in enumerate(waiting) if '"agent":"ledger"' in e["data"]]
    assert len(ledger) >= 2 and ledger[-1] < billing - 1  # triage goes on after ledger's
    assert waiting[-1]["event"] == "waiting"
    for n, rest in enumerate(resumed):
        assert rest == waiting[n + 1 :], f"resumed after event {n} ({waiting[n]['id']})"


async def test_a_delegates_events_all_come_before_the_handoff_targets_however_late_read(
    temporal_env: WorkflowEnvironment, both_shapes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delegate ledger's stream is read only once billing's refund waits (a loaded
    reader): its events still come before billing's, the order they happened in, and a
    resume after billing's first loses none of billing's and repeats none of ledger's."""

    async def waits() -> bool:
        return bool((await awaiting_approval(temporal_env.client, conversation)).calls)

    read_late(monkeypatch, "ledger", until=waits)
    async with (
        serving(temporal_env, [triage]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        created = await http.post("/conversations", json={"agent": "triage"})
        conversation = created.json()["id"]
        url = f"/conversations/{conversation}"
        await http.post(f"{url}/messages", json={"text": "I was charged twice"})
        waiting = parse((await http.get(f"{url}/events")).text)
        billing = next(n for n, e in enumerate(waiting) if '"agent":"billing"' in e["data"])
        after = {"Last-Event-ID": waiting[billing]["id"]}
        resumed = parse((await http.get(f"{url}/events", headers=after)).text)
        await http.post(f"{url}/decisions", json={"decisions": {"refund-1": {"approved": True}}})

    runs = [e["id"].split(":")[0] for e in waiting]
    agents = [json.loads(e["data"]).get("agent") for e in waiting[:-1]]
    assert "ledger" in agents[:billing]
    assert set(agents[billing:]) == {"billing"} and set(runs[billing:]) == {runs[billing]}
    assert resumed == waiting[billing + 1 :]


async def test_bad_requests_get_a_status_and_one_line_never_a_500(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with (
        serving(temporal_env, max_body_bytes=2000) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        durable = DurableAgent(temporal_env.client, "refunds", task_queue=server.task_queue)
        run = await durable.start("Refund 7")
        conversation = (await http.post("/conversations", json={"agent": "refunds"})).json()["id"]
        answers = {
            "unknown agent": await http.post("/conversations", json={"agent": "nobody"}),
            "no agent": await http.post("/conversations", json={}),
            "not json": await http.post("/conversations", content=b"agent=refunds"),
            "too large": await http.post(
                f"/conversations/{conversation}/messages", json={"text": "x" * 5000}
            ),
            "unknown conversation": await http.get("/conversations/nope"),
            "a run id": await http.get(f"/conversations/{run.run_id}"),
            "empty text": await http.post(
                f"/conversations/{conversation}/messages", json={"text": ""}
            ),
            "nothing waits": await http.post(
                f"/conversations/{conversation}/decisions",
                json={"decisions": {"c1": {"approved": True}}},
            ),
            "bad decision": await http.post(
                f"/conversations/{conversation}/decisions", json={"decisions": {"c1": "yes"}}
            ),
            "bad event id": await http.get(
                f"/conversations/{conversation}/events", headers={"Last-Event-ID": "soon"}
            ),
            "no turn yet": await http.get(f"/conversations/{conversation}/events"),
        }
        await run.result()  # it waits: deny, so the worker leaves nothing running
        await run.approve({"refund-7": False})

    seen = {n: (r.status_code, r.json()["error"] if r.content else "") for n, r in answers.items()}
    assert seen == {
        "unknown agent": (404, "no agent 'nobody' is served here (served: refunds)"),
        "no agent": (400, 'send {"agent": "<name>"}: the agent the conversation talks to'),
        "not json": (
            400,
            "the request body is not JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        "too large": (413, "the request body is 5011 bytes: this server takes 2000"),
        "unknown conversation": (404, "no conversation 'nope'"),
        "a run id": (404, f"{run.run_id!r} is not a conversation (it is a run's id)"),
        "empty text": (400, 'send {"text": "..."} with a non-empty text'),
        "nothing waits": (
            409,
            f"conversation {conversation} does not wait for c1: it waits for nothing",
        ),
        "bad decision": (
            400,
            "the decision on call 'c1' must be {\"approved\": true|false}, not 'yes'",
        ),
        "bad event id": (400, "Last-Event-ID must be <run id>:<offset>, not 'soon'"),
        "no turn yet": (204, ""),
    }


async def test_a_path_no_route_serves_gets_the_problem_shape_too(
    temporal_env: WorkflowEnvironment,
) -> None:
    """Found by tests/test_serve_fuzz.py: an empty agent name or an id holding "/" missed
    every route and got Starlette's plain "Not Found", without a code."""
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        empty = await http.post("/agents//chat", json={})
        slash = await http.get("/conversations/a%2Fb/events")
        method = await http.delete("/conversations")

    assert (empty.status_code, empty.json()) == (
        404,
        {"error": "no route for POST '/agents//chat' (see /openapi.json)", "code": "not_found"},
    )
    assert slash.json()["error"] == (
        "no route for GET '/conversations/a/b/events' (see /openapi.json)"
    )
    assert (method.status_code, method.json()) == (
        405,
        {"error": "DELETE is not allowed on '/conversations'", "code": "method_not_allowed"},
    )


async def test_a_body_nested_past_the_depth_limit_or_holding_nan_is_a_400(
    temporal_env: WorkflowEnvironment,
) -> None:
    """Found by tests/test_serve_fuzz.py: 3,000 brackets were a 500 (RecursionError); NaN
    was read as a number, though no JSON holds it."""
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        deep = await http.post("/conversations", content=b"[" * 3000 + b"]" * 3000)
        nan = await http.post("/conversations", content=b'{"agent": "refunds", "id": NaN}')

    assert (deep.status_code, deep.json()) == (
        400,
        {
            "error": "the request body is not JSON: JSON nested 3000 levels deep, past "
            "golem's limit of 256",
            "code": "bad_request",
        },
    )
    assert (nan.status_code, nan.json()["error"]) == (
        400,
        "the request body is not JSON: NaN is not JSON",
    )


async def test_a_body_holding_a_lone_surrogate_is_a_400_in_every_protocol(
    temporal_env: WorkflowEnvironment,
) -> None:
    """Found by tests/test_serve_fuzz.py: an escaped lone surrogate (valid JSON grammar, no
    UTF-8 text) was a 500 as a conversation id, dropped an AG-UI stream after RUN_STARTED
    as a thread id, and hung a decision's stream for good as a denial's reason."""
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        conversation = await started(http)
        await http.post(f"/conversations/{conversation}/messages", json={"text": "Refund 9"})
        parse((await http.get(f"/conversations/{conversation}/events")).text)  # until it waits
        answers = [
            await http.post("/conversations", content=b'{"agent": "refunds", "id": "\\ud800"}'),
            await http.post(
                "/agents/refunds/agui",
                content=b'{"threadId": "\\udc00", "runId": "r", "messages": []}',
            ),
            await http.post(
                f"/conversations/{conversation}/decisions",
                content=b'{"decisions": {"refund-9": {"approved": false, "reason": "\\ud83d"}}}',
            ),
        ]
        still = (await http.get(f"/conversations/{conversation}")).json()["waiting"]
        # Denied, so the worker leaves nothing waiting (GET /pending of later tests asks it).
        await http.post(
            f"/conversations/{conversation}/decisions", json={"decisions": {"refund-9": False}}
        )

    assert [(a.status_code, a.json()["error"]) for a in answers] == [
        (400, "the request body is not UTF-8 text: it holds a lone surrogate (\\ud800)"),
        (400, "the request body is not UTF-8 text: it holds a lone surrogate (\\udc00)"),
        (400, "the request body is not UTF-8 text: it holds a lone surrogate (\\ud83d)"),
    ]
    assert [c["id"] for c in still] == ["refund-9"]  # nothing was sent


async def test_a_message_to_a_closed_conversation_is_a_409_and_changes_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    """Found by tests/test_serve_fuzz.py: it was a 500 (ConversationClosedError raised)."""
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        handle = temporal_env.client.get_workflow_handle(await started(http))
        await http.post(f"/conversations/{handle.id}/close")
        before = (await handle.describe()).history_length
        sent = await http.post(f"/conversations/{handle.id}/messages", json={"text": "more"})
        after = (await handle.describe()).history_length

    assert (sent.status_code, sent.json()) == (
        409,
        {"error": f"conversation {handle.id} is completed; fork it to go on", "code": "closed"},
    )
    assert after == before


async def test_edited_arguments_over_the_bound_are_a_413_and_the_turn_still_waits(
    temporal_env: WorkflowEnvironment,
) -> None:
    """An app that knows its agent by name cannot check edited arguments against the tool:
    3 MB of them (under the body bound) were sent, and the run's workflow task failed for
    ever on Temporal's payload limit while the request hung."""
    async with (
        serving(temporal_env, by_name=True) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        url = f"/conversations/{await started(http)}"
        await http.post(f"{url}/messages", json={"text": "Refund 9"})
        parse((await http.get(f"{url}/events")).text)  # until it waits
        edited = {"order": 9, "amount": 5, "note": "x" * 3_000_000}
        decided = await http.post(
            f"{url}/decisions",
            json={"decisions": {"refund-9": {"approved": True, "args": edited}}},
        )
        still = (await http.get(url)).json()["waiting"]
        await http.post(f"{url}/decisions", json={"decisions": {"refund-9": False}})

    assert (decided.status_code, decided.json()) == (
        413,
        {
            "error": "the edited arguments of call 'refund-9' are 3000037 bytes: at most 524288",
            "code": "too_large",
        },
    )
    assert [c["id"] for c in still] == ["refund-9"]


@pytest.mark.usefixtures("both_shapes")
async def test_decisions_carry_edits_and_reasons_and_bad_ones_change_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        conversation = (await http.post("/conversations", json={"agent": "refunds"})).json()["id"]
        await http.post(f"/conversations/{conversation}/messages", json={"text": "Refund 9"})
        parse((await http.get(f"/conversations/{conversation}/events")).text)  # until it waits
        url = f"/conversations/{conversation}/decisions"
        mixed = await http.post(
            url, json={"decisions": {"refund-9": {"approved": True, "reason": "fine"}}}
        )
        invalid = await http.post(
            url, json={"decisions": {"refund-9": {"approved": True, "args": {"order": "nine"}}}}
        )
        still = (await http.get(f"/conversations/{conversation}")).json()["waiting"]
        edited = await http.post(
            url,
            json={
                "decisions": {"refund-9": {"approved": True, "args": {"order": 9, "amount": 90}}}
            },
        )
        await http.post(f"/conversations/{conversation}/messages", json={"text": "Refund 8"})
        parse((await http.get(f"/conversations/{conversation}/events")).text)
        denied = await http.post(
            url, json={"decisions": {"refund-8": {"approved": False, "reason": "offer credit"}}}
        )
        transcript = (await http.get(f"/conversations/{conversation}")).json()["messages"]

    assert (mixed.status_code, mixed.json()["error"]) == (
        400,
        "call 'refund-9' is approved: a reason is for a denial",
    )
    assert (invalid.status_code, invalid.json()["code"]) == (422, "invalid_decision")
    assert "order" in invalid.json()["error"]
    assert [c["id"] for c in still] == ["refund-9"]  # nothing was sent
    assert edited.json()["output"] == "Done: order 9 refunded 90."
    assert denied.json()["output"] == "No refund: offer credit."
    decided = [m for m in transcript if m.get("decision")]
    assert [(m["toolCallId"], m["decision"]["approved"]) for m in decided] == [
        ("refund-9", True),
        ("refund-8", False),
    ]


async def test_the_openapi_document_names_every_path(temporal_env: WorkflowEnvironment) -> None:
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        document = (await http.get("/openapi.json")).json()

    assert document["openapi"] == "3.1.0"
    assert sorted(document["paths"]) == [
        "/",
        "/agents/{agent}/agui",
        "/agents/{agent}/chat",
        "/conversations",
        "/conversations/{id}",
        "/conversations/{id}/close",
        "/conversations/{id}/decisions",
        "/conversations/{id}/events",
        "/conversations/{id}/messages",
        "/conversations/{id}/tool-results",
        "/openapi.json",
        "/pending",
    ]


async def test_the_inbox_names_a_waiting_conversation_no_worker_answers_for_not_a_500(
    temporal_env: WorkflowEnvironment, both_shapes: str
) -> None:
    """GET /pending asks each conversation that waits for its calls: one whose worker is
    gone is named as unreachable, and the rest are listed."""
    async with (
        serving(temporal_env, worker=False) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        plugin = GolemPlugin(refunds, heartbeat_timeout=timedelta(seconds=5))
        async with Worker(temporal_env.client, task_queue=server.task_queue, plugins=[plugin]):
            created = await http.post("/conversations", json={"agent": "refunds"})
            conversation = created.json()["id"]
            await http.post(f"/conversations/{conversation}/messages", json={"text": "Refund 42"})
            parse((await http.get(f"/conversations/{conversation}/events")).text)  # it waits
            before = (await http.get("/pending")).json()
        after = await http.get("/pending")  # its worker is gone
        async with Worker(temporal_env.client, task_queue=server.task_queue, plugins=[plugin]):
            await http.post(
                f"/conversations/{conversation}/decisions",
                json={"decisions": {"refund-42": {"approved": False}}},
            )
    assert [(c["conversationId"], c["id"]) for c in before["pending"]] == [
        (conversation, "refund-42")
    ]
    assert after.status_code == 200, after.text
    [unreachable] = [u for u in after.json()["unreachable"] if u["conversationId"] == conversation]
    assert "does not answer" in unreachable["error"]
    assert all(c["conversationId"] != conversation for c in after.json()["pending"])


@pytest.mark.usefixtures("both_shapes")
async def test_without_a_worker_a_turn_is_a_503_naming_it_and_a_read_is_no_500(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The likeliest first mistake: golem serve up, no worker. The send hung (the turn is
    never taken) and the conversation's read was a 500 once its query timed out."""
    monkeypatch.setattr(threads_module, "NO_WORKER_AFTER", 0.5)
    async with (
        serving(temporal_env, worker=False) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        url = f"/conversations/{await started(http)}"
        sent = await http.post(f"{url}/messages", json={"text": "Refund order 4"})
        read = await http.get(url)
        user = {"id": "u1", "role": "user", "content": "Refund order 6"}
        streamed = await agui(http, str(uuid.uuid4()), messages=[user])
        parts = [{"type": "text", "text": "Refund order 7"}]
        chat = {"id": str(uuid.uuid4()), "messages": [{"id": "m1", "role": "user", "parts": parts}]}
        chatted = chunks((await http.post("/agents/refunds/chat", json=chat)).text)
        plugin = GolemPlugin(refunds)
        async with Worker(temporal_env.client, task_queue=server.task_queue, plugins=[plugin]):

            async def asks() -> bool:  # the queued turn ran once a worker came
                return bool((await http.get(url)).json()["waiting"])

            await eventually(asks, what="the queued turn to wait for approval")
            turned = parse((await http.get(f"{url}/events")).text)
            await http.post(f"{url}/decisions", json={"decisions": {"refund-4": False}})

    assert sent.status_code == 503, sent.text
    problem = sent.json()
    assert problem["code"] == "no_worker"
    assert f"no worker polls task queue '{server.task_queue}'" in problem["error"]
    assert "the turn is queued" in problem["error"] and problem["runId"]
    assert (read.status_code, read.json()["messages"]) == (200, [])
    assert turned[-1]["event"] == "waiting"
    # The streams say so too (they waited silently), their turns queued as the REST one.
    assert kinds(streamed) == ["RUN_STARTED", "RUN_ERROR"]
    assert streamed[-1].code == "no_worker" and "the turn is queued" in streamed[-1].message
    assert chatted[-3:-1] == [
        {"type": "data-golem-error", "data": {"code": "no_worker"}, "transient": True},
        {"type": "error", "errorText": chatted[-2]["errorText"]},
    ]
    assert f"no worker polls task queue '{server.task_queue}'" in chatted[-2]["errorText"]


@pytest.mark.usefixtures("both_shapes")
async def test_many_readers_of_a_waiting_turn_leave_no_poll_behind(
    temporal_env: WorkflowEnvironment,
) -> None:
    """Each reader that came back to a turn waiting in a run below it (triage's delegate
    billing asks) left a long poll waiting in that run's workflow (a cancelled call does
    not end Temporal's update), and Temporal takes 10 at most: a later reader hung (child
    runs), or the approval was refused ("limit on number of concurrent in-flight
    updates": inline, where the polls and the approval go to one workflow)."""
    async with (
        serving(temporal_env, [triage]) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        url, first = await charged_twice(http)
        readers = []
        for _ in range(12):
            async with asyncio.timeout(20):
                again = await http.get(f"{url}/events", headers={"Last-Event-ID": first[-2]["id"]})
            readers.append(parse(again.text))
        async with asyncio.timeout(20):
            fresh = parse((await http.get(f"{url}/events")).text)
        asked = (await http.get(url)).json()["prompt"]  # of billing's run, handed the turn
        decided = await http.post(f"{url}/decisions", json={"decisions": {"refund-1": True}})

    assert first[-1]["event"] == "waiting"
    # A resume from the last event before the end: the end alone.
    assert all(
        [(e["event"], e["data"]) for e in r] == [("waiting", first[-1]["data"])] for r in readers
    )
    assert [e["event"] for e in fresh] == [e["event"] for e in first]
    assert decided.status_code == 200, decided.text
    assert asked == "I was charged twice"
