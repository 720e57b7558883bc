"""A deploy under open work. A wait on a run or conversation that cannot go on ends with
``WorkflowTaskFailing`` (golem.client.stuck), not a wait for ever: here a deploy that
changes what a waiting turn did (its tool no longer asks for approval), so no worker can
replay it. And why child runs stay the default (docs/adr/0051): with child runs an ended
turn is never replayed, so a tool taken away that it called is harmless; inline, a worker
that did not cache the conversation replays its turns since its last continue-as-new on the
new code, and the changed commands stop it until the old code returns."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall, TurnNotTaken, WorkflowTaskFailing
from golem.client import DurableAgent, stuck
from golem.models import FunctionModel
from golem.worker import GolemPlugin


@pytest.fixture(autouse=True)
def soon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stuck, "WATCH_AFTER", 0.2)  # the test's waits are seconds, not minutes


#: What each prompt asks for.
CALLS = {"refund": "refund", "look": "lookup"}


def deployed(
    name: str, asks: bool = False, pause: float = 0.0, lookup: bool = True
) -> Agent[Any, str]:
    """The agent as one deploy defines it: "refund" calls ``refund``, which asks a person
    first while ``asks``; "look" calls ``lookup`` (while it has it); the model takes
    ``pause`` seconds per answer."""

    async def answer(messages: list[Message], tools: Any) -> Message:
        await asyncio.sleep(pause)
        last = messages[-1]
        if last.role == "user" and last.content in CALLS:
            return Message.assistant("", [ToolCall(id="c1", name=CALLS[last.content], args="{}")])
        if last.role == "tool":
            return Message.assistant(f"done: {last.content}")
        return Message.assistant(f"said {last.content}")

    agent = Agent(FunctionModel(answer), name=name)

    @agent.tool(requires_approval=asks)
    def refund() -> str:
        """Refund the order."""
        return "refunded"

    if lookup:

        @agent.tool
        def lookup() -> str:
            """Look it up."""
            return "it"

    return agent


def names() -> tuple[str, str]:
    return f"stuck_{uuid.uuid4().hex[:6]}", f"stuck-{uuid.uuid4().hex[:12]}"


async def test_an_approval_of_a_turn_no_worker_can_replay_says_so(
    temporal_client: Client, conversation_shapes: str
) -> None:
    name, task_queue = names()
    before, after = deployed(name, asks=True), deployed(name, asks=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        conv = await DurableAgent(temporal_client, before, task_queue=task_queue).conversation()
        waiting = await conv.send("refund")
        assert [c.id for c in waiting.pending_approvals] == ["c1"]
        turn = waiting.run_id
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        again = await DurableAgent(temporal_client, name, task_queue=task_queue).conversation(
            conv.id
        )
        try:
            with pytest.raises(WorkflowTaskFailing) as failing:
                await asyncio.wait_for(again.approve({"c1": True}), 60)
        finally:
            await conv.handle.terminate("the test is over")
    # With child runs the turn's run cannot replay; inline, the conversation itself.
    assert failing.value.workflow_id == (turn if conversation_shapes == "child runs" else conv.id)
    assert "Nondeterminism error" in failing.value.failure
    assert "deploy with versioning" in str(failing.value)


async def test_a_run_no_worker_can_replay_says_so_to_its_approval(
    temporal_client: Client,
) -> None:
    name, task_queue = names()
    before, after = deployed(name, asks=True), deployed(name, asks=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        run = await DurableAgent(temporal_client, before, task_queue=task_queue).start("refund")
        assert [c.id for c in (await run.result()).pending_approvals] == ["c1"]
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        attached = await DurableAgent(temporal_client, after, task_queue=task_queue).attach(
            run.run_id
        )
        try:
            with pytest.raises(WorkflowTaskFailing, match=r"Nondeterminism error") as failing:
                await asyncio.wait_for(attached.approve({"c1": True}), 60)
        finally:
            await run.handle.terminate("the test is over")
    assert failing.value.workflow_id == run.run_id


async def test_a_turn_slower_than_the_first_look_is_waited_for(
    temporal_client: Client, conversation_shapes: str
) -> None:
    name, task_queue = names()
    slow = deployed(name, asks=False, pause=1.0)  # five looks, each finding nothing wrong
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(slow)]):
        conv = await DurableAgent(temporal_client, slow, task_queue=task_queue).conversation()
        assert (await conv.send("refund")).output == "done: refunded"


async def test_an_update_the_server_gives_up_on_says_why(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any look (one after ten minutes here), the server's own answer: it gives up
    on an update to a workflow whose task fails (after about 20 s)."""
    monkeypatch.setattr(stuck, "WATCH_AFTER", 600.0)
    name, task_queue = names()
    before, after = deployed(name, asks=True), deployed(name, asks=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        run = await DurableAgent(temporal_client, before, task_queue=task_queue).start("refund")
        assert (await run.result()).pending_approvals
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        attached = await DurableAgent(temporal_client, after, task_queue=task_queue).attach(
            run.run_id
        )
        try:
            with pytest.raises(WorkflowTaskFailing, match=r"Nondeterminism error"):
                await asyncio.wait_for(attached.approve({"c1": True}), 60)
        finally:
            await run.handle.terminate("the test is over")


async def test_a_deploy_that_takes_away_a_tool_an_ended_turn_called(
    temporal_client: Client, conversation_shapes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, task_queue = names()
    before, after = deployed(name), deployed(name, lookup=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        conv = await DurableAgent(temporal_client, before, task_queue=task_queue).conversation()
        assert (await conv.send("look")).output == "done: it"

    # A new worker process: nothing cached, so the conversation's next task replays it.
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        again = await DurableAgent(temporal_client, name, task_queue=task_queue).conversation(
            conv.id, recovery_timeout=timedelta(seconds=5)
        )
        if conversation_shapes == "child runs":
            assert (await again.send("hi")).output == "said hi"
            return
        try:
            # Its deadline first (no look at the conversation before ten minutes), then a
            # look while it waits: each says why no worker takes the turn.
            monkeypatch.setattr(stuck, "WATCH_AFTER", 600.0)
            with pytest.raises(TurnNotTaken) as taken:
                await again.send("hi")
            monkeypatch.setattr(stuck, "WATCH_AFTER", 0.2)
            with pytest.raises(WorkflowTaskFailing) as failing:
                await again.send("hi")
        finally:
            await conv.handle.terminate("the test is over")
    said = str(taken.value)
    assert "its workflow task fails on the worker" in said
    assert "Nondeterminism error" in said and "'golem.tool'" in said
    assert "docs/guides/deploys.md" in said
    assert failing.value.workflow_id == conv.id
    assert "'golem.tool'" in failing.value.failure


async def test_a_streamed_turn_no_worker_can_take_says_so(temporal_client: Client) -> None:
    """Inline, the streamed send of the test above: it waited for ever for its turn to be
    taken (a plain send gives up at its recovery deadline)."""
    name, task_queue = names()
    before, after = deployed(name), deployed(name, lookup=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        durable = DurableAgent(temporal_client, before, task_queue=task_queue)
        conv = await durable.conversation(inline_turns=True)
        assert (await conv.send("look")).output == "done: it"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        again = await DurableAgent(temporal_client, name, task_queue=task_queue).conversation(
            conv.id
        )
        stream = again.send_stream("hi")
        try:
            with pytest.raises(WorkflowTaskFailing) as failing:
                await asyncio.wait_for(anext(aiter(stream)), 60)
        finally:
            await conv.handle.terminate("the test is over")
    assert failing.value.workflow_id == conv.id
    assert "'golem.tool'" in failing.value.failure


async def test_a_stream_of_a_waiting_turn_no_worker_can_replay_says_so(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """A reader coming back to a turn that waits (as golem serve's reconnect does): the
    server gives up on its poll after a while, and the reader raised that bare RPCError."""
    name, task_queue = names()
    before, after = deployed(name, asks=True), deployed(name, asks=False)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(before)]):
        durable = DurableAgent(temporal_client, before, task_queue=task_queue)
        conv = await durable.conversation(inline_turns=conversation_shapes == "inline")
        turn = (await conv.send("refund")).run_id
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(after)]):
        again = await DurableAgent(temporal_client, name, task_queue=task_queue).conversation(
            conv.id
        )
        run = await again.turn(turn)
        try:
            with pytest.raises(WorkflowTaskFailing) as failing:
                await asyncio.wait_for(anext(aiter(run.stream())), 90)
        finally:
            await conv.handle.terminate("the test is over")
    assert failing.value.workflow_id == (turn if conversation_shapes == "child runs" else conv.id)
    assert "Nondeterminism error" in failing.value.failure
