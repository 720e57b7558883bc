"""MCP toolsets durably: each operation an activity of temporalio.mcp, the tool list read
once per run, approvals waited for in the run's workflow, server processes owned by the
worker (none outlives a worker killed mid-call), and a recorded run that replays."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import ask, call, scripted
from mcp_agents import agents, replayed
from mcp_support import alive, files_server, http_server, killed, lines, started
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from test_crash import TAKEN_OVER
from waiting import eventually, within

from golem.agent import Agent
from golem.client import DurableAgent
from golem.history.repair import OUTCOME_UNKNOWN_RESULT, normalize_history
from golem.mcp import MCPServer
from golem.messages import Message
from golem.models import FunctionModel
from golem.results import RunError
from golem.worker import GolemPlugin

WORKER = Path(__file__).parent / "mcp_worker.py"
SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED


@asynccontextmanager
async def serve(
    client: Client, *served: Agent[Any, Any], heartbeat: float = 5
) -> AsyncIterator[str]:
    task_queue = f"mcp-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(*served, heartbeat_timeout=timedelta(seconds=heartbeat))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        yield task_queue


async def events(client: Client, run_id: str) -> list[HistoryEvent]:
    return [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]


async def activities(client: Client, run_id: str) -> list[tuple[str, str]]:
    """Each scheduled activity's type and the summary the UI shows for it."""
    converter = client.data_converter.payload_converter
    return [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            converter.from_payloads([e.user_metadata.summary])[0],
        )
        for e in await events(client, run_id)
        if e.event_type == SCHEDULED
    ]


async def test_each_mcp_call_is_an_activity_naming_server_and_tool_and_the_list_is_read_once(
    temporal_client: Client, tmp_path: Path
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "read", path="a")), ask(call("c2", "picture")), Message.assistant("ok")],
        toolsets=[files_server(tmp_path)],
    )
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
        pids = lines(tmp_path, "pids")
        assert len(pids) == 1 and alive(int(pids[0]))  # the worker's server, kept for reuse
    model = f"model: {agent.model_name}"
    assert await activities(temporal_client, result.run_id) == [
        ("temporalio.mcp.files.list-tools", "mcp: files (tool list)"),
        ("golem.model_request", f"{model} (turn 1)"),
        ("temporalio.mcp.files.call-tool", "mcp: files.read"),
        ("golem.model_request", f"{model} (turn 2)"),
        ("temporalio.mcp.files.call-tool", "mcp: files.picture"),
        ("golem.model_request", f"{model} (turn 3)"),
    ]
    assert not alive(int(pids[0]))  # closed when its worker stopped


async def test_a_conversation_reads_the_tool_list_once_per_turn(
    temporal_client: Client, tmp_path: Path
) -> None:
    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user":
            return ask(call(f"c{len(messages)}", "read", path=messages[-1].content))
        return Message.assistant(messages[-1].content)

    agent = Agent(FunctionModel(answer), name="mcp_talk", toolsets=[files_server(tmp_path)])
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        first = await conv.send("a")
        second = await conv.send("b")
    assert (first.output, second.output) == ("contents of a", "contents of b")
    for run_id in (first.run_id, second.run_id):
        kinds = [kind for kind, _ in await activities(temporal_client, run_id)]
        assert kinds.count("temporalio.mcp.files.list-tools") == 1


async def test_a_durable_run_waits_for_approval_of_an_mcp_tool_and_the_call_runs_once(
    temporal_client: Client, tmp_path: Path
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "delete", path="a")), Message.assistant("deleted")],
        toolsets=[files_server(tmp_path, requires_approval=lambda name: name == "delete")],
    )
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("clean up")
        paused = await run.result()
        before = lines(tmp_path)
        done = await run.approve({"c1": True})
    assert paused.pending_approvals == [call("c1", "delete", path="a")] and before == []
    assert done.run_id == run.run_id and done.output == "deleted"
    assert lines(tmp_path) == ["delete"]
    kinds = [kind for kind, _ in await activities(temporal_client, run.run_id)]
    assert kinds.count("temporalio.mcp.files.list-tools") == 1  # kept while the run waited
    assert kinds.count("temporalio.mcp.files.call-tool") == 1


async def test_mcp_calls_are_tool_events_in_a_durable_stream(
    temporal_client: Client, tmp_path: Path
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "read", path="a")), Message.assistant("ok")],
        toolsets=[files_server(tmp_path)],
    )
    async with serve(temporal_client, agent) as tq:
        stream = DurableAgent(temporal_client, agent, task_queue=tq).run_stream("go")
        seen = [(e.kind, e.call.name if e.call else "") async for e in stream]
    tools = [(kind, name) for kind, name in seen if kind in ("tool_start", "tool_end")]
    assert tools == [("tool_start", "read"), ("tool_end", "read")]
    assert stream.result.output == "ok"


async def test_headers_stay_on_the_worker_and_out_of_the_history(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with http_server(tmp_path) as docs:
        fixed = MCPServer.http("docs", url=docs.url, headers={"Authorization": "Bearer s3cret-1"})
        made = MCPServer.http(
            "docs_made",
            url=docs.url,
            prefix="made",
            headers=lambda ctx: {"Authorization": f"Bearer s3cret-2-{ctx.agent_name}"},
        )
        agent, _ = scripted(
            [
                ask(call("c1", "whoami"), call("c2", "made_read", path="b")),
                Message.assistant("ok"),
            ],
            toolsets=[fixed.filtered(["whoami"]), made],
        )
        async with serve(temporal_client, agent) as tq:
            result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    results = [m.content for m in result.messages if m.role == "tool"]
    assert results == ["Bearer s3cret-1", "contents of b"]  # they reached the server
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in await events(temporal_client, result.run_id)
        if e.event_type == SCHEDULED
    ]
    mcp = [a for a in scheduled if a.activity_type.name.startswith("temporalio.mcp.")]
    assert len(mcp) == 4  # two listings, two calls
    # What the run sent its MCP activities carries no header (whoami's answer does, later).
    assert not any(b"s3cret" in a.SerializeToString() for a in mcp)


# -- a worker killed mid-call ------------------------------------------------------------------


async def crash_then_take_over(env: WorkflowEnvironment, agent: str, log: Path) -> object:
    """Start a run on a worker process, kill it (SIGKILL) while ``slow`` runs on its stdio
    server, then serve the run from this process: its result, or its error and resumption."""
    task_queue = f"mcp-crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(env.client, agent, task_queue=task_queue)
    address = env.client.service_client.config.target_host
    worker = await started(str(WORKER), address, task_queue, env={"MCP_TEST_DIR": str(log)})
    try:
        run = await durable.start("go")
        await eventually(lambda: lines(log, "started"), what="slow to start", interval=0.02)
        [orphan] = lines(log, "pids")
    finally:
        await killed(worker)
    # Its stdio server reads the end of its input and goes: no process outlives the worker.
    await eventually(
        lambda: not alive(int(orphan)), what="the stdio server to end", timeout=10, interval=0.02
    )
    (log / "release").touch()  # from now on a call of slow answers at once
    plugin = GolemPlugin(*agents(log), heartbeat_timeout=timedelta(seconds=2))
    async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
        try:
            return await within(run.result(), what=TAKEN_OVER)
        except RunError as error:
            return error, await durable.resume(error, "try again")


async def test_a_worker_killed_during_an_mcp_call_is_replaced_and_the_call_runs_again(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    result: Any = await crash_then_take_over(temporal_env, "mcp_idempotent", tmp_path)
    assert result.output == "finished: slow x done"
    assert lines(tmp_path) == ["slow:x", "slow:x"]  # at least once: it ran again
    assert not any(alive(int(pid)) for pid in lines(tmp_path, "pids"))


async def test_an_at_most_once_mcp_call_whose_worker_died_is_closed_as_outcome_unknown(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    outcome: Any = await crash_then_take_over(temporal_env, "mcp_at_most_once", tmp_path)
    error, resumed = outcome
    assert lines(tmp_path) == ["slow:x"]  # never repeated
    assert error.stage == "tool"
    partial = error.partial
    assert [m.role for m in partial.messages] == ["user", "assistant", "tool"]
    assert partial.messages[-1].content == OUTCOME_UNKNOWN_RESULT
    assert not normalize_history(partial.messages)[1].changed  # resume needs no repair
    assert resumed.output == f"finished: {OUTCOME_UNKNOWN_RESULT}"
    assert not any(alive(int(pid)) for pid in lines(tmp_path, "pids"))


async def test_an_mcp_call_heartbeats_while_its_server_works_and_outlives_the_heartbeat_timeout(
    temporal_client: Client, tmp_path: Path
) -> None:
    [agent, _] = agents(tmp_path)  # calls slow, which answers once the test releases it
    async with serve(temporal_client, agent, heartbeat=2) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("go")

        async def heartbeat_heard() -> bool:
            """Whether the server has heard the call's activity heartbeat."""
            pending = (await run.handle.describe()).raw_description.pending_activities
            calls = [a for a in pending if a.activity_type.name.endswith(".call-tool")]
            return any(a.HasField("last_heartbeat_time") for a in calls)

        # Past 2 s without a heartbeat the attempt would time out and run slow again.
        await eventually(heartbeat_heard, what="the MCP call's heartbeat", timeout=20)
        (tmp_path / "release").touch()
        result = await run.result()
    assert result.output == "finished: slow x done"
    assert lines(tmp_path) == ["slow:x"]  # one attempt: heartbeats kept it alive


# -- recorded runs (tests/record_mcp_histories.py) ---------------------------------------------

HISTORIES = sorted((Path(__file__).parent / "histories" / "mcp").glob("*.json"))
#: Released corpora replay too (docs/adr/0015): recorded once, never again.
RELEASED = sorted((Path(__file__).parent / "histories").glob("release-*/mcp/*.json"))


def recorded(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def test_the_recorded_mcp_histories_hold_what_they_were_recorded_for() -> None:
    assert [p.stem for p in HISTORIES] == ["mcp_approval", "mcp_tools"]
    for path in HISTORIES:
        kinds = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in recorded(path).events
            if e.event_type == SCHEDULED
        ]
        assert kinds[0] == "temporalio.mcp.files.list-tools"
        assert kinds.count("temporalio.mcp.files.list-tools") == 1
    tools = recorded(HISTORIES[1]).events
    failed = [e for e in tools if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert len(failed) == 1  # the invalid arguments, answered as a failed result
    approval = recorded(HISTORIES[0]).events
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in approval
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert "golem.approve" in updates


@pytest.mark.parametrize("path", [*HISTORIES, *RELEASED], ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_a_recorded_mcp_run_replays_deterministically(path: Path, tmp_path: Path) -> None:
    replayer = Replayer(workflows=[], plugins=[GolemPlugin(*replayed(tmp_path))])
    result = await replayer.replay_workflow(recorded(path), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    assert lines(tmp_path, "pids") == []  # replay starts no server
