"""A conversation id that is not one, and a conversation whose agent nobody serves: the
client and the CLI say what the id is, or which agent is unknown where, and what to do."""

from __future__ import annotations

import uuid

import pytest
from cli_agents import echo
from temporalio.client import Client
from temporalio.worker import Worker
from test_cli import address, golem, golem_worker

from golem.client import DurableAgent
from golem.worker import GolemPlugin

_ = address  # a fixture, shared with test_cli


def queue() -> str:
    return f"ids-{uuid.uuid4().hex[:8]}"


async def test_a_run_id_given_as_a_conversation_id_is_named_as_a_run_id(
    temporal_client: Client,
) -> None:
    task_queue = queue()
    durable = DurableAgent(temporal_client, echo, task_queue=task_queue)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(echo)]):
        result = await durable.run("hi")

    with pytest.raises(ValueError) as caught:
        await durable.conversation(result.run_id)

    assert str(caught.value) == (
        f"{result.run_id} is a run id (a run of agent 'echo'), not a conversation id: its "
        f"runs continue with `golem run --conversation-id {result.conversation_id}` "
        "(durable.resume or durable.run(history=...) from a client)"
    )


async def test_a_turns_run_id_given_as_a_conversation_id_names_its_conversation(
    temporal_client: Client,
) -> None:
    task_queue = queue()
    durable = DurableAgent(temporal_client, echo, task_queue=task_queue)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(echo)]):
        conversation = await durable.conversation()
        turn = await conversation.send("hi")

        with pytest.raises(ValueError) as caught:
            await durable.conversation(turn.run_id)
        await conversation.close()

    assert str(caught.value) == (
        f"{turn.run_id} is a run id (a turn of conversation {conversation.id}), not a "
        f"conversation id: attach to {conversation.id}"
    )


async def test_the_cli_names_a_run_id_given_as_a_conversation_id(
    address: str, temporal_client: Client
) -> None:
    task_queue = queue()
    durable = DurableAgent(temporal_client, echo, task_queue=task_queue)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(echo)]):
        result = await durable.run("hi")

    chat = await golem(
        "chat",
        "--agent",
        "echo",
        "--task-queue",
        task_queue,
        "--conversation-id",
        result.run_id,
        stdin="hello\n",
    )

    assert chat.code == 1
    assert f"{result.run_id} is a run id (a run of agent 'echo'), not a conversation id" in (
        chat.err
    )


async def test_a_conversation_whose_agent_no_worker_serves_names_the_agent_and_task_queue(
    address: str,
) -> None:
    task_queue = queue()
    chat = ("chat", "--agent", "ghost", "--task-queue", task_queue)
    async with golem_worker(task_queue, "echo"):
        said = await golem(*chat, stdin="hello\n")

    assert said.code == 1
    print(said.err)
    assert "is failed; fork it" not in said.err
    # golem chat checks the agent against what the queue's workers serve before it starts
    # anything (issue 30 item 5), naming the agent and the queue as item 8 asks.
    assert f"unknown agent 'ghost': the workers on task queue '{task_queue}' serve echo" in said.err
