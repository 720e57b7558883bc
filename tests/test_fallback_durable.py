"""What only a durable fallback has: one activity per attempt on each model, named after it
and retried by its policy; a worker crash mid-fallback repeats nothing that completed; a
streamed switch marked as a restart (docs/adr/0017-fallback-and-retry.md)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

from crash_agents import AGENTS as CRASH_AGENTS
from crash_agents import fallback_crash
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_crash import TAKEN_OVER, assert_heartbeats, crash_dir, doomed_worker
from waiting import eventually, within

from golem import Agent, Message, Retry, RunEvent
from golem.client import DurableAgent
from golem.models import (
    FallbackModel,
    FunctionModel,
    ModelConnectionError,
    ModelHTTPError,
    ScriptedModel,
    StreamDelta,
    ToolDefinition,
)
from golem.streaming import write_text
from golem.worker import GolemPlugin
from golem.workflows.streams import StreamEvent

_ = crash_dir  # a fixture, shared with test_crash
FAST = Retry(max_attempts=2, initial_interval=0.001, backoff=1.0)


async def model_activities(client: Client, run_id: str) -> list[tuple[str, int]]:
    """Each model activity's summary and its retry policy's maximum attempts, in order."""
    converter = client.data_converter.payload_converter
    found = []
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        scheduled = event.activity_task_scheduled_event_attributes
        if scheduled.activity_type.name == "golem.model_request":
            summary = converter.from_payload(event.user_metadata.summary, str)
            found.append((summary, scheduled.retry_policy.maximum_attempts))
    return found


async def test_each_model_of_a_fallback_is_its_own_activity_named_and_retried_by_its_policy(
    temporal_client: Client,
) -> None:
    primary = ScriptedModel([ModelHTTPError(503, "down")] * 2, model_name="primary")
    backup = ScriptedModel([Message.assistant("hi")], model_name="backup")
    agent = Agent(
        FallbackModel(primary, backup, retry=[FAST, Retry(max_attempts=5)]), name="fb_summary"
    )

    task_queue = f"fallback-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        result = await DurableAgent(temporal_client, agent, task_queue=task_queue).run("go")

    assert result.model == "backup"
    assert len(primary.requests) == 2  # FAST's two attempts, then the backup
    assert await model_activities(temporal_client, result.run_id) == [
        ("model: primary (turn 1)", 2),
        ("model: backup (turn 1)", 5),
    ]


async def test_a_worker_killed_mid_fallback_repeats_nothing_that_completed(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    task_queue = f"crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(
        temporal_env.client, fallback_crash.name, task_queue=task_queue
    )
    async with doomed_worker(temporal_env, task_queue, crash_dir) as process:
        run = await durable.start("go")
        started = crash_dir / "started"
        await eventually(started.exists, what="the backup's call to start", timeout=30)
        process.send_signal(signal.SIGKILL)  # the primary has failed; the backup is mid-call
        await process.wait()
    await assert_heartbeats(run)
    plugin = GolemPlugin(*CRASH_AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(temporal_env.client, task_queue=task_queue, plugins=[plugin]):
        result = await within(run.result(), what=TAKEN_OVER)

    assert result.output == "the backup answered"
    assert result.model == "crash-backup"
    # The primary's failed attempt completed before the crash: it is not made again.
    assert (crash_dir / "executions").read_text().split() == ["primary", "backup", "backup"]


async def test_a_streamed_switch_is_a_restart_on_the_backup(temporal_client: Client) -> None:
    async def breaks_off(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta]:
        yield StreamDelta(kind="text", text="Hal")
        raise ModelConnectionError("connection reset mid-stream")

    primary = FunctionModel(lambda m, t: Message.assistant("unused"), breaks_off)
    backup = ScriptedModel([Message.assistant("Hello")], model_name="backup")
    agent = Agent(FallbackModel(primary, backup, retry=[Retry(max_attempts=1), None]), name="fbs")

    task_queue = f"fallback-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        stream = DurableAgent(temporal_client, agent, task_queue=task_queue).run_stream("go")
        async with asyncio.timeout(30):
            seen = [
                (e.kind, e.attempt, e.model, e.delta.text if e.delta else "") async for e in stream
            ]

    assert seen == [
        ("model_start", 0, "", ""),
        ("text_delta", 0, "", "Hal"),
        ("turn_restarted", 1, "backup", ""),
        ("text_delta", 0, "", "Hello"),
        ("model_end", 0, "", ""),
    ]
    assert stream.result.output == "Hello"
    assert stream.result.model == "backup"


def test_a_late_piece_of_the_failed_model_sorts_before_the_backups_restart() -> None:
    piece = StreamDelta(kind="text", text="late")
    restart = StreamEvent(kind="turn_restarted", turn=1, attempt=1, model="b", model_index=1)

    # Any attempt of the first model comes before the backup's first: the client drops it.
    assert StreamEvent.of_delta(piece, 1, attempt=5).attempt_order < restart.attempt_order
    assert StreamEvent.of_delta(piece, 1, 1, model_index=1).attempt_order == restart.attempt_order
    assert restart.to_event("r", "c").model == "b"


async def test_write_text_marks_a_switch_to_the_backup() -> None:
    async def events() -> AsyncIterator[RunEvent]:
        yield RunEvent("text_delta", "r", "c", 1, delta=StreamDelta(kind="text", text="Hal"))
        yield RunEvent("turn_restarted", "r", "c", 1, attempt=1, model="backup")
        yield RunEvent("text_delta", "r", "c", 1, delta=StreamDelta(kind="text", text="Hello"))

    written: list[str] = []
    await write_text(events(), written.append)

    assert "".join(written) == (
        "Hal\n[backup takes over from a model that failed: its answer restarts]\nHello\n"
    )
