"""Durable conversations: one ConversationWorkflow per conversation, each turn an update that
runs a child AgentRunWorkflow."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from waiting import eventually

from golem import Agent, Message, ToolCall
from golem.client import (
    CONVERSATION_ID,
    PARENT_RUN_ID,
    ConversationClosedError,
    DurableAgent,
    fetch_run,
)
from golem.models import FunctionModel
from golem.results import RunError
from golem.testing import dev_server
from golem.worker import GolemPlugin


def echo_agent(name: str = "echo") -> tuple[Agent[Any, str], FunctionModel]:
    """Answers each prompt with how many user turns it has seen and the prompt itself."""

    def answer(messages: list[Message], tools: Any) -> Message:
        users = [m for m in messages if m.role == "user"]
        return Message.assistant(f"{len(users)}: {users[-1].content}")

    model = FunctionModel(answer)
    return Agent(model, name=name), model


@asynccontextmanager
async def serve(client: Client, *agents: Agent[Any, Any]) -> AsyncIterator[str]:
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(*agents, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        yield task_queue


def contents(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


async def test_turns_build_one_transcript_and_each_turn_is_a_child_run(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        first = await conv.send("hello")
        second = await conv.send("again")
        runs = await conv.runs()
        transcript = await conv.messages()
    assert first.output == "1: hello" and second.output == "2: again"
    assert first.conversation_id == second.conversation_id == conv.id
    assert runs == [first.run_id, second.run_id]
    assert transcript == second.messages
    assert contents(transcript) == [
        ("user", "hello"),
        ("assistant", "1: hello"),
        ("user", "again"),
        ("assistant", "2: again"),
    ]
    assert {m.run_id for m in transcript[:2]} == {first.run_id}
    child = await temporal_client.get_workflow_handle(second.run_id).describe()
    assert child.parent_id == conv.id
    assert child.typed_search_attributes.get(CONVERSATION_ID) == conv.id
    assert child.typed_search_attributes.get(PARENT_RUN_ID) == first.run_id


async def test_attaching_from_another_handle_continues_the_same_conversation(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        await conv.send("one")
        other = await DurableAgent(temporal_client, "echo", task_queue=tq).conversation(conv.id)
        result = await other.send("two")
        mine = await conv.send("three")
    assert result.output == "2: two"
    assert mine.output == "3: three"
    assert contents(mine.messages)[-2:] == [("user", "three"), ("assistant", "3: three")]
    assert len(mine.messages) == 6


async def test_concurrent_sends_are_serialized_in_arrival_order(temporal_client: Client) -> None:
    gate = asyncio.Event()
    seen: list[int] = []

    async def answer(messages: list[Message], tools: Any) -> Message:
        users = [m for m in messages if m.role == "user"]
        seen.append(len(users))
        if len(users) == 1:
            await gate.wait()  # hold the first turn until the second has arrived
        return Message.assistant(f"{len(users)}: {users[-1].content}")

    agent = Agent(FunctionModel(answer), name="slow")
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        first = asyncio.ensure_future(conv.send("first"))
        await eventually(lambda: seen == [1], what="the first turn at the model", interval=0.01)
        second = asyncio.ensure_future(conv.send("second"))
        await _until_update_admitted(conv.handle, 2)
        gate.set()
        one, two = await asyncio.gather(first, second)
    assert one.output == "1: first"
    assert two.output == "2: second"  # the second turn saw the first one whole
    assert seen == [1, 2]
    assert contents(two.messages) == [
        ("user", "first"),
        ("assistant", "1: first"),
        ("user", "second"),
        ("assistant", "2: second"),
    ]


async def test_a_retried_send_with_the_same_run_id_is_one_turn(temporal_client: Client) -> None:
    agent, model = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        run_id = str(uuid.uuid4())
        once = await conv.send("hi", run_id=run_id)
        again = await conv.send("hi", run_id=run_id)
        runs = await conv.runs()
    assert runs == [run_id]
    assert again.output == once.output
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [("", "needs a prompt or parts"), ("   ", "needs a prompt or parts")],
)
async def test_validators_refuse_bad_turns_before_anything_is_recorded(
    temporal_client: Client, prompt: str, problem: str
) -> None:
    agent, model = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        with pytest.raises(ValueError, match=problem):
            await conv.send(prompt)
        assert await conv.runs() == []
        events = [e async for e in conv.handle.fetch_history_events()]
    accepted = [
        e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert accepted == []  # rejected in the validator: no trace in the history
    assert model.requests == []


async def test_a_closed_conversation_refuses_turns_but_stays_readable(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        await conv.send("hello")
        await conv.close()
        status = (await conv.handle.describe()).status
        with pytest.raises(ConversationClosedError, match="fork it"):
            await conv.send("still there?")
        again = await durable.conversation(conv.id)
        with pytest.raises(ConversationClosedError):
            await again.send("hello?")
        transcript = await again.messages()
    assert status == WorkflowExecutionStatus.COMPLETED
    assert contents(transcript) == [("user", "hello"), ("assistant", "1: hello")]


async def test_fork_continues_from_a_run_under_a_new_conversation_with_lineage(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        first = await conv.send("one")
        await conv.send("two")
        fork = await conv.fork(at_run_id=first.run_id)
        forked = await fork.send("branch")
        original = await conv.messages()
    assert fork.id != conv.id
    assert forked.conversation_id == fork.id
    assert forked.output == "2: branch"  # the fork saw only the first turn
    assert contents(forked.messages) == [
        ("user", "one"),
        ("assistant", "1: one"),
        ("user", "branch"),
        ("assistant", "2: branch"),
    ]
    assert len(original) == 4  # the original conversation is untouched
    child = await temporal_client.get_workflow_handle(forked.run_id).describe()
    assert child.typed_search_attributes.get(PARENT_RUN_ID) == first.run_id


async def test_a_failed_turn_raises_run_error_and_the_next_turn_resumes_its_evidence(
    temporal_client: Client,
) -> None:
    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user" and messages[-1].content == "break":
            return Message.assistant("", [ToolCall(id="c1", name="explode", args="{}")])
        return Message.assistant(f"{sum(1 for m in messages if m.role == 'tool')} tool results")

    model = FunctionModel(answer)
    agent = Agent(model, name="breaker")

    @agent.tool
    def explode() -> str:
        """Fail for real."""
        raise RuntimeError("boom")

    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        with pytest.raises(RunError) as failed:
            await conv.send("break")
        after = await conv.send("continue")
        last = await conv.send("and on")  # by reference again, after the repairing turn
        transcript = await conv.messages()
    assert transcript == last.messages
    assert transcript[: len(after.messages)] == after.messages
    # Every request (the failed turn's too) was the transcript up to its answer.
    answers = [i for i, m in enumerate(transcript) if m.role == "assistant"]
    assert [r.messages for r in model.requests] == [transcript[:end] for end in answers]
    assert failed.value.stage == "tool"
    assert failed.value.partial is not None
    assert failed.value.partial.conversation_id == conv.id
    assert after.output == "1 tool results"  # the failed turn's call is closed in the transcript
    assert [m.role for m in after.messages][:3] == ["user", "assistant", "tool"]


@pytest.fixture(scope="module")
async def suggesting_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server that suggests continue-as-new after 120 history events."""
    async with dev_server(
        extra_args=("--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=120")
    ) as env:
        yield env


async def test_a_long_conversation_continues_as_new_with_an_identical_transcript(
    suggesting_server: WorkflowEnvironment,
) -> None:
    client = suggesting_server.client
    agent, _ = echo_agent()
    turns = 100
    async with serve(client, agent) as tq:
        conv = await DurableAgent(client, agent, task_queue=tq).conversation()
        results = [await conv.send(f"turn {n}") for n in range(turns)]
        runs = await conv.runs()
        transcript = await conv.messages()
        executions = [e async for e in client.list_workflows(f"WorkflowId = '{conv.id}'")]
    assert runs == [r.run_id for r in results]
    assert transcript == results[-1].messages
    assert contents(transcript) == [
        pair
        for n in range(turns)
        for pair in (("user", f"turn {n}"), ("assistant", f"{n + 1}: turn {n}"))
    ]
    continued = [e for e in executions if e.status == WorkflowExecutionStatus.CONTINUED_AS_NEW]
    assert len(continued) >= 2


async def _until_update_admitted(handle: Any, count: int) -> None:
    """Until ``count`` updates have reached the workflow (accepted or waiting on the lock)."""

    async def admitted() -> bool:
        events = [e async for e in handle.fetch_history_events()]
        accepted = sum(
            1
            for e in events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        )
        return accepted >= count

    await eventually(admitted, what=f"{count} updates accepted by the conversation")


# -- history by reference (docs/adr/0009-conversations.md) --------------------------------


def paging_agent(name: str) -> tuple[Agent[Any, str], FunctionModel]:
    """Each prompt: one tool call with a 2 KB result, then an answer; with instructions,
    so every request starts with a system message."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user":
            n = sum(1 for m in messages if m.role == "user")
            return Message.assistant("", [ToolCall(id=f"c{n}", name="fetch", args=f'{{"n": {n}}}')])
        return Message.assistant(f"read {messages[-1].content[:8]}")

    model = FunctionModel(answer)
    agent: Agent[Any, str] = Agent(model, name=name, instructions="Fetch what is asked.")

    @agent.tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return f"{n:08d}" + "x" * 2040

    return agent, model


def assert_saw_whole_conversation(model: FunctionModel, transcript: list[Message]) -> None:
    """Request k was the instructions, then the transcript up to the k-th model answer."""
    answers = [i for i, m in enumerate(transcript) if m.role == "assistant"]
    assert len(model.requests) == len(answers)
    for request, end in zip(model.requests, answers, strict=True):
        assert request.messages[0].role == "system"
        assert request.messages[1:] == transcript[:end]


async def history_bytes(client: Client, workflow_id: str, run_id: str | None = None) -> int:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    return sum([e.ByteSize() async for e in handle.fetch_history_events()])


async def test_bytes_per_turn_stay_flat_as_the_conversation_grows(
    temporal_client: Client,
) -> None:
    agent, model = paging_agent("bytes")
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        totals = {}
        for turns in (10, 30):
            while len(await conv.runs()) < turns:
                await conv.send(f"page {len(await conv.runs())}")
            runs = await conv.runs()
            totals[turns] = await history_bytes(temporal_client, conv.id) + sum(
                [await history_bytes(temporal_client, run) for run in runs]
            )
        transcript = await conv.messages()
        first_run = await history_bytes(temporal_client, runs[1])
        last_run = await history_bytes(temporal_client, runs[-1])
    assert_saw_whole_conversation(model, transcript)
    # A run records its own turn, not the conversation: the 30th as much as the 2nd (the
    # 29 earlier turns' 2 KB results would be ~60 KB more if it carried them).
    assert last_run < first_run + 2048
    # Linear growth: three times the turns, at most three times the bytes (plus slack for
    # digits growing); carrying the history would make it ~8 times.
    assert totals[30] <= 3 * 1.15 * totals[10]


async def test_the_model_sees_the_whole_conversation_across_continue_as_new_and_workers(
    suggesting_server: WorkflowEnvironment,
) -> None:
    client = suggesting_server.client
    agent, model = paging_agent("pages")
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    first = GolemPlugin(agent)
    async with Worker(client, task_queue=task_queue, plugins=[first]):
        conv = await DurableAgent(client, agent, task_queue=task_queue).conversation()
        for n in range(30):
            await conv.send(f"page {n}")
    second = GolemPlugin(agent)  # a fresh worker: its cache reads the base anew
    async with Worker(client, task_queue=task_queue, plugins=[second]):
        for n in range(30, 45):
            result = await conv.send(f"page {n}")
        transcript = await conv.messages()
        executions = [e async for e in client.list_workflows(f"WorkflowId = '{conv.id}'")]
    assert transcript == result.messages
    assert_saw_whole_conversation(model, transcript)
    continued = [e for e in executions if e.status == WorkflowExecutionStatus.CONTINUED_AS_NEW]
    assert len(continued) >= 2
    # Each worker read the base by query, then only what was appended since.
    assert 0 < second.message_cache.base_queries <= 15
    assert first.message_cache.refetches == second.message_cache.refetches == 0


@pytest.mark.parametrize("inline", [False, True], ids=["child-runs", "inline-turns"])
async def test_a_worker_that_ran_the_turn_before_extends_the_base_without_a_query(
    temporal_client: Client, inline: bool
) -> None:
    agent, model = paging_agent(f"extends-{inline}")
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        durable = DurableAgent(temporal_client, agent, task_queue=task_queue)
        conv = await durable.conversation(inline_turns=inline)
        for n in range(6):
            result = await conv.send(f"page {n}")
    assert_saw_whole_conversation(model, result.messages)
    # Each turn's base is the one before plus what that turn's run added, which this
    # worker served: nothing is read from the conversation.
    assert plugin.message_cache.base_queries == 0
    assert plugin.message_cache.refetches == 0
    # Once a turn's base holds what the turn before added, that run is no longer kept.
    assert len(plugin.message_cache._runs) == len(plugin.message_cache._answers) == 1
    # Nor its key: the last turn's run (inline: and the conversation's workflow) alone.
    assert len(plugin.message_cache._keys) == (2 if inline else 1)


async def test_a_history_processor_sees_the_whole_conversation(temporal_client: Client) -> None:
    seen: list[int] = []

    def keep_last_two(history: list[Message]) -> list[Message]:
        seen.append(len(history))
        return history[-2:]

    agent, model = echo_agent("processed")
    agent.history_processor = keep_last_two
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        for prompt in ("one", "two", "three"):
            result = await conv.send(prompt)
    assert seen == [0, 2, 4]  # by value: the processor gets the transcript so far
    assert result.output == "2: three"  # the model saw the processed history
    assert [len(r.messages) for r in model.requests] == [1, 3, 3]


async def test_runs_read_back_whole_a_turn_with_its_base_and_a_run_without_a_worker(
    temporal_client: Client,
) -> None:
    agent, _ = paging_agent("readback")
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        for n in range(3):
            await conv.send(f"page {n}")
        runs, transcript = await conv.runs(), await conv.messages()
        turn = await fetch_run(temporal_client, runs[1])  # its base comes from the conversation
        alone = await durable.run("page 7")
    record = await fetch_run(temporal_client, alone.run_id)  # no worker: from its history
    assert (
        turn.messages
        == transcript[: max(i for i, m in enumerate(transcript) if m.run_id == runs[1]) + 1]
    )
    assert record.messages == alone.messages and record.output == alone.output
    completed = [
        e
        async for e in temporal_client.get_workflow_handle(alone.run_id).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    ]
    result_bytes = completed[0].workflow_execution_completed_event_attributes.result.ByteSize()
    assert result_bytes < 2040  # the 2 KB tool result is not recorded a second time


async def test_a_turns_update_result_leaves_its_messages_to_the_transcript(
    temporal_client: Client,
) -> None:
    agent, _ = paging_agent("slim")
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        first = await conv.send("page 1")
        other = await DurableAgent(temporal_client, agent, task_queue=tq).conversation(conv.id)
        second = await other.send("page 2")  # a handle that has seen nothing yet
        transcript = await conv.messages()
    assert second.messages == transcript and first.messages == transcript[:4]
    assert [m.content[:8] for m in transcript if m.role == "tool"] == ["00000001", "00000002"]
    completed = [
        e.workflow_execution_update_completed_event_attributes.outcome.success.ByteSize()
        async for e in temporal_client.get_workflow_handle(conv.id).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
    ]
    assert len(completed) == 2 and max(completed) < 1024  # not the 2 KB tool result again
