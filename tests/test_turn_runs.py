"""An inline turn's run id leads to its conversation (docs/adr/0050-turns-inline.md): the
conversation's workflow run lists the run ids of the inline turns it took in
``GolemTurnRuns``, so visibility, ``golem show RUN_ID``, ``golem conversation RUN_ID`` and
``durable.conversation(RUN_ID)`` find it, across continue-as-new too; a namespace without
the attribute runs inline turns unlisted, as before."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker
from test_cli import address, golem
from test_conversation import echo_agent, serve
from test_conversation_boundaries import continued
from test_conversation_idle import closed
from test_handoff_conversation import desk
from test_inbox import server_without
from waiting import eventually

from golem import Agent
from golem.client import DurableAgent, DurableConversation
from golem.client.lookups import inline_not_a_conversation, inline_turn_conversation
from golem.messages import load_messages
from golem.wire import ConversationInput, names
from golem.wire.lineage import (
    CONVERSATION_ID,
    TURN_RUNS,
    WAITING,
    run_search_attributes,
)
from golem.worker import GolemPlugin
from golem.workflows import listed_turns
from golem.workflows.conversation import ConversationWorkflow

_ = address  # a fixture, shared with test_cli


async def listed_on(client: Client, run_id: str) -> tuple[str, str]:
    """The conversation and its workflow run that visibility lists turn ``run_id`` on."""
    found = await eventually(
        lambda: inline_turn_conversation(client, run_id), what=f"turn {run_id} listed"
    )
    assert isinstance(found, tuple)
    return found


def sent(accepted: Any) -> bytes:
    """The argument of an accepted update (a send's ``TurnInput``), as recorded."""
    return bytes(accepted.accepted_request.input.args.payloads[0].data)


@asynccontextmanager
async def inline_conversation(
    client: Client, name: str, idle_timeout: timedelta | None = None
) -> AsyncIterator[tuple[DurableAgent[Any], DurableConversation[Any]]]:
    """A new inline conversation of an echoing agent (and the agent), served meanwhile."""
    agent, _ = echo_agent(name)
    async with serve(client, agent) as tq:
        durable = DurableAgent(client, agent, task_queue=tq)
        yield durable, await durable.conversation(idle_timeout=idle_timeout, inline_turns=True)


async def listed_conversation(
    client: Client, agent: Agent[Any, Any], task_queue: str, turns_per_run: int
) -> DurableConversation[Any]:
    """An inline conversation started as ``durable.conversation`` starts one where the
    namespace has ``GolemTurnRuns``, continuing as new after every ``turns_per_run`` turns."""
    conversation_id = f"listed-{uuid.uuid4()}"
    await client.start_workflow(
        ConversationWorkflow.run,
        ConversationInput(agent=agent.name, turns_per_run=turns_per_run, inline_turns=True),
        id=conversation_id,
        task_queue=task_queue,
        search_attributes=run_search_attributes(
            conversation_id, agent.name, waiting=True, turn_runs=True
        ),
        memo={names.INLINE_MEMO: True, names.TURN_RUNS_MEMO: True},
    )
    durable = DurableAgent(client, agent, task_queue=task_queue)
    return DurableConversation(durable, client.get_workflow_handle(conversation_id))


async def test_each_inline_turn_is_listed_on_the_workflow_run_that_took_it(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent("listed")
    async with serve(temporal_client, agent) as tq:
        conv = await listed_conversation(temporal_client, agent, tq, turns_per_run=3)
        turns = [(await conv.send(f"turn {n}")).run_id for n in range(5)]
        await conv.close()
    assert await continued(temporal_client, conv.id) == 1
    latest = (await conv.handle.describe()).run_id
    first = None
    async for event in conv.handle.fetch_history_events():
        first = event.workflow_execution_started_event_attributes.continued_execution_run_id
        break
    assert first
    assert [await listed_on(temporal_client, t) for t in turns] == [(conv.id, first)] * 3 + [
        (conv.id, latest)
    ] * 2
    runs = [temporal_client.get_workflow_handle(conv.id, run_id=r) for r in (first, latest)]
    described = [(await h.describe()).typed_search_attributes for h in runs]
    assert [d.get(TURN_RUNS) for d in described] == [turns[:3], turns[3:]]
    # The next run keeps the rest of the conversation's lineage.
    assert [(d.get(CONVERSATION_ID), d.get(WAITING)) for d in described] == [(conv.id, 0)] * 2
    # Each upsert is in the workflow task that accepted the turn's send: no task more.
    events = [e async for e in runs[0].fetch_history_events()]
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    upserted = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    tasks = (
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    )
    for turn in turns[:3]:
        at = next(
            i
            for i, e in enumerate(events)
            if e.event_type == accepted
            and turn.encode() in sent(e.workflow_execution_update_accepted_event_attributes)
        )
        upsert = next(i for i, e in enumerate(events[at:], at) if e.event_type == upserted)
        assert not [e for e in events[at:upsert] if e.event_type in tasks], turn


async def test_turns_past_the_bound_are_left_unlisted_and_the_conversation_goes_on(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Temporal fails a workflow task whose upsert passes its limit (2,048 bytes by default),
    # for ever: a run id the list cannot take under its bound is left out.
    monkeypatch.setattr(listed_turns, "LIST_BYTES", 100)  # two uuid7 ids: 80 bytes
    async with inline_conversation(temporal_client, "bounded") as (_, conv):
        results = [await conv.send(p) for p in ("one", "two", "three")]
        long = await conv.send("long", run_id="x" * 120)
        await conv.close()
    assert [r.output for r in [*results, long]] == ["1: one", "2: two", "3: three", "4: long"]
    latest = (await conv.handle.describe()).run_id
    first, second, third = (r.run_id for r in results)
    assert await listed_on(temporal_client, second) == (conv.id, latest)
    handle = temporal_client.get_workflow_handle(conv.id, run_id=latest)
    assert (await handle.describe()).typed_search_attributes.get(TURN_RUNS) == [first, second]
    assert await inline_turn_conversation(temporal_client, third) is None
    assert await inline_turn_conversation(temporal_client, long.run_id) is None
    assert await continued(temporal_client, conv.id) == 0


async def test_a_list_that_would_pass_temporals_limit_stops_short_of_it(
    temporal_client: Client,
) -> None:
    # Three 700-character run ids make 2,113 bytes: the dev server fails the whole workflow
    # on such an upsert (measured without the bound: the third send met a closed
    # conversation, BadSearchAttributes). The bound leaves the third unlisted instead.
    async with inline_conversation(temporal_client, "limit") as (_, conv):
        ids = [f"{n}" + "r" * 699 for n in range(3)]
        results = [await conv.send(f"t{n}", run_id=ids[n]) for n in range(3)]
        described = await conv.handle.describe()
        events = [e async for e in conv.handle.fetch_history_events()]
        await conv.close()
    assert [r.output for r in results] == ["1: t0", "2: t1", "3: t2"]
    assert described.typed_search_attributes.get(TURN_RUNS) == ids[:2]
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    assert not [e for e in events if e.event_type == failed]


async def test_golem_show_and_the_client_find_an_inline_turn_by_its_run_id(
    address: str, temporal_client: Client
) -> None:
    async with inline_conversation(temporal_client, "shown") as (durable, conv):
        first = await conv.send("hello")
        second = await conv.send("again")
        await listed_on(temporal_client, first.run_id)
        with pytest.raises(ValueError) as caught:
            await durable.conversation(first.run_id)
        await conv.close()

    assert str(caught.value) == inline_not_a_conversation(first.run_id, conv.id)
    assert str(caught.value) == (
        f"{first.run_id} is a run id (a turn of conversation {conv.id}, run inline), not a "
        f"conversation id: attach to {conv.id}"
    )
    shown = await golem("show", first.run_id)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == (
        f"run {first.run_id}: completed (a turn of conversation {conv.id}, run inline)"
    )
    assert "hello" in shown.out and "1: hello" in shown.out
    assert "again" not in shown.out  # the conversation up to this turn's end, as a run's
    assert f"its conversation: golem show {conv.id}" in lines
    as_json = await golem("show", second.run_id, "--json")
    assert as_json.code == 0, as_json.err
    assert load_messages(as_json.out.encode()) == second.messages
    await named_by_golem_conversation(first.run_id, conv.id, ", run inline")


async def test_a_child_turns_run_id_given_to_golem_conversation_names_its_conversation(
    address: str, temporal_client: Client
) -> None:
    agent, _ = echo_agent("child-named")
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        turn = await conv.send("hello")
        await conv.close()
    await named_by_golem_conversation(turn.run_id, conv.id)


async def named_by_golem_conversation(run_id: str, conversation_id: str, how: str = "") -> None:
    """``golem conversation RUN_ID`` names the conversation of the turn ``run_id``."""
    listed = await golem("conversation", run_id)
    assert listed.code == 1
    assert (
        f"{run_id} is a run id (a turn of conversation {conversation_id}{how}), not a "
        f"conversation id: `golem conversation {conversation_id}` lists its runs"
    ) in listed.err


async def test_a_namespace_without_golem_turn_runs_runs_inline_turns_unlisted() -> None:
    async with server_without(TURN_RUNS.name) as client:
        agent, _ = echo_agent("older")
        async with Worker(client, task_queue="older", plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(client, agent, task_queue="older")
            conv = await durable.conversation(inline_turns=True)
            turns = [await conv.send(p) for p in ("hello", "again")]
            found = await inline_turn_conversation(client, turns[0].run_id)
            described = await conv.handle.describe()
            memo = await described.memo()
            await conv.close()
        target = client.service_client.config.target_host
        shown = await golem("show", turns[0].run_id, env={"TEMPORAL_ADDRESS": target})
    assert [t.output for t in turns] == ["1: hello", "2: again"]
    assert found is None
    assert described.typed_search_attributes.get(TURN_RUNS) is None
    assert memo.get(names.INLINE_MEMO) is True and names.TURN_RUNS_MEMO not in memo
    assert shown.code == 1
    assert "a turn run inline is no workflow: `golem show` its conversation" in shown.err


async def test_a_reopened_conversation_lists_its_turns_on_its_new_run_alone(
    temporal_client: Client,
) -> None:
    rests = timedelta(seconds=1)
    async with inline_conversation(temporal_client, "reopened", rests) as (_, conv):
        first = await conv.send("one")
        await eventually(closed(temporal_client, conv.id), what="the conversation to rest")
        rested = (await conv.handle.describe()).run_id
        second = await conv.send("two")  # reopens it: a new workflow run
        reopened = (await conv.handle.describe()).run_id
        await conv.close()
    assert second.output == "2: two" and reopened != rested
    assert await listed_on(temporal_client, first.run_id) == (conv.id, rested)
    assert await listed_on(temporal_client, second.run_id) == (conv.id, reopened)
    handle = temporal_client.get_workflow_handle(conv.id, run_id=reopened)
    assert (await handle.describe()).typed_search_attributes.get(TURN_RUNS) == [second.run_id]


async def test_the_run_a_turn_handed_over_to_is_listed_and_shown(
    address: str, temporal_client: Client
) -> None:
    billing, _ = desk("billing")
    triage, _ = desk("triage", hands_to="billing", handoffs=[billing])
    async with serve(temporal_client, triage) as tq:
        durable = DurableAgent(temporal_client, triage, task_queue=tq)
        conv = await durable.conversation(inline_turns=True)
        handed = await conv.send("billing please")
        await conv.close()
    [target] = handed.sub_runs
    run = (await conv.handle.describe()).run_id
    assert await listed_on(temporal_client, target) == (conv.id, run)
    shown = await golem("show", target)
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[0] == (
        f"run {target}: completed (a turn of conversation {conv.id}, run inline)"
    )
