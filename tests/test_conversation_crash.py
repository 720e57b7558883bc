"""A worker SIGKILLed mid-turn of a durable conversation: both the conversation workflow and
the turn's child run (or, inline, the turn itself) lived on it; a second worker finishes the
turn."""

from __future__ import annotations

import asyncio
import signal
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from crash_agents import AGENTS, conversation_answer, conversation_lookup
from temporalio.api.enums.v1 import EventType, PendingWorkflowTaskState
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_crash import TAKEN_OVER, crash_dir, doomed_worker, executions
from waiting import eventually, within

from golem.client import DurableAgent
from golem.wire import names
from golem.worker import GolemPlugin

__all__ = ["crash_dir"]  # the fixture, reused from the crash tests


async def worker_identities(handle: WorkflowHandle[object, object]) -> list[str]:
    """Who ran each workflow task of a workflow, in order."""
    return [
        e.workflow_task_started_event_attributes.identity
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    ]


def on_a_queue_of_its_own(client: Client, agent: str) -> DurableAgent[str]:
    return DurableAgent(client, agent, task_queue=f"conv-crash-{uuid.uuid4().hex[:12]}")


async def call_started(crash_dir: Path, what: str) -> None:
    """The doomed worker's call has started (and hangs)."""
    started = crash_dir / "started"
    await eventually(started.exists, what=f"{what} to start", timeout=30, interval=0.02)


@pytest.mark.parametrize("inline", [False, True], ids=["child-runs", "inline-turns"])
async def test_a_worker_killed_mid_turn_leaves_the_turn_to_another_worker_once(
    temporal_env: WorkflowEnvironment, crash_dir: Path, inline: bool
) -> None:
    client = temporal_env.client
    durable = on_a_queue_of_its_own(client, conversation_lookup.name)
    task_queue = durable.task_queue
    async with doomed_worker(temporal_env, task_queue, crash_dir) as process:
        conv = await durable.conversation(inline_turns=inline)
        first = await conv.send("hello")  # a whole turn on the doomed worker
        turn = asyncio.ensure_future(conv.send("please look it up"))
        await call_started(crash_dir, "the lookup")
        process.send_signal(signal.SIGKILL)
        await process.wait()
    doomed = f"{process.pid}@"
    plugin = GolemPlugin(*AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        second = await within(turn, what=TAKEN_OVER, timeout=60)  # its update outlived the worker
        third = await conv.send("thanks")
        runs = await conv.runs()
        transcript = await conv.messages()
        handles = [conv.handle]
        if not inline:  # an inline turn is no workflow: its tasks are the conversation's
            handles.append(client.get_workflow_handle(second.run_id))
        identities = [await worker_identities(handle) for handle in handles]
    # Each workflow started on the killed worker and was finished by the other one.
    for workers in identities:
        assert workers[0].startswith(doomed), workers
        assert not workers[-1].startswith(doomed), workers
    assert executions(crash_dir) == ["lookup", "lookup"]  # killed once, retried once
    assert second.output == "turn 2 finished: looked up"
    assert third.output == "turn 3: thanks"
    assert runs == [first.run_id, second.run_id, third.run_id]
    assert transcript == third.messages
    assert [(m.role, m.content, m.run_id) for m in transcript] == [
        ("user", "hello", first.run_id),
        ("assistant", "turn 1: hello", first.run_id),
        ("user", "please look it up", second.run_id),
        ("assistant", "", second.run_id),
        ("tool", "looked up", second.run_id),
        ("assistant", "turn 2 finished: looked up", second.run_id),
        ("user", "thanks", third.run_id),
        ("assistant", "turn 3: thanks", third.run_id),
    ]
    calls = [c.id for m in transcript for c in m.tool_calls]
    results = [m.tool_call_id for m in transcript if m.role == "tool"]
    assert calls == results == ["call-2"]  # the idempotent result appears exactly once


async def model_attempts(handle: WorkflowHandle[object, object]) -> list[int]:
    """The attempt each model request of a workflow completed on, in order."""
    scheduled: dict[int, str] = {}
    attempts: list[int] = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs_started = event.activity_task_started_event_attributes
            if scheduled.get(attrs_started.scheduled_event_id) == names.MODEL_REQUEST:
                attempts.append(attrs_started.attempt)
    return attempts


async def workflow_task_started(handle: WorkflowHandle[object, object]) -> bool:
    """A worker has taken the workflow's pending workflow task and not answered yet."""
    pending = (await handle.describe()).raw_description.pending_workflow_task
    return pending.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED


async def test_a_model_call_retried_after_its_worker_died_holding_a_workflow_task_completes(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    # The worker dies holding the conversation's workflow task: Temporal answers no query of
    # the conversation until that task times out (10 s). The model call's retry reads the
    # turn's messages by query (the new worker's cache has none) meanwhile: unless it
    # heartbeats while it waits, its 2 s heartbeat timeout spends every attempt left.
    client = temporal_env.client
    durable = on_a_queue_of_its_own(client, conversation_answer.name)
    async with doomed_worker(temporal_env, durable.task_queue, crash_dir) as process:
        conv = await durable.conversation(inline_turns=True)
        turn = asyncio.ensure_future(conv.send("note it"))
        await call_started(crash_dir, "the answer")
        process.send_signal(signal.SIGSTOP)
        # An update the frozen worker takes the workflow task of, and never answers.
        nudge = asyncio.ensure_future(conv.handle.execute_update(names.REVOKE, "nothing"))
        await eventually(
            lambda: workflow_task_started(conv.handle),
            what="the frozen worker to take the conversation's workflow task",
            timeout=30,
        )
        process.send_signal(signal.SIGKILL)
        await process.wait()
    plugin = GolemPlugin(*AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(client, task_queue=durable.task_queue, plugins=[plugin]):
        result = await within(turn, what=TAKEN_OVER, timeout=60)
        with pytest.raises(WorkflowUpdateFailedError):
            await within(nudge, what="the nudge to be refused", timeout=60)
    assert result.output == "answered after noted"
    # The killed call ran again once, on its first retry: no attempt timed out reading.
    assert executions(crash_dir) == ["model", "model"]
    assert await model_attempts(conv.handle) == [1, 2]
