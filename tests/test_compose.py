"""Agents inside a user's own workflow: ``golem.workflows.run_agent`` as a child run or inline."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from compose_workflows import CatchingWorkflow, IdentityWorkflow, helper, identity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError
from temporalio.worker import Replayer, Worker

from examples.support_ticket import Ticket, TicketWorkflow, reply_agent, triage_agent
from golem.client import CONVERSATION_ID
from golem.worker import GolemPlugin


async def test_a_user_workflow_runs_a_child_agent_waits_for_a_signal_then_runs_one_inline(
    temporal_client: Client,
) -> None:
    tq = f"ticket-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(triage_agent, reply_agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(temporal_client, task_queue=tq, workflows=[TicketWorkflow], plugins=[plugin]):
        handle = await temporal_client.start_workflow(
            TicketWorkflow.run,
            Ticket("I was charged twice."),
            id=f"ticket-{uuid.uuid4()}",
            task_queue=tq,
        )
        await handle.signal(TicketWorkflow.review, "Refund is on its way.")
        outcome = await handle.result()
        history = await handle.fetch_history()
    assert outcome.queue == "billing"
    assert outcome.reply == "Thanks for writing in. Queue billing. Refund is on its way."
    triage = await temporal_client.get_workflow_handle(outcome.triage_run_id).describe()
    assert triage.parent_id == handle.id
    assert triage.typed_search_attributes.get(CONVERSATION_ID)
    with pytest.raises(RPCError):  # the inline run is no workflow of its own
        await temporal_client.get_workflow_handle(outcome.reply_run_id).describe()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["golem.model_request"]  # the reply's model call, in the ticket's history
    await Replayer(workflows=[TicketWorkflow], plugins=[plugin]).replay_workflow(history)


@pytest.mark.parametrize("inline", [False, True], ids=["child", "inline"])
async def test_run_agent_returns_results_and_raises_run_error_like_agent_run(
    temporal_client: Client, inline: bool
) -> None:
    tq = f"compose-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(helper, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(
        temporal_client, task_queue=tq, workflows=[CatchingWorkflow], plugins=[plugin]
    ):
        handle = await temporal_client.start_workflow(
            CatchingWorkflow.run, inline, id=f"catch-{uuid.uuid4()}", task_queue=tq
        )
        report = await handle.result()
        history: WorkflowHistory = await handle.fetch_history()
    # seen 1, seen 2 (the second run continued the first), same conversation, the failed
    # run's stage, and its evidence: prompt + the requesting turn + the closed call.
    assert report == ["seen 1", "seen 2", "True", "tool", "3"]
    await Replayer(workflows=[CatchingWorkflow], plugins=[plugin]).replay_workflow(history)


@pytest.mark.parametrize("inline", [False, True], ids=["child", "inline"])
async def test_a_tool_sees_its_own_runs_identity_as_a_child_or_inline(
    temporal_client: Client, inline: bool
) -> None:
    tq = f"identity-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(identity, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(
        temporal_client, task_queue=tq, workflows=[IdentityWorkflow], plugins=[plugin]
    ):
        handle = await temporal_client.start_workflow(
            IdentityWorkflow.run, inline, id=f"identity-{uuid.uuid4()}", task_queue=tq
        )
        seen, actual = await handle.result()
    # Inline, the run's id is not its workflow's: the tool call must still name it.
    assert seen == actual
    assert not actual.startswith(handle.id)
