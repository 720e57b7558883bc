"""Behaviour only a durable run has: workflow identity, lineage, payload bytes, bad input,
cancellation and resume, and what the Temporal UI shows."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker
from waiting import eventually

from golem import Message, ToolCall, load_messages
from golem.activities import MessageCache
from golem.agent import Agent
from golem.client import (
    AGENT,
    CONVERSATION_ID,
    PARENT_RUN_ID,
    DurableAgent,
    UnknownAgentError,
    fetch_run,
)
from golem.history.repair import OUTCOME_UNKNOWN_RESULT, normalize_history
from golem.messages import HistoryError, Part
from golem.models import FunctionModel, ModelHTTPError, ScriptedModel
from golem.results import RunError
from golem.retry import Retry
from golem.tools import Canceled, RunContext
from golem.worker import GolemPlugin


@asynccontextmanager
async def serve(
    client: Client,
    *agents: Agent[Any, Any],
    heartbeat: float = 5,
    cache: MessageCache | None = None,
    inline: int | None = None,
    task_queue: str = "",
) -> AsyncIterator[str]:
    task_queue = task_queue or f"durable-{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {} if inline is None else {"inline_messages_bytes": inline}
    plugin = GolemPlugin(
        *agents, heartbeat_timeout=timedelta(seconds=heartbeat), message_cache=cache, **options
    )
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        yield task_queue


def tool_turns(turns: int, result_bytes: int = 0) -> tuple[Agent[Any, Any], FunctionModel]:
    """An agent that calls ``fetch`` ``turns`` times, then answers."""

    def answer(messages: list[Message], tools: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < turns:
            return Message.assistant(
                "", [ToolCall(id=f"call-{done}", name="fetch", args=f'{{"n": {done}}}')]
            )
        return Message.assistant(f"done after {done} tools")

    model = FunctionModel(answer)
    agent = Agent(model, name=f"turns{turns}")

    @agent.tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return (f"page {n} " * result_bytes)[:result_bytes] if result_bytes else f"page {n}"

    return agent, model


async def history_events(client: Client, run_id: str) -> list[Any]:
    return [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]


async def test_workflow_id_is_the_run_id_and_search_attributes_mirror_lineage(
    temporal_client: Client,
) -> None:
    agent, _ = tool_turns(1)
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        first = await durable.run("one")
        second = await durable.run("two", history=first.messages)
    assert second.conversation_id == first.conversation_id
    assert second.run_id != first.run_id
    one = await temporal_client.get_workflow_handle(first.run_id).describe()
    two = await temporal_client.get_workflow_handle(second.run_id).describe()
    assert one.id == first.run_id and two.id == second.run_id
    assert one.typed_search_attributes.get(CONVERSATION_ID) == first.conversation_id
    assert one.typed_search_attributes.get(AGENT) == agent.name
    assert one.typed_search_attributes.get(PARENT_RUN_ID) is None
    assert two.typed_search_attributes.get(PARENT_RUN_ID) == first.run_id
    assert await two.static_summary() == f"{agent.name}: two"


async def test_model_activity_input_carries_only_the_new_messages(
    temporal_client: Client,
) -> None:
    result_bytes = 2048
    agent, model = tool_turns(3, result_bytes=result_bytes)
    cache = MessageCache()
    async with serve(temporal_client, agent, cache=cache) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    inputs = [
        e.activity_task_scheduled_event_attributes
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    sizes = [
        len(a.input.payloads[0].data)
        for a in inputs
        if a.activity_type.name == "golem.model_request"
    ]
    assert len(sizes) == 4
    # Turns 2-4 each carry one call and its result by digest (the tool activity recorded
    # the 2 KB, and its worker kept it): the same size, never the conversation.
    assert all(size < result_bytes for size in sizes[1:])
    assert max(sizes[1:]) - min(sizes[1:]) < 100
    assert cache.queries == 0  # the worker that ran the tool kept it: no query round trip
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7]
    assert model.requests[-1].messages == result.messages[:-1]


async def test_small_new_messages_ride_the_input_and_need_no_query(
    temporal_client: Client,
) -> None:
    agent, model = tool_turns(3)
    cache = MessageCache()
    async with serve(temporal_client, agent, cache=cache) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert cache.queries == 0
    assert result.output == "done after 3 tools"
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7]
    assert model.requests[-1].messages == result.messages[:-1]


async def test_new_messages_over_the_inline_limit_are_read_by_query(
    temporal_client: Client,
) -> None:
    agent, model = tool_turns(2, result_bytes=4096)
    cache = _Forgetful()
    # 300: the prompt fits, a call and its result (by digest, ~400 estimated) do not.
    async with serve(temporal_client, agent, cache=cache, inline=300) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert cache.queries == 2  # turns 2 and 3, not turn 1
    assert model.requests[-1].messages == result.messages[:-1]


class _Forgetful(MessageCache):
    """A worker's cache that keeps no answers: it cannot make a turn's messages itself."""

    def answered(self, run: str, message: Message) -> None:
        pass


async def test_a_turns_answer_and_results_are_made_by_the_worker_that_ran_them(
    temporal_client: Client,
) -> None:
    agent, model = tool_turns(3, result_bytes=4096)
    cache = MessageCache()
    async with serve(temporal_client, agent, cache=cache, inline=300) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    inputs = [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "golem.model_request"
    ]
    # Turns 2-4 name no message: each is the previous answer and its call's result.
    assert [i["new"]["kind"] for i in inputs] == ["inline", "derived", "derived", "derived"]
    assert all("messages" not in i["new"] for i in inputs[1:])
    assert cache.queries == 0  # over the inline limit, yet nothing read by query
    assert model.requests[-1].messages == result.messages[:-1]


class _TurnsOf(MessageCache):
    """A worker's cache that takes only odd or only even turns (a retry finds the other)."""

    def __init__(self, parity: int) -> None:
        super().__init__()
        self.parity = parity
        self.turns: list[int] = []

    async def fetch(self, run: str, call: Any, pager: Any) -> list[Message]:
        if call.turn % 2 != self.parity:
            raise RuntimeError("not this worker's turn")  # retryable: the other worker polls
        self.turns.append(call.turn)
        return await super().fetch(run, call, pager)


async def test_model_calls_alternating_between_two_workers_see_the_exact_conversation(
    temporal_client: Client,
) -> None:
    turns = 6
    agent, model = tool_turns(turns)
    agent.model_retry = Retry(max_attempts=100, initial_interval=0.01, backoff=1.0)
    odd, even = _TurnsOf(1), _TurnsOf(0)
    # A second connection: one client may not run two workers on one task queue.
    other = await Client.connect(
        temporal_client.service_client.config.target_host,
        data_converter=temporal_client.data_converter,
    )
    tq = f"durable-{uuid.uuid4().hex[:12]}"
    async with (
        serve(temporal_client, agent, cache=odd, task_queue=tq),
        serve(other, agent, cache=even, task_queue=tq),
    ):
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert result.output == f"done after {turns} tools"
    assert odd.turns == [1, 3, 5, 7] and even.turns == [2, 4, 6]
    # Each worker's list went stale while the other worker ran a turn: it refetched it.
    assert odd.refetches == 3 and even.refetches == 2
    # Every turn the model saw exactly the conversation so far, in order.
    conversation = result.messages
    for request in model.requests:
        assert request.messages == conversation[: len(request.messages)]
    assert [len(r.messages) for r in model.requests] == [1 + 2 * t for t in range(turns + 1)]


async def test_history_bytes_grow_linearly_with_turns(temporal_client: Client) -> None:
    result_bytes = 2048
    per_turn: dict[tuple[int, int], float] = {}
    for size in (0, result_bytes):
        for turns in (5, 20):
            agent, _ = tool_turns(turns, result_bytes=size)
            async with serve(temporal_client, agent) as tq:
                result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
            events = await history_events(temporal_client, result.run_id)
            per_turn[size, turns] = sum(e.ByteSize() for e in events) / turns
    # Never the conversation: a turn costs the same at turn 20 as at turn 5.
    assert per_turn[result_bytes, 20] < per_turn[result_bytes, 5] * 1.25
    # A result's bytes are recorded at most three times: the tool's completion, the next
    # model call's input, and the final result's echo (the rest is the same per-turn events).
    content = per_turn[result_bytes, 20] - per_turn[0, 20]
    assert content < 3.5 * result_bytes


async def test_a_tool_call_leaves_out_the_run_id_its_workflow_id_already_is(
    temporal_client: Client,
) -> None:
    seen: list[tuple[str, str]] = []
    agent, _ = scripted_whoami(seen)
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    [tool_input] = [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "golem.tool"
    ]
    assert "runId" not in tool_input  # one id fewer per tool call in the history
    assert tool_input["conversationId"] == result.conversation_id
    assert seen == [(result.run_id, result.conversation_id)]  # the tool still gets both


def scripted_whoami(seen: list[tuple[str, str]]) -> tuple[Agent[Any, Any], ScriptedModel]:
    model = ScriptedModel(
        [
            Message.assistant("", [ToolCall(id="c1", name="whoami", args="{}")]),
            Message.assistant("ok"),
        ]
    )
    agent: Agent[Any, Any] = Agent(model, name=f"whoami-{uuid.uuid4().hex[:6]}")

    @agent.tool
    def whoami(ctx: RunContext[Any]) -> str:
        """Say which run asks."""
        seen.append((ctx.run_id, ctx.conversation_id))
        return "me"

    return agent, model


async def completed_payload(client: Client, run_id: str) -> bytes:
    """The run's result as its history holds it (the JSON of a ``Completed``)."""
    [completed] = [
        e.workflow_execution_completed_event_attributes.result.payloads[0].data
        for e in await history_events(client, run_id)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    ]
    return completed


async def test_a_closed_runs_result_leaves_its_conversation_to_its_history(
    temporal_client: Client,
) -> None:
    agent, model = tool_turns(3, result_bytes=2048)
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    completed = await completed_payload(temporal_client, result.run_id)
    messages = json.loads(completed)["messages"]
    # The model calls in its history hold all but the final answer, which rides alone.
    assert messages["kind"] == "history" and messages["count"] == 7
    assert len(messages["added"]["messages"]) == 1 and len(completed) < 400
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7]
    assert model.requests[-1].messages == result.messages[:-1]
    record = await fetch_run(temporal_client, result.run_id)  # no worker: from its history
    assert record.messages == result.messages and record.output == result.output


async def test_a_run_whose_requests_were_read_by_query_carries_its_conversation(
    temporal_client: Client,
) -> None:
    agent, _ = tool_turns(1)
    async with serve(temporal_client, agent, inline=100) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("x" * 500)
    [completed] = [
        e.workflow_execution_completed_event_attributes.result.payloads[0].data
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    ]
    assert json.loads(completed)["messages"]["kind"] == "carried"  # its history lacks the prompt
    record = await fetch_run(temporal_client, result.run_id)
    assert record.messages == result.messages and result.messages[0].content == "x" * 500


async def test_unknown_agent_fails_at_once_naming_the_agents_the_worker_has(
    temporal_client: Client,
) -> None:
    agent, _ = tool_turns(1)
    async with serve(temporal_client, agent) as tq:
        with pytest.raises(UnknownAgentError, match=r"unknown agent 'nobody'.*has: turns1"):
            await DurableAgent(temporal_client, "nobody", task_queue=tq).run("hi")


async def test_malformed_history_is_refused_before_a_run_starts(temporal_client: Client) -> None:
    from temporalio.service import RPCError, RPCStatusCode

    with pytest.raises(HistoryError, match="message 0"):
        load_messages(b'[{"role": "robot"}]')
    bad = [Message(role="user", content="x", parts=[Part(kind="image", url="http://a", data=b"1")])]
    agent, model = tool_turns(1)
    run_id = f"refused-{uuid.uuid4().hex}"
    async with serve(temporal_client, agent) as tq:
        with pytest.raises(
            RunError, match="message 0: part 0: needs exactly one of url or data"
        ) as e:
            await DurableAgent(temporal_client, agent, task_queue=tq).run(
                "hi", history=bad, run_id=run_id
            )
    assert e.value.stage == "history" and e.value.partial is None
    # No workflow was started under the run's id, and the model was never asked.
    with pytest.raises(RPCError) as missing:
        await temporal_client.get_workflow_handle(run_id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    assert model.requests == []


async def test_oversized_tool_result_ends_the_run_naming_the_tool(temporal_client: Client) -> None:
    agent, _ = tool_turns(1, result_bytes=3_000_000)
    async with serve(temporal_client, agent) as tq:
        with pytest.raises(RunError, match=r"tool 'fetch' \(call call-0\) produced \d+ bytes") as e:
            await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert e.value.stage == "tool"
    assert e.value.partial is not None
    assert e.value.partial.messages[-2].tool_calls[0].id == "call-0"
    closed = e.value.partial.messages[-1]  # the batch is answered: resume needs no repair
    assert (closed.tool_call_id, closed.failed) == ("call-0", True)
    assert "produced" in closed.content


async def test_provider_4xx_fails_the_run_without_retrying(temporal_client: Client) -> None:
    error = ModelHTTPError(400, "messages: tool_use ids without tool_result", provider="anthropic")
    agent = Agent(ScriptedModel([error]), name="rejected")
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        started = await durable.start("hi")
        with pytest.raises(RunError, match="tool_use ids without tool_result") as e:
            await started.result()
    assert e.value.stage == "model" and e.value.partial is None
    events = await history_events(temporal_client, started.run_id)
    failed = [
        e.activity_task_failed_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert len(failed) == 1
    assert failed[0].failure.application_failure_info.non_retryable


async def test_retryable_provider_error_is_retried_by_the_activity(temporal_client: Client) -> None:
    busy = ModelHTTPError(429, "rate limited", provider="openai", retry_after=0.05)
    model = ScriptedModel([busy, Message.assistant("ok")])
    agent = Agent(model, name="busy", model_retry=Retry(initial_interval=0.01))
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("hi")
    assert result.output == "ok"
    assert len(model.requests) == 2  # two activity attempts, one loop-level request
    assert result.requests == 1


async def test_cancelled_run_leaves_resume_ready_partial_evidence(temporal_client: Client) -> None:
    started_tool = asyncio.Event()
    agent, _ = tool_turns(2)

    @agent.tool
    async def wait_forever() -> str:
        """Never returns."""
        started_tool.set()
        await asyncio.Event().wait()
        return "unreachable"

    calls = iter(
        [
            Message.assistant("", [ToolCall(id="a", name="fetch", args='{"n": 1}')]),
            Message.assistant("", [ToolCall(id="b", name="wait_forever", args="{}")]),
            Message.assistant("resumed"),
        ]
    )
    agent._model = FunctionModel(lambda messages, tools: next(calls))
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        run = await durable.start("go")
        await started_tool.wait()
        await run.cancel()
        with pytest.raises(RunError) as e:
            await run.result()
        assert e.value.stage == "canceled"
        partial = e.value.partial
        assert partial is not None and partial.run_id == run.run_id
        assert partial.messages[-2].tool_calls[0].id == "b"
        assert partial.messages[-1].content == OUTCOME_UNKNOWN_RESULT  # it was running
        description = await run.handle.describe()
        assert description.status == WorkflowExecutionStatus.CANCELED
        resumed = await durable.resume(e.value)
    assert resumed.output == "resumed"
    assert resumed.conversation_id == run.conversation_id
    closed = [m for m in resumed.messages if m.tool_call_id == "b"]
    assert [m.content for m in closed] == [OUTCOME_UNKNOWN_RESULT]
    assert normalize_history(resumed.messages)[1].synthesized == []


async def test_resume_by_run_id_reads_the_partial_evidence_from_temporal(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(
        [
            Message.assistant("", [ToolCall(id="x", name="boom", args="{}")]),
            Message.assistant("recovered"),
        ]
    )
    agent = Agent(model, name="boomer")

    @agent.tool(retry_attempts=1)
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        run = await durable.start("go")
        with pytest.raises(RunError, match="disk on fire") as e:
            await run.result()
        assert e.value.stage == "tool"
        resumed = await durable.resume(run.run_id)
    assert resumed.output == "recovered"
    described = await temporal_client.get_workflow_handle(resumed.run_id).describe()
    assert described.typed_search_attributes.get(PARENT_RUN_ID) == run.run_id
    [failure] = [m for m in resumed.messages if m.tool_call_id == "x"]
    assert failure.failed and "disk on fire" in failure.content


async def test_ui_shows_summaries_for_the_run_and_each_activity(temporal_client: Client) -> None:
    agent, _ = tool_turns(1)
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("first line\nmore")
    handle = temporal_client.get_workflow_handle(result.run_id)
    assert await (await handle.describe()).static_summary() == "turns1: first line"
    converter = temporal_client.data_converter.payload_converter
    summaries = [
        converter.from_payloads([e.user_metadata.summary])[0]
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert summaries == ["model: function (turn 1)", "tool: fetch", "model: function (turn 2)"]


async def test_instructions_function_runs_once_and_is_recorded(temporal_client: Client) -> None:
    evaluated: list[str] = []

    def instructions(ctx: Any) -> str:
        evaluated.append(ctx.run_id)
        return "Speak like a pirate."

    agent, model = tool_turns(2)
    agent.instructions_fn = instructions
    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert evaluated == [result.run_id]
    assert all(r.messages[0].content == "Speak like a pirate." for r in model.requests)


async def test_deps_that_do_not_match_deps_type_fail_the_run_at_once(
    temporal_client: Client,
) -> None:
    from pydantic import BaseModel

    class Account(BaseModel):
        user_id: int

    agent = Agent(ScriptedModel([Message.assistant("hi")]), name="typed", deps_type=Account)
    async with serve(temporal_client, agent) as tq:
        async with asyncio.timeout(20):  # a workflow-task retry loop would never end
            with pytest.raises(RunError, match=r"deps .*Account.*user_id") as e:
                await DurableAgent(temporal_client, agent, task_queue=tq).run(
                    "hi", deps={"user_id": "not a number"}
                )
    assert e.value.stage == "history" and e.value.partial is None


async def test_a_run_whose_results_together_exceed_one_payload_still_completes(
    temporal_client: Client,
) -> None:
    # Each 1.2 MB result fits one payload; the conversation (2.4 MB) does not.
    agent, model = tool_turns(2, result_bytes=1_200_000)
    cache = MessageCache()
    async with serve(temporal_client, agent, cache=cache) as tq:
        async with asyncio.timeout(60):
            result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert result.output == "done after 2 tools"
    assert [len(m.content) for m in result.messages if m.role == "tool"] == [1_200_000] * 2
    assert model.requests[-1].messages == result.messages[:-1]
    # Turns 2 and 3 each name their 1.2 MB result by digest: the worker that ran the tool
    # kept it, so nothing is read by query (another worker would read it so).
    assert cache.queries == 0


async def test_a_failed_run_with_large_evidence_returns_all_of_it(
    temporal_client: Client,
) -> None:
    script = iter(
        [
            Message.assistant("", [ToolCall(id="a", name="big", args="{}")]),
            Message.assistant("", [ToolCall(id="b", name="big", args="{}")]),
            Message.assistant("", [ToolCall(id="c", name="boom", args="{}")]),
        ]
    )
    agent = Agent(FunctionModel(lambda messages, tools: next(script)), name="bigfail")

    @agent.tool
    def big() -> str:
        """A large result."""
        return "y" * 1_200_000

    @agent.tool(retry_attempts=1)
    def boom() -> str:
        """Fails."""
        raise RuntimeError("out of disk")

    async with serve(temporal_client, agent) as tq:
        with pytest.raises(RunError, match="out of disk") as e:
            await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    partial = e.value.partial
    assert partial is not None and e.value.stage == "tool"
    assert [m.role for m in partial.messages] == ["user"] + ["assistant", "tool"] * 3
    assert [len(m.content) for m in partial.messages if m.role == "tool"][:2] == [1_200_000] * 2
    assert partial.messages[-2].tool_calls[0].id == "c"
    assert "out of disk" in partial.messages[-1].content


async def test_a_stopped_batch_cancels_its_running_siblings_activity(
    temporal_client: Client,
) -> None:
    started, reached = asyncio.Event(), asyncio.Event()
    model = ScriptedModel(
        [
            Message.assistant(
                "",
                [
                    ToolCall(id="w", name="wait", args="{}"),
                    ToolCall(id="s", name="stop", args="{}"),
                ],
            )
        ]
    )
    agent = Agent(model, name="stopper")

    @agent.tool
    async def wait() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            reached.set()  # the activity's cancellation arrived through its heartbeat
            raise
        return "unreachable"

    @agent.tool
    async def stop() -> str:
        """Stops the run once its sibling runs."""
        await started.wait()
        raise Canceled("enough")

    async with serve(temporal_client, agent) as tq:
        with pytest.raises(RunError) as e:
            await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
        assert e.value.stage == "canceled"
        await asyncio.wait_for(reached.wait(), 15)


async def test_a_tools_retry_policy_shapes_its_activity(temporal_client: Client) -> None:
    from golem import Retry

    attempts: list[int] = []
    model = ScriptedModel(
        [
            Message.assistant("", [ToolCall(id="f", name="flaky", args="{}")]),
            Message.assistant("recovered"),
        ]
    )
    agent = Agent(model, name="flaky_agent")

    @agent.tool(retry=Retry(max_attempts=5, initial_interval=0.01, backoff=1.0))
    def flaky() -> str:
        """Fails three times, then works."""
        attempts.append(1)
        if len(attempts) < 4:
            raise ConnectionError("try again")
        return "ok"

    async with serve(temporal_client, agent) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert result.output == "recovered"
    assert len(attempts) == 4  # more than the default three attempts
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "golem.tool"
    ]
    assert scheduled[0].retry_policy.maximum_attempts == 5


async def test_current_details_show_turn_usage_and_tools_in_flight(
    temporal_client: Client,
) -> None:
    from temporalio.api.sdk.v1 import WorkflowMetadata

    from golem.messages import Usage
    from golem.models.base import ModelResponse

    started, release = asyncio.Event(), asyncio.Event()
    first = Message.assistant("", [ToolCall(id="s", name="slow", args="{}")])
    model = ScriptedModel(
        [
            ModelResponse(
                message=first,
                usage=Usage(input_tokens=1234, output_tokens=56),
                finish_reason="tool_calls",
            ),
            Message.assistant("done"),
        ]
    )
    agent = Agent(model, name="detailed")

    @agent.tool
    async def slow() -> str:
        """Waits to be released."""
        started.set()
        await release.wait()
        return "released"

    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("go")
        await started.wait()
        metadata = await run.handle.query(
            "__temporal_workflow_metadata", result_type=WorkflowMetadata
        )
        release.set()
        assert (await run.result()).output == "done"
    details = metadata.current_details
    assert "**turn** 1" in details
    assert "**requests** 1" in details
    assert "**tools in flight** slow" in details
    assert "**tokens** 1234 in / 56 out" in details  # the first turn's usage, as reported


async def test_a_long_healthy_tool_outlives_a_short_heartbeat_timeout_in_one_execution(
    temporal_client: Client,
) -> None:
    executions: list[int] = []
    model = ScriptedModel(
        [Message.assistant("", [ToolCall(id="l", name="long", args="{}")]), Message.assistant("ok")]
    )
    agent = Agent(model, name="long_tool")

    @agent.tool
    async def long() -> str:
        """Works three heartbeat timeouts long, answering heartbeats all along."""
        executions.append(1)
        await asyncio.sleep(6)  # the work itself, not a wait for a condition
        return "finished"

    # 2 s, not 1: on a loaded machine (three test workers on two cores) a heartbeat due
    # every third of a second was once late past a 1 s timeout.
    async with serve(temporal_client, agent, heartbeat=2) as tq:
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert result.output == "ok"
    assert executions == [1]  # silent for 6 s under a 2 s timeout it would run 3 times and fail
    timeouts = [
        e
        for e in await history_events(temporal_client, result.run_id)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
    ]
    assert timeouts == []


async def test_a_long_model_call_outlives_a_short_heartbeat_timeout_in_one_request(
    temporal_client: Client,
) -> None:
    calls: list[int] = []

    async def thinking(messages: list[Message], tools: Any) -> Message:
        calls.append(1)
        await asyncio.sleep(6)  # a slow provider, not a wait for a condition
        return Message.assistant("considered")

    agent = Agent(FunctionModel(thinking), name="slow_model")
    async with serve(temporal_client, agent, heartbeat=2) as tq:  # 2 s: as above
        result = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
    assert result.output == "considered"
    assert calls == [1]


async def test_cancelling_a_run_reaches_its_running_tool_through_the_heartbeat(
    temporal_client: Client,
) -> None:
    from temporalio import activity

    started, observed = asyncio.Event(), asyncio.Event()
    reasons: list[Any] = []
    model = ScriptedModel([Message.assistant("", [ToolCall(id="w", name="wait", args="{}")])])
    agent = Agent(model, name="cancel_tool")

    @agent.tool
    async def wait() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            reasons.append(activity.cancellation_details())
            observed.set()
            raise
        return "unreachable"

    async with serve(temporal_client, agent, heartbeat=3) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("go")
        await started.wait()
        await run.cancel()
        await asyncio.wait_for(observed.wait(), 20)  # a heartbeat goes out every second
        with pytest.raises(RunError) as e:
            await run.result()
    assert e.value.stage == "canceled"
    # The server's answer to a heartbeat (cancel requested, or the closed run's activity no
    # longer found), not the worker giving up on a silent activity (timed out).
    assert len(reasons) == 1 and reasons[0] is not None
    assert reasons[0].cancel_requested or reasons[0].not_found
    assert not reasons[0].timed_out


async def test_a_finished_tool_leaves_tools_in_flight_while_its_sibling_runs(
    temporal_client: Client,
) -> None:
    from temporalio.api.sdk.v1 import WorkflowMetadata

    quick_done, release = asyncio.Event(), asyncio.Event()
    batch = [ToolCall(id="q", name="quick", args="{}"), ToolCall(id="s", name="slow", args="{}")]
    model = ScriptedModel([Message.assistant("", batch), Message.assistant("done")])
    agent = Agent(model, name="siblings")

    @agent.tool
    async def quick() -> str:
        """Returns at once."""
        quick_done.set()
        return "quick"

    @agent.tool
    async def slow() -> str:
        """Waits to be released."""
        await release.wait()
        return "slow"

    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("go")
        await quick_done.wait()

        async def only_slow_in_flight() -> str:  # a query per 50 ms until the UI catches up
            metadata = await run.handle.query(
                "__temporal_workflow_metadata", result_type=WorkflowMetadata
            )
            shown: str = metadata.current_details
            return shown if "**tools in flight** slow\n" in shown + "\n" else ""

        details = await eventually(
            only_slow_in_flight, what="the UI to show only slow in flight", timeout=20
        )
        pending = (await run.handle.describe()).raw_description.pending_activities
        release.set()
        assert (await run.result()).output == "done"
    assert "**tool calls** 1" in details  # quick is counted the moment it leaves
    assert [a.activity_type.name for a in pending] == ["golem.tool"]


def _snake_keys(value: Any, path: str = "") -> list[str]:
    """Keys with an underscore, outside user data (deps, output, approvals, retries)."""
    if isinstance(value, list):
        return [k for i, v in enumerate(value) for k in _snake_keys(v, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return []
    found = [f"{path}.{k}" for k in value if "_" in k]
    return found + [
        k
        for key, v in value.items()
        if key not in ("deps", "output", "approvals", "retries")
        for k in _snake_keys(v, f"{path}.{key}")
    ]


async def test_every_payload_in_history_uses_camel_case_keys(temporal_client: Client) -> None:
    import json

    from google.protobuf.json_format import MessageToDict

    started = asyncio.Event()
    agent, _ = tool_turns(2)
    hang = Agent(
        ScriptedModel([Message.assistant("", [ToolCall(id="w", name="wait", args="{}")])]),
        name="hang",
    )

    @hang.tool
    async def wait() -> str:
        """Waits until cancelled (the memo carries the evidence)."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    async with serve(temporal_client, agent, hang) as tq:
        first = await DurableAgent(temporal_client, agent, task_queue=tq).run("go")
        second = await DurableAgent(temporal_client, agent, task_queue=tq).run(
            "again", history=first.messages
        )
        cancelled = await DurableAgent(temporal_client, hang, task_queue=tq).start("hang")
        await started.wait()
        await cancelled.cancel()
        with pytest.raises(RunError):
            await cancelled.result()
    found: list[str] = []
    seen = 0
    for run_id in (first.run_id, second.run_id, cancelled.run_id):
        for event in await history_events(temporal_client, run_id):
            for payload in _payloads(MessageToDict(event)):
                seen += 1
                data = json.loads(base64.b64decode(payload.get("data", "")) or b"null")
                found += _snake_keys(data, EventType.Name(event.event_type))
    assert seen > 20  # inputs, results, the memo, summaries
    assert found == []


def _payloads(value: Any) -> list[dict[str, Any]]:
    """Every payload in an event (as a dict): a dict whose metadata names an encoding."""
    if isinstance(value, list):
        return [p for v in value for p in _payloads(v)]
    if not isinstance(value, dict):
        return []
    if "encoding" in value.get("metadata", {}):
        return [value]
    return [p for v in value.values() for p in _payloads(v)]
