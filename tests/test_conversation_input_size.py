"""A conversation's turn too large for one Temporal payload is refused in the client, before
the update is sent: the conversation's workflow never fails its tasks over it."""

from __future__ import annotations

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem import Message
from golem.agent import Agent
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.results import RunError
from golem.worker import GolemPlugin


async def test_a_turn_over_one_payload_is_refused_and_the_conversation_goes_on(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = Agent(FunctionModel(lambda m, t: Message.assistant("ok")), name="sized")
    task_queue = f"sized-{uuid.uuid4().hex[:6]}"
    async with Worker(temporal_env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        conversation = await DurableAgent(
            temporal_env.client, agent, task_queue=task_queue
        ).conversation()
        with pytest.raises(RunError) as sent:
            await conversation.send("x" * 3_000_000)
        with pytest.raises(RunError) as streamed:
            conversation.send_stream("x" * 3_000_000)
        after = await conversation.send("small")
        runs = await conversation.runs()

    for refused in (sent.value, streamed.value):
        assert refused.stage == "history"
        assert "over the 1934464-byte limit of one Temporal payload" in str(refused)
    assert after.output == "ok"
    assert len(runs) == 1  # only the small turn ran
