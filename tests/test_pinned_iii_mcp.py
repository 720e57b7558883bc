"""MCP behaviours a planted bug once slipped past (issue 29, "Tests that were missing"): the
error class of each kind of error answer, audio content parts, two servers in one agent
durably, and a toolset's timeout durably."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from agents import FAST_RETRY, ask, call, scripted
from mcp.types import INTERNAL_ERROR, METHOD_NOT_FOUND
from mcp_servers.kinds_server import CLIP
from mcp_support import SERVERS, HTTPServer, Log, http_server
from runners import Runner
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from test_mcp_durable import activities, events, serve

from golem import Retry
from golem.client import DurableAgent
from golem.messages import Message, Part
from golem.results import RunError


@pytest.fixture(scope="module")
async def kinds(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HTTPServer]:
    """tests/mcp_servers/kinds_server.py over HTTP, one process for the module's tests."""
    folder = tmp_path_factory.mktemp("kinds")
    async with http_server(folder, SERVERS / "kinds_server.py", "kinds") as server:
        yield server


@pytest.fixture(scope="module")
async def docs(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HTTPServer]:
    async with http_server(tmp_path_factory.mktemp("docs")) as server:
        yield server


@pytest.mark.parametrize(
    ("code", "attempts"),
    [(METHOD_NOT_FOUND, 1), (INTERNAL_ERROR, 3), (-32050, 3)],
    ids=["method-not-found", "internal-error", "server-defined"],
)
async def test_an_error_answer_a_retry_cannot_fix_is_tried_once_any_other_per_the_policy(
    runner: Runner, kinds: HTTPServer, code: int, attempts: int
) -> None:
    log = Log(kinds.log)
    agent, _ = scripted(
        [ask(call("c1", "refuse", code=code))],
        toolsets=[kinds.toolset(retry=FAST_RETRY)],  # three attempts
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    assert log() == [f"refuse:{code}"] * attempts
    assert caught.value.stage == "tool"
    assert f"refused with {code}" in str(caught.value)
    assert caught.value.partial is not None
    [closed] = [m for m in caught.value.partial.messages if m.role == "tool"]
    assert closed.failed and closed.tool_call_id == "c1"


async def test_audio_content_is_an_audio_part_of_the_tool_message(
    runner: Runner, kinds: HTTPServer
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "sound")), Message.assistant("heard")], toolsets=[kinds.toolset()]
    )

    result = await runner(agent, "play it")

    [heard] = [m for m in result.messages if m.role == "tool"]
    assert (heard.content, heard.parts, heard.failed) == (
        "a clip",
        [Part(kind="audio", data=CLIP, media_type="audio/wav")],
        False,
    )


async def test_two_mcp_servers_in_one_agent_each_list_and_answer_their_own_calls_durably(
    temporal_client: Client, docs: HTTPServer, kinds: HTTPServer
) -> None:
    docs_log, kinds_log = Log(docs.log), Log(kinds.log)
    agent, model = scripted(
        [
            ask(call("c1", "read", path="a"), call("c2", "sound")),
            Message.assistant("both"),
        ],
        toolsets=[docs.toolset().filtered(["read"]), kinds.toolset().filtered(["refuse", "sound"])],
    )
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
        done = await activities(temporal_client, result.run_id)

    assert sorted(t.name for t in model.requests[0].tools) == ["read", "refuse", "sound"]
    assert [(m.tool_name, m.content) for m in result.messages if m.role == "tool"] == [
        ("read", "contents of a"),
        ("sound", "a clip"),
    ]
    assert (docs_log(), kinds_log()) == (["read"], ["sound"])
    listed = [d for d in done if d[0].endswith(".list-tools")]
    assert sorted(listed) == [
        ("temporalio.mcp.docs.list-tools", "mcp: docs (tool list)"),
        ("temporalio.mcp.kinds.list-tools", "mcp: kinds (tool list)"),
    ]
    assert sorted(d for d in done if d[0].endswith(".call-tool")) == [
        ("temporalio.mcp.docs.call-tool", "mcp: docs.read"),
        ("temporalio.mcp.kinds.call-tool", "mcp: kinds.sound"),
    ]


async def test_durably_the_model_sees_the_toolsets_tools_in_the_agents_order(
    temporal_client: Client, docs: HTTPServer, kinds: HTTPServer
) -> None:
    slow = kinds.toolset(headers={"x-list-delay": "0.5"}).filtered(["sound"])
    agent, model = scripted(
        [Message.assistant("none needed")] * 2, toolsets=[slow, docs.toolset().filtered(["read"])]
    )
    async with serve(temporal_client, agent) as tq:
        await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    await agent.run("go")  # in process, the agent's order
    durable, local = ([t.name for t in r.tools] for r in model.requests)
    assert local == ["sound", "read"]
    assert durable == local


async def test_a_toolsets_timeout_bounds_its_listing_and_each_call_durably(
    temporal_client: Client, kinds: HTTPServer
) -> None:
    log = Log(kinds.log)
    server = kinds.toolset(timeout=timedelta(seconds=3), retry=Retry(max_attempts=1))
    agent, _ = scripted([ask(call("c1", "stall"))], toolsets=[server])
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        with pytest.raises(RunError) as caught:
            # Far below the five minutes a call would get without the toolset's timeout.
            await asyncio.wait_for(durable.run("go"), 30)
        assert caught.value.partial is not None
        history = await events(temporal_client, caught.value.partial.run_id)
    assert log() == ["stall"]
    assert caught.value.stage == "tool"
    assert "timed out (start-to-close)" in str(caught.value)
    timeouts = {
        e.activity_task_scheduled_event_attributes.activity_type.name: (
            e.activity_task_scheduled_event_attributes.start_to_close_timeout.ToTimedelta()
        )
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name.startswith(
            "temporalio.mcp."
        )
    }
    assert timeouts == {
        "temporalio.mcp.kinds.list-tools": timedelta(seconds=3),
        "temporalio.mcp.kinds.call-tool": timedelta(seconds=3),
    }
