"""What a durable conversation refuses, naming why: an agent the worker does not serve,
a turn's run id that another workflow holds, and a run id reused for another turn."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from test_conversation import echo_agent, serve
from test_conversation_boundaries import budgeted

from golem.client import DurableAgent, fetch_run
from golem.wire import names
from golem.workflows.turn_runs import TurnInput, TurnOutput


async def test_a_conversation_of_an_agent_the_worker_does_not_serve_fails_at_once(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, "nobody", task_queue=tq).conversation()
        with pytest.raises(WorkflowFailureError) as failed:
            await conv.handle.result()  # it used to stay RUNNING, every turn failing alone
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == names.UNKNOWN_AGENT
    assert cause.message == f"unknown agent 'nobody': the worker on task queue {tq!r} has: echo"


async def test_a_turn_cannot_take_the_run_id_of_a_finished_run_or_of_another_conversation(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        standalone = await durable.run("alone")
        other = await durable.conversation()
        theirs = await other.send("theirs")
        conv = await durable.conversation()
        for taken in (standalone.run_id, theirs.run_id):
            with pytest.raises(ValueError, match=rf"run id '{taken}' is taken"):
                await conv.send("mine", run_id=taken)
        mine = await conv.send("mine")  # the refusals left nothing behind
        runs = await conv.runs()
        record = await fetch_run(temporal_client, standalone.run_id)
    assert runs == [mine.run_id] and mine.output == "1: mine"
    assert [m.content for m in record.messages] == ["alone", "1: alone"]  # still its own


async def test_a_run_id_reused_with_another_prompt_after_continue_as_new_is_refused(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1)
        run_id = str(uuid.uuid4())
        first = await conv.send("first", run_id=run_id)  # the conversation continues as new
        again = await conv.send("first", run_id=run_id)  # a retry: that turn's result
        with pytest.raises(ValueError, match="with another prompt, parts or deps"):
            await conv.send("second", run_id=run_id)  # it used to return the first turn
        runs = await conv.runs()
    assert again.output == first.output == "1: first"
    assert runs == [run_id]


async def test_a_run_id_reused_with_another_prompt_in_the_same_run_is_refused_by_update_id(
    temporal_client: Client,
) -> None:
    """Temporal dedups update ids: a send whose update id names the turn (run id and
    fingerprint) reaches the workflow, which refuses another turn under that run id."""
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        turn = TurnInput(run_id=str(uuid.uuid4()), prompt="first")
        other = TurnInput(run_id=turn.run_id, prompt="second")
        sent = await conv.handle.execute_update(
            "golem.send", turn, id=turn.update_id(), result_type=TurnOutput
        )
        again = await conv.handle.execute_update(
            "golem.send", turn, id=turn.update_id(), result_type=TurnOutput
        )
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await conv.handle.execute_update("golem.send", other, id=other.update_id())
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == names.TURN_DIFFERS
    assert again == sent and turn.update_id() != other.update_id()


async def test_a_send_reusing_a_run_id_with_another_prompt_is_refused(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        run_id = str(uuid.uuid4())
        await conv.send("first", run_id=run_id)
        with pytest.raises(ValueError, match="with another prompt, parts or deps"):
            await conv.send("second", run_id=run_id)


async def test_a_run_id_over_temporals_id_limit_is_refused_before_anything_is_sent(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """It used to retry for ever (the send's update id, the run id and a digest, over the
    server's limit too); the conversation's validator refuses it for other clients."""
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        async with asyncio.timeout(30):
            with pytest.raises(ValueError, match="a run id of 1001 characters, over Temporal's"):
                await conv.send("hi", run_id="r" * 1001)
            with pytest.raises(ValueError, match="a run id of 1001 characters, over Temporal's"):
                async for _ in conv.send_stream("hi", run_id="r" * 1001):
                    pass
        after = await conv.send("after")
    assert after.output == "1: after"
