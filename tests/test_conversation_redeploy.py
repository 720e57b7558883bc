"""An open conversation meets a new deploy of its agent (docs/adr/0051): with child runs its
ended turns are never replayed, so a change to what a turn did (a tool taken away) is
harmless; inline, a worker that did not cache the conversation replays its turns since its
last continue-as-new on the new code, and the changed commands stop it until the old code
returns. Pinned here so the difference ADR 0051 rests on is measured, not assumed."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.errors import TurnNotTaken
from golem.models import FunctionModel
from golem.worker import GolemPlugin


def deployed(name: str, with_lookup: bool) -> Agent[Any, str]:
    """The agent as one deploy defines it: "look" calls ``lookup`` (while it has it)."""

    def answer(messages: list[Message], tools: Any) -> Message:
        last = messages[-1]
        if last.role == "user" and last.content == "look":
            return Message.assistant("", [ToolCall(id="c1", name="lookup", args="{}")])
        if last.role == "tool":
            return Message.assistant(f"found {last.content}")
        return Message.assistant(f"said {last.content}")

    agent = Agent(FunctionModel(answer), name=name)
    if with_lookup:

        @agent.tool
        def lookup() -> str:
            """Look it up."""
            return "it"

    return agent


async def test_a_deploy_that_takes_away_a_tool_an_ended_turn_called(
    temporal_client: Client, conversation_shapes: str
) -> None:
    name = f"redeploy_{uuid.uuid4().hex[:6]}"
    task_queue = f"redeploy-{uuid.uuid4().hex[:12]}"
    before, after = deployed(name, with_lookup=True), deployed(name, with_lookup=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        conv = await DurableAgent(temporal_client, before, task_queue=task_queue).conversation()
        assert (await conv.send("look")).output == "found it"

    # A new worker process: nothing cached, so the conversation's next task replays it.
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        again = await DurableAgent(temporal_client, name, task_queue=task_queue).conversation(
            conv.id, recovery_timeout=timedelta(seconds=10)
        )
        if conversation_shapes == "child runs":
            assert (await again.send("hi")).output == "said hi"
            return
        try:
            with pytest.raises(TurnNotTaken) as taken:
                await again.send("hi")
        finally:
            await conv.handle.terminate("the test is over")
    # The send says why no worker took it: the replay's failure, and what to do.
    said = str(taken.value)
    assert "its workflow task fails on the worker" in said
    assert "Nondeterminism error" in said and "'golem.tool'" in said
    assert "docs/guides/deploys.md" in said
