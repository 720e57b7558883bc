"""``GolemPlugin(sandboxed=False)`` runs workflows without Temporal's sandbox, by explicit
choice (docs/adr/0038-the-sandbox-off.md); the default keeps it. The replay corpus replays
under both (tests/test_replay.py)."""

from __future__ import annotations

import uuid

import pytest
from agents import ask, call, scripted
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.messages import Message
from golem.worker import GolemPlugin


@workflow.defn
class InSandbox:
    """Says whether its own code runs in the sandbox."""

    @workflow.run
    async def run(self) -> bool:
        return workflow.unsafe.in_sandbox()


@pytest.mark.parametrize("sandboxed", [True, False])
async def test_the_plugin_runs_workflows_sandboxed_unless_told_not_to(
    temporal_env: WorkflowEnvironment, sandboxed: bool
) -> None:
    agent, _ = scripted(
        [ask(call("c1", "look", key="k")), Message.assistant("found"), Message.assistant("again")]
    )

    @agent.tool
    def look(key: str) -> str:
        return f"value of {key}"

    client = temporal_env.client
    queue = f"sandbox-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(agent, sandboxed=sandboxed)
    async with Worker(client, task_queue=queue, workflows=[InSandbox], plugins=[plugin]):
        inside = await client.execute_workflow(
            InSandbox.run, id=f"in-sandbox-{uuid.uuid4()}", task_queue=queue
        )
        durable = DurableAgent(client, agent, task_queue=queue)
        result = await durable.run("go")
        conversation = await durable.conversation()
        turn = await conversation.send("again")

    assert inside is sandboxed
    assert result.output == "found"
    assert turn.output == "again"


def test_the_default_is_the_sandbox() -> None:
    assert GolemPlugin().sandboxed is True
