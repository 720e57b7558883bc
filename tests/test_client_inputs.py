"""What a client sends, checked once for every way in (DurableAgent.start and run, a
conversation's start and its turns), and a paused run that a new run must not orphan."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from test_durable_approvals import serve

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent, DurableRun
from golem.models import FunctionModel
from golem.results import Result, RunError


def echo_agent() -> Agent[Any, str]:
    """Answers with the user turns it has seen."""

    def answer(messages: list[Message], tools: Any) -> Message:
        users = [m.content for m in messages if m.role == "user"]
        return Message.assistant(" / ".join(users))

    return Agent(FunctionModel(answer), name="echo")


def transfer_agent(executed: list[int]) -> Agent[Any, str]:
    """Asks to move money (a call that needs approval), then says what happened."""

    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant("", [ToolCall(id="t1", name="transfer", args="{}")])
        return Message.assistant(results[-1].content)

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="bank")

    @agent.tool(requires_approval=True)
    def transfer() -> str:
        """Move money."""
        executed.append(5)
        return "moved 5"

    return agent


@dataclass
class Waiting:
    """A durable run paused for the approval of call t1, with a worker serving it."""

    durable: DurableAgent[str]
    run: DurableRun[str]
    paused: Result[str]
    executed: list[int]


@asynccontextmanager
async def waiting_run(client: Client) -> AsyncIterator[Waiting]:
    executed: list[int] = []
    async with serve(client, transfer_agent(executed)) as tq:
        durable: DurableAgent[str] = DurableAgent(client, "bank", task_queue=tq)
        run = await durable.start("pay")
        yield Waiting(durable, run, await run.result(), executed)


async def never_started(client: Client, run_id: str) -> bool:
    try:
        await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        return exc.status == RPCStatusCode.NOT_FOUND
    return False


# -- deps, prompt and parts: the same check for a conversation's turns -------------------------


@pytest.mark.parametrize(
    "sent",
    [
        {"deps": {"x": math.nan}},
        {"deps": [math.inf]},
        {"prompt": "hi \ud800"},
    ],
    ids=["nan deps", "inf deps", "surrogate prompt"],
)
async def test_a_turn_that_cannot_be_sent_is_refused_before_the_conversation_sees_it(
    temporal_client: Client, sent: dict[str, Any]
) -> None:
    culprit = next(iter(sent))
    sent = {"prompt": "hi", **sent}
    async with serve(temporal_client, echo_agent()) as tq:
        conv = await DurableAgent(temporal_client, "echo", task_queue=tq).conversation()
        with pytest.raises(ValueError, match=f"^{culprit} cannot be sent to Temporal"):
            await conv.send(**sent, run_id="turn-a")
        with pytest.raises(ValueError, match=f"^{culprit} cannot be sent to Temporal"):
            conv.send_stream(**sent, run_id="turn-b")
        after = await conv.send("still here")
        runs = await conv.runs()
    assert after.output == "still here"
    assert runs == [after.run_id]  # neither refused turn ran
    assert await never_started(temporal_client, "turn-a")
    assert await never_started(temporal_client, "turn-b")


# -- a history of dicts: read as messages, or refused naming the message -----------------------


async def test_a_history_of_dicts_is_read_as_the_messages_they_describe(
    temporal_client: Client,
) -> None:
    history: list[Any] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "noted", "toolCalls": []},
    ]
    async with serve(temporal_client, echo_agent()) as tq:
        durable = DurableAgent(temporal_client, "echo", task_queue=tq)
        result = await durable.run("second", history=history)
        conv = await durable.conversation(history=history)
        turn = await conv.send("third")
    assert result.output == "first / second"
    assert result.messages[:2] == [Message.user("first"), Message.assistant("noted")]
    assert turn.output == "first / third"
    assert turn.messages[:2] == [Message.user("first"), Message.assistant("noted")]


@pytest.mark.parametrize(
    ("history", "message"),
    [
        (
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}],
            r"^history message 1 is invalid: role: .*'assistant'",
        ),
        (
            [{"role": "assistant", "content": "x", "toolCalls": "none"}],
            r"^history message 0 is invalid: toolCalls",
        ),
        (
            ["hello"],
            r"^history message 0 is a str, not a golem Message \(or a dict of one",
        ),
    ],
    ids=["unknown role", "calls not a list", "a string"],
)
async def test_a_history_item_that_is_not_a_message_is_refused_naming_it(
    temporal_client: Client, history: list[Any], message: str
) -> None:
    durable = DurableAgent(temporal_client, "echo", task_queue=f"never-{uuid.uuid4().hex}")
    run_id = f"unsent-{uuid.uuid4().hex}"
    with pytest.raises(ValueError, match=message):
        await durable.start("next", history=history, run_id=run_id)
    with pytest.raises(ValueError, match=message):
        await durable.conversation(run_id, history=history)
    assert await never_started(temporal_client, run_id)


# -- a paused run is answered where it waits, never orphaned by a new run -----------------------


async def test_continuing_a_waiting_run_by_a_new_run_is_refused_and_the_run_still_answers(
    temporal_client: Client,
) -> None:
    async with waiting_run(temporal_client) as waiting:
        durable, run, paused = waiting.durable, waiting.run, waiting.paused
        new_id = f"new-{uuid.uuid4().hex}"
        with pytest.raises(
            ValueError, match=rf"run {run.run_id} is still running the calls"
        ) as refused:
            await durable.run(history=paused.messages, approvals={"t1": True}, run_id=new_id)
        with pytest.raises(ValueError, match="still running"):  # without decisions, too
            await durable.run("go on", history=paused.messages)
        done = await run.approve({"t1": True})
    assert f"attach({run.run_id!r})).approve(" in str(refused.value)
    assert await never_started(temporal_client, new_id)
    assert done.run_id == run.run_id and done.output == "moved 5"
    assert waiting.executed == [5]


async def test_a_run_that_stopped_waiting_can_be_continued_by_a_new_run(
    temporal_client: Client,
) -> None:
    async with waiting_run(temporal_client) as waiting:
        durable, run, paused = waiting.durable, waiting.run, waiting.paused
        await run.cancel()
        with pytest.raises(RunError, match="cancel"):
            await run.result(final=True)
        status = (await run.handle.describe()).status
        done = await durable.run(history=paused.messages, approvals={"t1": True})
    assert status == WorkflowExecutionStatus.CANCELED
    assert done.run_id != run.run_id and done.output == "moved 5"


@pytest.mark.usefixtures("conversation_shapes")
async def test_continuing_a_waiting_conversation_turn_by_a_new_run_points_to_the_conversation(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    async with serve(temporal_client, transfer_agent(executed)) as tq:
        durable = DurableAgent(temporal_client, "bank", task_queue=tq)
        conv = await durable.conversation()
        paused = await conv.send("pay")
        with pytest.raises(ValueError, match=rf"turn of conversation {conv.id}") as refused:
            await durable.run(history=paused.messages, approvals={"t1": True})
        done = await conv.approve({"t1": True})
    assert f"conversation({conv.id!r})).approve(" in str(refused.value)
    assert done.output == "moved 5" and executed == [5]
