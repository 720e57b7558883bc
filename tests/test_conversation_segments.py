"""A conversation whose transcript crosses continue-as-new by reference: past Temporal's
2 MB payload limit, read by a fresh worker and by a client with no worker, forked, and
resumed after a failed turn (docs/adr/0012-transcript-by-reference.md)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker
from test_conversation import assert_saw_whole_conversation
from test_conversation_boundaries import budgeted

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent, DurableConversation, conversation_runs, fetch_run
from golem.models import FunctionModel
from golem.phases.prepare import repaired
from golem.results import RunError
from golem.wire import Segment, ShippingError, chain_all
from golem.wire import transcript as transcript_module
from golem.wire.transcript import ConversationInput
from golem.worker import GolemPlugin
from golem.workflows.conversation import ConversationWorkflow

BIG = 250_000


def big_agent(name: str) -> tuple[Agent[Any, str], FunctionModel]:
    """Each prompt: one tool call whose result is 250 KB, then a short answer."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user":
            n = sum(1 for m in messages if m.role == "user")
            if messages[-1].content == "break":
                return Message.assistant("", [ToolCall(id=f"c{n}", name="explode", args="{}")])
            return Message.assistant("", [ToolCall(id=f"c{n}", name="fetch", args=f'{{"n": {n}}}')])
        return Message.assistant(f"read {messages[-1].content[:8]}")

    model = FunctionModel(answer)
    agent: Agent[Any, str] = Agent(model, name=name, instructions="Fetch what is asked.")

    @agent.tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return f"{n:08d}" + "x" * (BIG - 8)

    @agent.tool
    def explode() -> str:
        """Fail for real."""
        raise RuntimeError("boom")

    return agent, model


async def started_inputs(client: Client, conversation_id: str) -> list[ConversationInput]:
    """The input of every workflow run of the conversation, newest first."""
    inputs: list[ConversationInput] = []
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(conversation_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            attrs = event.workflow_execution_started_event_attributes
            [input] = await client.data_converter.decode(
                list(attrs.input.payloads), [ConversationInput]
            )
            inputs.append(input)
            run_id = attrs.continued_execution_run_id
            break
        if not run_id:
            return inputs


async def test_a_conversation_past_the_payload_limit_continues_as_new_by_reference(
    temporal_client: Client,
) -> None:
    client = temporal_client
    agent, model = big_agent("big")
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    turns = 10
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await budgeted(client, agent, task_queue, turns_per_run=3)
        results = [await conv.send(f"page {n}") for n in range(7)]
    fresh = GolemPlugin(agent)  # its cache is empty: it reads earlier workflow runs' histories
    async with Worker(client, task_queue=task_queue, plugins=[fresh]):
        results += [await conv.send(f"page {n}") for n in range(7, turns)]
        transcript = await conv.messages()
    # No worker from here on.
    runs = await conv.runs()
    assert runs == [r.run_id for r in results] == await conversation_runs(client, conv.id)
    assert transcript == results[-1].messages
    assert sum(len(m.content) for m in transcript) > turns * BIG > 2_000_000
    assert_saw_whole_conversation(model, transcript)
    assert fresh.message_cache.base_queries >= 1
    inputs = await started_inputs(client, conv.id)
    assert len(inputs) == 4  # three switches, each carrying references, not 2.5 MB
    assert all(len(i.model_dump_json()) < 4_000 for i in inputs)
    assert [len(i.earlier) for i in reversed(inputs)] == [0, 1, 2, 3]
    first = await fetch_run(client, runs[0])  # its base is empty; its turn from its history
    assert first.messages == transcript[:4]
    late = await fetch_run(client, runs[8])  # its base: read from three workflow runs
    assert late.messages == transcript[: 4 * 9] and late.status == "completed"


async def test_a_failed_turn_fork_and_resume_across_switches_by_reference(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)  # every switch by reference
    client = temporal_client
    agent, model = big_agent("small-big")
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        durable = DurableAgent(client, agent, task_queue=task_queue)
        conv = await budgeted(client, agent, task_queue, turns_per_run=1)
        one = await conv.send("page 0")
        with pytest.raises(RunError) as failed:
            await conv.send("break")  # its evidence crosses the switch by value
        after = await conv.send("continue")  # repaired by the conversation, then by reference
        two = await conv.send("page 3")
        transcript = await conv.messages()
        forked = await conv.fork(at_run_id=after.run_id)
        branch = await forked.send("page 9")
        fork_messages = await forked.messages()
    assert failed.value.partial is not None
    assert transcript == two.messages
    fork_requests = model.requests[-2:]  # the fork's turn: a tool call, then the answer
    del model.requests[-2:]
    assert_saw_whole_conversation(model, transcript)
    # The fork's model read the history it continues from the original's workflow runs.
    assert [r.messages[1:] for r in fork_requests] == [branch.messages[:-3], branch.messages[:-1]]
    end = max(i for i, m in enumerate(transcript) if m.run_id == after.run_id) + 1
    assert after.messages == transcript[:end]
    assert [m.role for m in transcript[4:8]] == ["user", "assistant", "tool", "user"]
    assert transcript[6].tool_call_id == "c2" and transcript[6].failed  # the failed call, closed
    assert fork_messages == branch.messages
    assert branch.messages[:end] == transcript[:end]
    assert await forked.runs() == [branch.run_id]
    assert await conv.runs() == [one.run_id, failed.value.partial.run_id, after.run_id, two.run_id]
    [fork_input] = await started_inputs(client, forked.id)
    assert fork_input.earlier and fork_input.parent_run_id == after.run_id
    assert not any(s.turns for s in fork_input.earlier)  # its turns are its own
    assert durable.agent_name == "small-big"


async def test_a_seed_history_is_repaired_by_the_conversation_and_read_back_the_same(
    temporal_client: Client,
) -> None:
    client = temporal_client
    agent, model = big_agent("seeded")
    seed = [
        Message.user("look it up"),
        Message.assistant("", [ToolCall(id="lost", name="fetch", args='{"n": 1}')]),
    ]
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await DurableAgent(client, agent, task_queue=task_queue).conversation(history=seed)
        result = await conv.send("page 2")
    turn = await fetch_run(client, result.run_id)  # no worker: the repair is replayed from events
    assert [m.role for m in result.messages[:3]] == ["user", "assistant", "tool"]
    assert result.messages[2].tool_call_id == "lost"  # synthesized by the conversation's repair
    assert model.requests[0].messages[1:] == result.messages[:4]
    assert turn.messages == result.messages


async def test_a_conversation_whose_earlier_run_is_gone_fails_its_turn_naming_it(
    temporal_client: Client,
) -> None:
    """What retention does to a long conversation: its earlier workflow run is gone. The
    turn fails at once (never retried), naming the run; nothing wrong is sent to a model."""
    client = temporal_client
    agent, model = big_agent("forgotten")
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    conversation_id = f"conv-{uuid.uuid4()}"
    held = [Message.user("hello"), Message.assistant("hi")]
    gone = Segment(
        workflow_id=conversation_id,
        run_id=str(uuid.uuid4()),  # deleted past retention: no such workflow run any more
        start=0,
        end=2,
        digest=chain_all(held)[-1],
        turns=True,
    )
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        handle = await client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(agent=agent.name, earlier=[gone], turns=1, recent=["r0"]),
            id=conversation_id,
            task_queue=task_queue,
        )
        conv = DurableConversation(DurableAgent(client, agent, task_queue=task_queue), handle)
        with pytest.raises(RunError) as failed:
            await conv.send("page 2")
    assert failed.value.stage == "model" and model.requests == []
    assert gone.run_id in failed.value.detail and "retention" in failed.value.detail
    with pytest.raises(ShippingError, match="retention"):
        await conv.runs()


def answering_agent(name: str) -> Agent[Any, str]:
    def answer(messages: list[Message], tools: Any) -> Message:
        return Message.assistant(f"answer to {messages[-1].content}")

    return Agent(FunctionModel(answer), name=name)


async def test_fetch_run_reads_every_turn_back_without_a_worker(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)
    agent = answering_agent("readback")
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await budgeted(temporal_client, agent, task_queue, turns_per_run=3)
        results = [await conv.send(f"q{n}") for n in range(5)]  # runs: q0-q2, then q3-q4
    for result in results:  # turns of the earlier workflow run and of the current one
        assert (await fetch_run(temporal_client, result.run_id)).messages == result.messages


async def test_forks_see_the_conversation_as_it_is_when_they_are_made(
    temporal_client: Client,
) -> None:
    agent, _ = big_agent("forks")  # past CARRY_BYTES: forks share the original by reference
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        await conv.send("page 0")
        await conv.send("page 1")
        first = await conv.fork()
        await first.send("page 7")  # this worker reads the original's running workflow run
        latest = await conv.send("page 2")
        second = await conv.fork()  # the same handle, the original moved on
        branch = await second.send("page 8")  # the same worker, the original moved on
    assert (await started_inputs(temporal_client, second.id))[0].earlier
    assert branch.messages[: len(latest.messages)] == latest.messages


async def test_a_fork_at_a_failed_turn_repairs_its_evidence_before_its_first_turn(
    temporal_client: Client,
) -> None:
    agent, model = big_agent("failed-fork")
    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        await conv.send("page 0")
        await conv.send("page 1")
        with pytest.raises(RunError) as failed:
            await conv.send("break")
        await conv.send("continue")
        assert failed.value.partial is not None
        fork = await conv.fork(at_run_id=failed.value.partial.run_id)
        del model.requests[:]
        await fork.send("page 5")
    seen = model.requests[0].messages[1:]
    assert repaired(seen) == seen  # every call the model sees has its result


async def test_fork_skips_a_turn_that_waits_and_refuses_to_fork_at_it(
    temporal_client: Client,
) -> None:
    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user" and messages[-1].content == "pay":
            return Message.assistant("", [ToolCall(id="t1", name="transfer", args="{}")])
        return Message.assistant(f"re: {messages[-1].content}")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="payer")

    @agent.tool(requires_approval=True)
    def transfer() -> str:
        """Move money."""
        return "moved"

    task_queue = f"seg-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conv = await DurableAgent(temporal_client, agent, task_queue=task_queue).conversation()
        first = await conv.send("hello")
        paused = await conv.send("pay")
        fork = await conv.fork()  # the newest turn in the transcript: the one before
        forked = await fork.messages()
        with pytest.raises(ValueError, match="added nothing"):
            await conv.fork(at_run_id=paused.run_id)
        await conv.approve({"t1": False})
    assert paused.paused and forked == first.messages
