"""What the Temporal UI shows of a run: current details, a closed run's outcome, its ids."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from waiting import eventually

from golem import Message, ToolCall
from golem.agent import Agent
from golem.client import DurableAgent
from golem.models import ScriptedModel
from golem.results import RunError
from golem.testing import STARTUP_TIMEOUT, temporal_cli
from golem.wire import lineage, names
from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin


def serve(client: Client, agent: Agent[object, object]) -> tuple[Worker, str]:
    task_queue = f"ui-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    return Worker(client, task_queue=task_queue, plugins=[plugin]), task_queue


def in_flight(details: str) -> str:
    return details.split("**tools in flight** ", 1)[1].strip()


async def test_a_finished_tool_leaves_tools_in_flight_at_once(temporal_client: Client) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    model = ScriptedModel(
        [
            Message.assistant(
                "",
                [
                    ToolCall(id="f", name="fast", args="{}"),
                    ToolCall(id="s", name="slow", args="{}"),
                ],
            ),
            Message.assistant("done"),
        ]
    )
    agent: Agent[object, object] = Agent(model, name="in_flight")

    @agent.tool
    def fast() -> str:
        """Returns at once."""
        return "quick"

    @agent.tool
    async def slow() -> str:
        """Waits to be released."""
        started.set()
        await release.wait()
        return "released"

    worker, tq = serve(temporal_client, agent)
    async with worker:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("go")
        await started.wait()

        async def details() -> str:
            metadata = await run.handle.query(
                "__temporal_workflow_metadata", result_type=WorkflowMetadata
            )
            return metadata.current_details

        try:

            async def only_slow() -> bool:
                return in_flight(await details()) == "slow"

            await eventually(only_slow, what="the UI to show only slow in flight", timeout=20)
            pending = (await run.handle.describe()).raw_description.pending_activities
            assert [p.activity_type.name for p in pending] == ["golem.tool"]
        finally:
            release.set()
        assert (await run.result()).output == "done"
        assert in_flight(await details()) == "none"


async def test_a_closed_run_shows_its_outcome_in_its_memo(temporal_client: Client) -> None:
    model = ScriptedModel(
        [
            Message.assistant("", [ToolCall(id="w", name="weather", args="{}")]),
            Message.assistant("Sunny in Lisbon, " + "very " * 60 + "nice."),
        ]
    )
    agent: Agent[object, object] = Agent(model, name="outcome")

    @agent.tool
    def weather() -> str:
        """The weather."""
        return "sunny"

    worker, tq = serve(temporal_client, agent)
    async with worker:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("weather?")
    # Read without a worker: the memo is part of the closed workflow.
    described = await temporal_client.get_workflow_handle(result.run_id).describe()
    outcome = await described.memo_value(names.OUTCOME_MEMO)
    assert outcome["stopReason"] == "completed"
    assert outcome["output"].startswith("Sunny in Lisbon, very") and len(outcome["output"]) == 200
    assert (outcome["turns"], outcome["requests"], outcome["toolCalls"]) == (2, 2, 1)
    assert outcome["inputTokens"] == result.usage.input_tokens
    assert outcome["outputTokens"] == result.usage.output_tokens


async def test_a_failed_run_shows_its_stage_in_its_memo(temporal_client: Client) -> None:
    model = ScriptedModel([Message.assistant("", [ToolCall(id="b", name="bad", args="{}")])])
    agent: Agent[object, object] = Agent(model, name="outcome_failed")

    @agent.tool(retry_attempts=1)
    def bad() -> str:
        """Breaks."""
        raise ValueError("broken")

    worker, tq = serve(temporal_client, agent)
    async with worker:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("go")
        try:
            await run.result()
            raise AssertionError("the run should fail")
        except RunError as exc:
            assert exc.stage == "tool"
    described = await run.handle.describe()
    outcome = await described.memo_value(names.OUTCOME_MEMO)
    assert outcome["stopReason"] == "failed at tool"
    # The failure the UI shows: stage, tool and cause on its first line, no SDK wrapper.
    async for event in run.handle.fetch_history_events():
        if event.HasField("workflow_execution_failed_event_attributes"):
            failure = event.workflow_execution_failed_event_attributes.failure
    first = failure.message.splitlines()[0]
    assert (
        first.startswith("run failed at stage 'tool': tool 'bad'") and "ValueError: broken" in first
    )
    assert not failure.HasField("cause")
    # Its tool call ran (and failed): it counts (issue 19: it used to say 0).
    assert (outcome["requests"], outcome["toolCalls"]) == (1, 1)


async def test_the_ui_details_name_golems_run_id(temporal_client: Client) -> None:
    agent: Agent[object, object] = Agent(ScriptedModel([Message.assistant("hi")]), name="named_run")
    worker, tq = serve(temporal_client, agent)
    async with worker:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("hello")
    described = await temporal_client.get_workflow_handle(result.run_id).describe()
    details = await described.static_details()
    assert details is not None
    assert f"**golem run id** {result.run_id} (the Workflow ID" in details
    assert f"**conversation** {result.conversation_id}" in details


def keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


async def test_every_payload_of_a_run_uses_camel_case_keys(temporal_client: Client) -> None:
    model = ScriptedModel(
        [
            Message.assistant("", [ToolCall(id="w", name="weather", args="{}")]),
            Message.assistant("sunny"),
            Message.assistant("still sunny"),
        ]
    )
    agent: Agent[object, object] = Agent(model, name="camel")

    @agent.tool
    def weather() -> str:
        """The weather."""
        return "sunny"

    worker, tq = serve(temporal_client, agent)
    async with worker:
        first = await DurableAgent(temporal_client, agent, task_queue=tq).run("one")
        second = await DurableAgent(temporal_client, agent, task_queue=tq).run(
            "two", history=first.messages
        )
    found: set[str] = set()
    async for event in temporal_client.get_workflow_handle(second.run_id).fetch_history_events():
        for attrs in (
            event.workflow_execution_started_event_attributes.input,
            event.activity_task_scheduled_event_attributes.input,
            event.activity_task_completed_event_attributes.result,
            event.workflow_execution_completed_event_attributes.result,
        ):
            for payload in attrs.payloads:
                found |= keys(json.loads(payload.data))
    assert {"runId", "conversationId", "parentRunId"} <= found
    assert sorted(k for k in found if "_" in k) == []


async def test_runs_and_conversations_start_where_the_namespace_lacks_golem_summary() -> None:
    # A namespace set up by golem 0.2.0: its three search attributes, no GolemSummary.
    old = (lineage.CONVERSATION_ID, lineage.AGENT, lineage.PARENT_RUN_ID)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        dev_server_startup_timeout=STARTUP_TIMEOUT,
        data_converter=golem_data_converter,
        search_attributes=old,
        dev_server_extra_args=["--log-level", "error"],
    )
    try:
        model = ScriptedModel([Message.assistant("one"), Message.assistant("two")])
        agent: Agent[object, object] = Agent(model, name="unlisted")
        worker, tq = serve(env.client, agent)
        async with worker:
            durable = DurableAgent(env.client, agent, task_queue=tq)
            done = await durable.run("first")
            turn = await (await durable.conversation()).send("second")
        assert (done.output, turn.output) == ("one", "two")
        described = await env.client.get_workflow_handle(turn.run_id).describe()
        assert described.typed_search_attributes.get(lineage.SUMMARY) is None
        assert described.typed_search_attributes.get(lineage.AGENT) == "unlisted"
    finally:
        await env.shutdown()


async def test_an_encrypting_client_leaves_the_prompt_out_of_the_search_attributes(
    temporal_client: Client,
) -> None:
    model = ScriptedModel([Message.assistant("sealed")])
    agent: Agent[object, object] = Agent(model, name="sealed")
    config = temporal_client.service_client.config
    plugin = GolemPlugin(agent, encryption_key=bytes(range(32)))
    client = await Client.connect(config.target_host, plugins=[plugin])
    task_queue = f"ui-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue):
        done = await DurableAgent(client, agent, task_queue=task_queue).run("my secret order")
    described = await client.get_workflow_handle(done.run_id).describe()
    assert described.typed_search_attributes.get(lineage.SUMMARY) is None
    assert described.typed_search_attributes.get(lineage.AGENT) == "sealed"
