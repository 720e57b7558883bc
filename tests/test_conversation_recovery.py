"""The client's one recovery path for a conversation's turn, with a deadline the caller sets:
a turn the conversation does not take in time fails naming the conversation and the turn,
and the same send, once a worker is up, is that turn; the turn's own run is not bounded."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker
from test_conversation import echo_agent, serve
from waiting import eventually, within

from golem import Agent, Message
from golem.client import DurableAgent, TurnNotTaken
from golem.models import FunctionModel
from golem.worker import GolemPlugin


async def test_a_turn_no_worker_takes_fails_at_the_deadline_naming_it_and_a_resend_is_that_turn(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(temporal_client, agent, task_queue=task_queue)
    conv = await durable.conversation(recovery_timeout=timedelta(seconds=1.5))
    run_id = str(uuid.uuid4())
    with pytest.raises(TurnNotTaken) as expired:  # no worker serves the task queue yet
        await within(conv.send("hello", run_id=run_id), what="the deadline", timeout=30)
    assert str(expired.value) == (
        f"conversation {conv.id} did not take turn {run_id} within 1.5 s (no worker took "
        f"it); it may still run: send it again with run_id={run_id!r} to get its result"
    )
    assert (expired.value.conversation_id, expired.value.run_id) == (conv.id, run_id)
    assert isinstance(expired.value, TimeoutError)
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        again = await durable.conversation(conv.id)  # a new handle, as after a restart
        result = await within(again.send("hello", run_id=run_id), what="the resent turn")
        runs = await again.runs()
    assert result.run_id == run_id and result.output == "1: hello"
    assert runs == [run_id]  # the first send and the resend are one turn


async def test_the_deadline_bounds_taking_the_turn_not_the_turns_own_run(
    temporal_client: Client,
) -> None:
    release = asyncio.Event()

    async def slow(messages: list[Message], tools: Any) -> Message:
        await release.wait()  # the turn runs past the recovery deadline
        return Message.assistant("done at last")

    agent: Agent[Any, str] = Agent(FunctionModel(slow), name="slow")
    async with serve(temporal_client, agent) as tq:
        durable: DurableAgent[str] = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation(recovery_timeout=timedelta(seconds=1))
        run_id = str(uuid.uuid4())
        turn = asyncio.ensure_future(conv.send("take your time", run_id=run_id))
        child = temporal_client.get_workflow_handle(run_id)

        async def started() -> bool:
            try:
                return (await child.describe()).parent_id == conv.id
            except Exception:
                return False

        loop = asyncio.get_running_loop()
        await eventually(started, what="the turn's run to start", timeout=30)
        past = loop.time() + 2
        await eventually(lambda: loop.time() > past, what="the deadline to pass", timeout=5)
        assert not turn.done()
        release.set()
        result = await within(turn, what="the slow turn")
    assert result.output == "done at last" and result.run_id == run_id
