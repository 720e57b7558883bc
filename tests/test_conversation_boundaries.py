"""A conversation across continue-as-new boundaries: turns in flight at the switch, sends
from two clients at once, and a send retried after the switch."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import Client
from test_conversation import _until_update_admitted, contents, echo_agent, serve
from waiting import eventually

from golem import Agent, Message
from golem.client import DurableAgent, DurableConversation
from golem.models import FunctionModel
from golem.wire import names
from golem.workflows.conversation import ConversationInput, ConversationWorkflow


async def budgeted(
    client: Client,
    agent: Agent[Any, Any],
    task_queue: str,
    turns_per_run: int,
    inline_turns: bool = False,
) -> DurableConversation[Any]:
    """A conversation that continues as new after every ``turns_per_run`` turns."""
    handle = await client.start_workflow(
        ConversationWorkflow.run,
        ConversationInput(agent=agent.name, turns_per_run=turns_per_run, inline_turns=inline_turns),
        id=f"conv-{uuid.uuid4()}",
        task_queue=task_queue,
        memo={names.INLINE_MEMO: True} if inline_turns else None,  # as durable.conversation()
    )
    return DurableConversation(DurableAgent(client, agent, task_queue=task_queue), handle)


async def continued(client: Client, conversation_id: str) -> int:
    """How many runs of the conversation workflow ended by continuing as new (read along
    the chain of runs, back from the newest; visibility could lag)."""
    count = 0
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(conversation_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            run_id = event.workflow_execution_started_event_attributes.continued_execution_run_id
            break
        if not run_id:
            return count
        count += 1


async def test_turns_arriving_at_the_switch_finish_in_this_run_or_move_to_the_next(
    temporal_client: Client,
) -> None:
    gates = {1: asyncio.Event(), 2: asyncio.Event()}
    seen: list[str] = []

    async def answer(messages: list[Message], tools: Any) -> Message:
        users = [m for m in messages if m.role == "user"]
        seen.append(users[-1].content)
        if len(users) in gates:
            await gates[len(users)].wait()  # hold the first two turns
        return Message.assistant(f"{len(users)}: {users[-1].content}")

    agent = Agent(FunctionModel(answer), name="held")
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=2)
        attempts: list[str] = []
        send_update = conv.handle.start_update  # each try of a send starts its update

        async def counted(update: str, *args: Any, **kwargs: Any) -> Any:
            attempts.append(update)
            return await send_update(update, *args, **kwargs)

        conv.handle.start_update = counted  # type: ignore[method-assign]
        first = asyncio.ensure_future(conv.send("first"))
        await eventually(
            lambda: seen == ["first"], what="the first turn at the model", interval=0.01
        )
        second = asyncio.ensure_future(conv.send("second"))  # admitted while the first runs
        await _until_update_admitted(conv.handle, 2)
        gates[1].set()
        # The budget is spent: draining.
        await eventually(
            lambda: seen == ["first", "second"], what="the second turn at the model", interval=0.01
        )
        third = asyncio.ensure_future(conv.send("third"))
        # The third was refused once, and retries.
        await eventually(
            lambda: len(attempts) >= 4, what="the third send sent again", interval=0.01
        )
        gates[2].set()
        one, two, three = await asyncio.gather(first, second, third)
        runs = await conv.runs()
        transcript = await conv.messages()
        switches = await continued(temporal_client, conv.id)
    assert [one.output, two.output, three.output] == ["1: first", "2: second", "3: third"]
    assert runs == [one.run_id, two.run_id, three.run_id]
    assert transcript == three.messages
    assert switches == 1  # the third turn ran in the next run, after the first two finished


async def test_sends_from_two_clients_across_many_switches_lose_and_double_nothing(
    temporal_env: Any,
) -> None:
    client: Client = temporal_env.client
    other = await Client.connect(
        client.service_client.config.target_host, data_converter=client.data_converter
    )
    agent, model = echo_agent()
    turns = 12
    async with serve(client, agent) as tq:
        conv = await budgeted(client, agent, tq, turns_per_run=3)
        peer = DurableConversation(
            DurableAgent(other, "echo", task_queue=tq), other.get_workflow_handle(conv.id)
        )

        async def talk(handle: DurableConversation[Any], who: str) -> list[Any]:
            return [await handle.send(f"{who} {n}") for n in range(turns)]

        mine, theirs = await asyncio.gather(talk(conv, "a"), talk(peer, "b"))
        runs = await conv.runs()
        transcript = await conv.messages()
        switches = await continued(client, conv.id)
        # The same turns, in the order the conversation took them, without continue-as-new.
        order = {r.run_id: r for r in (*mine, *theirs)}
        plain = await DurableAgent(client, agent, task_queue=tq).conversation()
        for run_id in runs:
            await plain.send(order[run_id].messages[-2].content)
        reference = await plain.messages()
    # A run takes its 3 turns plus at most the other client's turn admitted meanwhile: the
    # switch is never put off by sends that keep arriving.
    assert switches >= 2 * turns // 4 - 1
    assert len(runs) == len(set(runs)) == 2 * turns  # no turn lost or doubled
    assert set(runs) == set(order)
    for position, run_id in enumerate(runs, 1):  # each turn saw exactly the turns before it
        result = order[run_id]
        prompt = result.messages[-2].content
        assert result.output == f"{position}: {prompt}"
        assert result.messages == transcript[: 2 * position]
    assert contents(transcript) == contents(reference)
    assert len(model.requests) == 4 * turns  # each turn's model call once, here and in plain


@pytest.mark.parametrize("inline", [False, True], ids=["child-runs", "inline-turns"])
async def test_a_send_retried_after_a_switch_returns_the_same_turn(
    temporal_client: Client, inline: bool
) -> None:
    agent, model = echo_agent(f"echo-{inline}")
    async with serve(temporal_client, agent) as tq:
        # Inline, no workflow bears the turn's id: the earlier run's history answers it.
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1, inline_turns=inline)
        run_id = str(uuid.uuid4())
        once = await conv.send("hi", run_id=run_id)

        async def switched() -> bool:  # the turn that ran sits in the previous run now
            return await continued(temporal_client, conv.id) >= 1

        await eventually(switched, what="the conversation continued as new")
        # Temporal dedups update ids per workflow run only: golem dedups by its run list.
        again = await conv.send("hi", run_id=run_id)
        runs = await conv.runs()
        transcript = await conv.messages()
    assert runs == [run_id]
    assert again.run_id == run_id
    assert again.output == once.output
    assert again.messages == once.messages == transcript
    assert len(model.requests) == 1
