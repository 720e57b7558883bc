"""The Vercel AI SDK's UI message stream at POST /agents/{agent}/chat: read by the real
`ai` package's chat (tests/serve/chat_client.mjs, what useChat runs), through a tool
approval round trip; and the stream's chunks as they go over the wire."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from serve_support import DEADLINE, node_client, serving
from temporalio.testing import WorkflowEnvironment


def chunks(body: str) -> list[Any]:
    lines = body.replace("\r\n", "\n").splitlines()
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    return [d if d == "[DONE]" else json.loads(d) for d in data]


@pytest.mark.usefixtures("both_shapes")
async def test_the_real_chat_asks_for_approval_and_the_follow_up_finishes_the_same_turn(
    temporal_env: WorkflowEnvironment,
) -> None:
    chat_id = str(uuid.uuid4())
    async with serving(temporal_env) as server:
        seen = await node_client(
            "chat_client.mjs",
            {
                "url": f"{server.url}/agents/refunds/chat",
                "chatId": chat_id,
                "prompt": "Refund order 42",
                "approved": True,
            },
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http:
            transcript = (await http.get(f"/conversations/{chat_id}")).json()["messages"]

    assert seen["errors"] == []
    asked = seen["asked"][-1]
    assert asked["role"] == "assistant"
    assert asked["parts"] == [
        {
            "type": "tool-refund",
            "state": "approval-requested",
            "toolCallId": "refund-42",
            "output": None,
        }
    ]
    final = seen["messages"]
    assert [m["role"] for m in final] == ["user", "assistant"]  # the same assistant message goes on
    assert final[-1]["id"] == asked["id"]
    assert final[-1]["parts"] == [
        {
            "type": "tool-refund",
            "state": "output-available",
            "toolCallId": "refund-42",
            "output": "order 42 refunded 150",
        },
        {"type": "text", "text": "Done: order 42 refunded 150."},
    ]
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "assistant"]


async def test_the_real_chat_reads_the_code_of_an_error_from_a_data_part(
    temporal_env: WorkflowEnvironment,
) -> None:
    """UI message streams' error chunk carries text only: the code (REST's, AG-UI's) goes
    first in a transient data part, which the chat hands to onData."""
    async with serving(temporal_env) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http:
            chat_id = (await http.post("/conversations", json={"agent": "refunds"})).json()["id"]
            await http.post(f"/conversations/{chat_id}/close")
        job = {"url": f"{server.url}/agents/refunds/chat", "chatId": chat_id, "prompt": "hi"}
        seen = await node_client("chat_client.mjs", {**job, "approved": True})

    said = f"conversation {chat_id} is completed; fork it to go on"
    assert [e.removeprefix("Error: ") for e in seen["errors"]] == [said]
    assert seen["data"] == [
        {"type": "data-golem-error", "data": {"code": "closed"}, "transient": True}
    ]


@pytest.mark.usefixtures("both_shapes")
async def test_the_wire_carries_the_header_start_approval_requests_finish_and_done(
    temporal_env: WorkflowEnvironment,
) -> None:
    chat_id = str(uuid.uuid4())
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Refund order 3"}]}
    async with (
        serving(temporal_env) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        asked = await http.post("/agents/refunds/chat", json={"id": chat_id, "messages": [user]})
        message_id = chunks(asked.text)[0]["messageId"]
        responded = {
            "id": message_id,
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-refund",
                    "toolCallId": "refund-3",
                    "state": "approval-responded",
                    "input": {"order": 3, "amount": 150},
                    "approval": {"id": "refund-3", "approved": False},
                }
            ],
        }
        body = {"id": chat_id, "messages": [user, responded]}
        denied = await http.post("/agents/refunds/chat", json=body)
        again = await http.post("/agents/refunds/chat", json=body)
        malformed = await http.post("/agents/refunds/chat", json={"id": chat_id})

    assert asked.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert [c if c == "[DONE]" else c["type"] for c in chunks(asked.text)] == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "finish-step",
        "tool-approval-request",
        "finish",
        "[DONE]",
    ]
    wire = chunks(denied.text)
    assert wire[0] == {"type": "start", "messageId": message_id}
    assert {"type": "tool-output-denied", "toolCallId": "refund-3"} in wire
    assert wire[-2:] == [{"type": "finish", "finishReason": "stop"}, "[DONE]"]
    assert (again.status_code, again.json()["error"]) == (
        409,
        f"chat {chat_id} does not wait for refund-3: it waits for nothing",
    )
    assert malformed.status_code == 400
