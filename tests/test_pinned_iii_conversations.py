"""Conversation behaviours a planted bug once slipped past (issue 29, "Tests that were
missing"): a send retried with the same prompt, the digest check when a turn's history is
read back, and handoffs: the messages a handed-over turn records, a handoff followed by
continue-as-new, and the target's deps."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from agents import Deps
from delegation_agents import answer, calls, results_of
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from test_conversation import echo_agent, serve
from test_conversation_boundaries import budgeted, continued
from test_durable import history_events
from test_handoff_conversation import desk
from waiting import eventually

from golem import Agent, Message, Result, RunContext
from golem.client import DurableAgent, DurableConversation, fetch_run
from golem.client.records import base_messages
from golem.models import FunctionModel, ModelResponse
from golem.wire import AgentRunInput, TurnInput


def _run_id(name: str) -> str:
    """A run id of its own (a run id names one run, ever, on the suite's server)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


TURN_TWO, HANDED_TURN = _run_id("turn-two"), _run_id("handed-turn")
HANDED_SWITCH, HANDED_RETRIED = _run_id("handed-switch"), _run_id("handed-retried")
TURN_DIFFERS = _run_id("turn-differs")

# -- a send retried with the same prompt ---------------------------------------------------


def gated_echo(name: str) -> tuple[Agent[Any, str], FunctionModel, asyncio.Event]:
    """Answers as echo_agent does, except that "two" waits for the returned event."""
    gate = asyncio.Event()

    async def answer_(messages: list[Message], tools: Any) -> Message:
        users = [m for m in messages if m.role == "user"]
        if users[-1].content == "two":
            await gate.wait()
        return Message.assistant(f"{len(users)}: {users[-1].content}")

    model = FunctionModel(answer_)
    return Agent(model, name=name), model, gate


async def test_a_send_retried_with_the_same_prompt_is_the_first_sends_turn_in_flight_and_after(
    temporal_client: Client,
) -> None:
    agent, model, gate = gated_echo("echo-same-retry")
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        await conv.send("one")
        first = asyncio.ensure_future(conv.send("two", run_id=TURN_TWO))
        await eventually(lambda: len(model.requests) == 2, what="turn two to reach its model")
        # A client that lost its connection sends the same turn again, from a new handle.
        again_in_flight = asyncio.ensure_future(
            (await durable.conversation(conv.id)).send("two", run_id=TURN_TWO)
        )
        gate.set()
        two, in_flight = await asyncio.wait_for(asyncio.gather(first, again_in_flight), 30)
        three = await conv.send("three")
        # After later turns: from the handle that saw them, and from a new one.
        after = await conv.send("two", run_id=TURN_TWO)
        fresh = await (await durable.conversation(conv.id)).send("two", run_id=TURN_TWO)
    assert two.run_id == TURN_TWO and two.output == "2: two"
    assert len(two.messages) == 4  # the conversation through that turn, by reference
    for retried in (in_flight, after, fresh):
        assert (retried.run_id, retried.output) == (TURN_TWO, "2: two")
        assert retried.messages == two.messages == three.messages[:4]
    assert len(model.requests) == 3  # one, two, three: no retry ran a turn again
    # Each retry named the first send by its update id, which any client makes the same.
    accepted = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.meta.update_id
        for e in await history_events(temporal_client, conv.id)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert accepted.count(TurnInput(run_id=TURN_TWO, prompt="two").update_id()) == 1
    assert len(accepted) == 3


async def test_while_a_turn_runs_another_prompt_under_its_run_id_is_refused_a_new_id_queues(
    temporal_client: Client,
) -> None:
    """docs/adr/0025-a-retried-send-is-the-same-turn.md: the refusal comes at once, before
    anything is recorded; the turn in flight and a turn under a new id are unaffected."""
    agent, model, gate = gated_echo("echo-differs")
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        await conv.send("one")
        first = asyncio.ensure_future(conv.send("two", run_id=TURN_DIFFERS))
        await eventually(lambda: len(model.requests) == 2, what="turn two to reach its model")
        with pytest.raises(ValueError) as refused:
            await asyncio.wait_for(conv.send("not two", run_id=TURN_DIFFERS), 20)
        queued = asyncio.ensure_future(conv.send("three"))
        gate.set()
        two, three = await asyncio.wait_for(asyncio.gather(first, queued), 30)
        transcript = await conv.messages()
    assert str(refused.value) == (
        f"run id {TURN_DIFFERS!r} is a turn of this conversation already, with another "
        "prompt, parts or deps: a retried send must be the same turn; pass a new run id, "
        "or none to get one"
    )
    assert (two.output, three.output) == ("2: two", "3: three")
    assert [m.content for m in transcript if m.role == "user"] == ["one", "two", "three"]


# -- the digest check when a turn's history is read back -----------------------------------


async def test_a_turns_history_read_back_is_refused_when_it_does_not_match_its_digest(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent("echo-digest")
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        await conv.send("one")
        second = await conv.send("two")  # its history (the first turn) by reference
    handle = temporal_client.get_workflow_handle(second.run_id)
    async for event in handle.fetch_history_events():
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        [input] = await temporal_client.data_converter.decode(list(payloads), [AgentRunInput])
        break
    assert input.base is not None and input.base.count == 2
    record = await fetch_run(temporal_client, second.run_id)  # read back, checked: the same
    assert record.messages == second.messages
    assert await base_messages(temporal_client, input, second.run_id) == second.messages[:2]
    other = input.base.model_copy(update={"digest": input.base.digest[::-1]})
    shorter = input.base.model_copy(update={"count": 1})
    for base in (other, shorter):
        forged = input.model_copy(update={"base": base})
        with pytest.raises(ValueError) as refused:
            await base_messages(temporal_client, forged, second.run_id)
        assert str(refused.value) == (
            f"conversation {conv.id} no longer holds the history run {second.run_id} was "
            f"given (its first {base.count} messages changed)"
        )


# -- handoffs ------------------------------------------------------------------------------


async def test_a_handed_over_turn_records_the_callers_messages_then_the_targets(
    temporal_client: Client, conversation_shapes: str
) -> None:
    handed_turn = f"{HANDED_TURN}-{conversation_shapes[0]}"  # a run id names one run
    billing, _ = desk("billing-records")
    triage, _ = desk("triage-records", hands_to="billing-records", handoffs=[billing])
    async with serve(temporal_client, triage) as tq:
        durable = DurableAgent(temporal_client, triage, task_queue=tq)
        conv = await durable.conversation()
        first = await conv.send("hello")
        handed = await conv.send("billing-records please", run_id=handed_turn)
        transcript = await conv.messages()
        read_anew = await (await durable.conversation(conv.id)).messages()
    [target] = handed.sub_runs
    assert transcript == read_anew == handed.messages
    assert handed.messages[:2] == first.messages
    assert [(m.role, m.run_id, m.content) for m in handed.messages[2:]] == [
        ("user", handed_turn, "billing-records please"),
        ("assistant", handed_turn, ""),
        ("tool", handed_turn, "Transferred to billing-records."),
        ("assistant", target, "billing-records: billing-records please"),
    ]
    if conversation_shapes == "child runs":  # inline, the target's run is no workflow
        assert (await fetch_run(temporal_client, target)).messages == handed.messages


@asynccontextmanager
async def handed_over_then_continued(
    client: Client, name: str, run_id: str, shape: str = "child runs"
) -> AsyncIterator[tuple[DurableConversation[Any], Result[Any], list[str]]]:
    """A conversation (one turn per workflow run) whose turn ``run_id`` triage hands over
    to billing, once it has continued as new; billing's answered prompts."""
    billing, answered = desk(f"billing-{name}")
    triage, _ = desk(f"triage-{name}", hands_to=f"billing-{name}", handoffs=[billing])
    async with serve(client, triage) as tq:
        inline = shape == "inline"
        conv = await budgeted(client, triage, tq, turns_per_run=1, inline_turns=inline)
        handed = await conv.send(f"billing-{name}, please", run_id=run_id)

        async def switched() -> bool:
            return await continued(client, conv.id) >= 1

        await eventually(switched, what="the conversation to continue as new after the handoff")
        yield conv, handed, answered


async def test_after_a_handoff_and_continue_as_new_the_conversation_is_whole_and_goes_on(
    temporal_client: Client, conversation_shapes: str
) -> None:
    turn = f"{HANDED_SWITCH}-{conversation_shapes[0]}"
    async with handed_over_then_continued(temporal_client, "switch", turn, conversation_shapes) as (
        conv,
        handed,
        billing_answered,
    ):
        after = await conv.send("and then?")
        transcript = await conv.messages()
        runs = await conv.runs()
    [target] = handed.sub_runs
    assert runs == [turn, target, after.run_id]
    assert after.agent == "billing-switch" and after.output == "billing-switch: and then?"
    assert transcript == after.messages and after.messages[:4] == handed.messages
    assert billing_answered == ["billing-switch, please", "and then?"]


async def test_a_handed_over_send_retried_after_continue_as_new_returns_the_targets_answer(
    temporal_client: Client, conversation_shapes: str
) -> None:
    turn = f"{HANDED_RETRIED}-{conversation_shapes[0]}"
    async with handed_over_then_continued(
        temporal_client, "retried", turn, conversation_shapes
    ) as (
        conv,
        handed,
        _,
    ):
        # The client that sent the handed-over turn retries it, across the switch.
        again = await conv.send("billing-retried, please", run_id=turn)
    assert (again.run_id, again.agent, again.output) == (
        turn,
        "billing-retried",
        "billing-retried: billing-retried, please",
    )
    assert again.messages == handed.messages


@pytest.mark.usefixtures("conversation_shapes")
async def test_a_conversation_turn_handed_over_runs_the_target_with_the_turns_deps(
    temporal_client: Client,
) -> None:
    seen: list[str] = []

    def billing_model(messages: list[Message], tools: Any) -> ModelResponse:
        if messages[-1].role == "tool" and messages[-1].tool_name == "customer":
            return answer(f"billing for {messages[-1].content}")
        return calls(("k1", "customer", {}))

    billing: Agent[Deps, str] = Agent(
        FunctionModel(billing_model), name="billing-turn-deps", deps_type=Deps
    )

    @billing.tool
    def customer(ctx: RunContext[Deps]) -> str:
        """Who is served."""
        seen.append(ctx.deps.name)
        return ctx.deps.name

    def triage_model(messages: list[Message], tools: Any) -> ModelResponse:
        if results_of(messages):
            return answer("triage again")
        return calls(("h1", "transfer_to_billing-turn-deps", {}))

    triage: Agent[Deps, str] = Agent(
        FunctionModel(triage_model), name="triage-turn-deps", deps_type=Deps, handoffs=[billing]
    )
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        handed = await conv.send("bill me", deps=Deps(name="Grace"))
        later = await conv.send("and again", deps=Deps(name="Alan"))
    assert (handed.agent, handed.output) == ("billing-turn-deps", "billing for Grace")
    assert later.output == "billing for Alan"  # the next turn's own deps, at the target
    assert seen == ["Grace", "Alan"]
