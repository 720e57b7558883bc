"""A worker killed with SIGKILL mid-call: a second worker picks the run up."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from crash_agents import (
    AGENTS,
    agent_evaluator_crash,
    at_most_once,
    delegating,
    delegating_in_tool,
    evaluator_crash,
    external_wait,
    idempotent,
    instructions_crash,
    model_crash,
    parallel,
    processor_crash,
    sequential,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from waiting import eventually, within

from golem.agent import Agent
from golem.client import DurableAgent, DurableRun
from golem.history.repair import INTERRUPTED_RESULT, OUTCOME_UNKNOWN_RESULT, normalize_history
from golem.results import Result, RunError
from golem.worker import GolemPlugin

WORKER = Path(__file__).parent / "crash_worker.py"
#: What a take-over waits for; it needs the dead worker's call to time out on its heartbeat.
TAKEN_OVER = (
    "the run to end on the second worker (a dead worker's call is retried once its "
    "heartbeat times out: is the activity's heartbeat_timeout set?)"
)


@asynccontextmanager
async def worker_process(
    env: WorkflowEnvironment,
    task_queue: str,
    settings: dict[str, str | None],
    script: Path = WORKER,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A worker process running ``script`` (it prints ``ready`` once it polls); ``settings``
    set (or, ``None``, unset) its environment variables."""
    environ = {k: v for k, v in os.environ.items() if k not in settings}
    environ.update({k: v for k, v in settings.items() if v is not None})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        env.client.service_client.config.target_host,
        task_queue,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert (await process.stdout.readline()).strip() == b"ready"
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def doomed_worker(
    env: WorkflowEnvironment, task_queue: str, crash_dir: Path
) -> AbstractAsyncContextManager[asyncio.subprocess.Process]:
    settings = {"GOLEM_CRASH_DIR": str(crash_dir), "GOLEM_CRASH_HANG": "1"}
    return worker_process(env, task_queue, dict(settings))


@pytest.fixture
def crash_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOLEM_CRASH_DIR", str(tmp_path))
    monkeypatch.delenv("GOLEM_CRASH_HANG", raising=False)
    return tmp_path


async def completed_activities(run: DurableRun[Any]) -> int:
    events = [e async for e in run.handle.fetch_history_events()]
    return sum(e.HasField("activity_task_completed_event_attributes") for e in events)


async def assert_heartbeats(run: DurableRun[Any]) -> None:
    """Every activity the run scheduled has a heartbeat timeout: the call of a worker that
    died is retried within seconds, not once its start-to-close timeout (minutes) is out."""
    async for event in run.handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            assert attrs.heartbeat_timeout.ToTimedelta() > timedelta(0), (
                f"{attrs.activity_type.name} was scheduled without a heartbeat timeout: the "
                "call of a worker that died would wait out its start-to-close timeout"
            )


async def crash_then_take_over(
    env: WorkflowEnvironment, agent_name: str, crash_dir: Path, completed_before_kill: int = 0
) -> tuple[DurableAgent[str], object]:
    task_queue = f"crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(env.client, agent_name, task_queue=task_queue)
    async with doomed_worker(env, task_queue, crash_dir) as process:
        run = await durable.start("go")
        started = crash_dir / "started"
        await eventually(started.exists, what="the call to start", timeout=30, interval=0.02)

        async def completed() -> bool:
            return await completed_activities(run) >= completed_before_kill

        await eventually(completed, what=f"{completed_before_kill} activities done", timeout=30)
        process.send_signal(signal.SIGKILL)
        await process.wait()
    await assert_heartbeats(run)
    plugin = GolemPlugin(*AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
        try:
            outcome: object = await within(run.result(), what=TAKEN_OVER)
        except RunError as exc:
            outcome = exc
        if isinstance(outcome, RunError):
            resumed = await durable.resume(outcome, "try again")
            return durable, (outcome, resumed)
    return durable, outcome


def executions(crash_dir: Path) -> list[str]:
    return (crash_dir / "executions").read_text().split()


async def test_idempotent_tool_is_retried_after_a_crash_and_the_run_completes(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    _, result = await crash_then_take_over(temporal_env, idempotent.name, crash_dir)
    assert executions(crash_dir) == ["lookup", "lookup"]
    assert result.output == "finished: looked up"  # type: ignore[attr-defined]
    results = [m for m in result.messages if m.role == "tool"]  # type: ignore[attr-defined]
    assert [(m.tool_call_id, m.content) for m in results] == [("call-1", "looked up")]


async def test_at_most_once_tool_is_not_repeated_and_its_outcome_is_reported_unknown(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    _, outcome = await crash_then_take_over(temporal_env, at_most_once.name, crash_dir)
    error, resumed = outcome  # type: ignore[misc]
    assert executions(crash_dir) == ["charge_card"]
    assert error.stage == "tool"
    assert "timed out" in str(error)
    partial = error.partial
    assert partial is not None
    assert [m.role for m in partial.messages] == ["user", "assistant", "tool"]
    assert partial.messages[1].tool_calls[0].name == "charge_card"
    # It had started when its worker died: never "interrupted before execution".
    assert partial.messages[2].content == OUTCOME_UNKNOWN_RESULT
    assert not normalize_history(partial.messages)[1].changed  # resume needs no repair
    assert resumed.conversation_id == partial.conversation_id
    tool_results = [m for m in resumed.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.content, m.run_id) for m in tool_results] == [
        ("call-1", OUTCOME_UNKNOWN_RESULT, partial.run_id)
    ]
    assert resumed.output == f"finished: {OUTCOME_UNKNOWN_RESULT}"


async def test_model_call_crash_is_retried_on_another_worker(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    _, result = await crash_then_take_over(temporal_env, model_crash.name, crash_dir)
    assert executions(crash_dir) == ["model", "model"]
    assert result.output == "the model answered"  # type: ignore[attr-defined]
    assert result.requests == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("agent", "what"), [(instructions_crash, "instructions"), (processor_crash, "processor")]
)
async def test_once_per_run_function_whose_worker_died_runs_again_and_the_run_completes(
    temporal_env: WorkflowEnvironment, crash_dir: Path, agent: Agent[Any, Any], what: str
) -> None:
    _, result = await crash_then_take_over(temporal_env, agent.name, crash_dir)
    assert isinstance(result, Result), result  # not failed (and resumed): retried
    # Once per outcome: the crashed attempt had none, so it ran again on the second worker.
    assert executions(crash_dir) == [what, what]
    expected = "be brief" if what == "instructions" else "static"
    assert result.output == f"instructions: {expected}"


async def test_started_call_is_outcome_unknown_and_unstarted_call_is_interrupted(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    _, outcome = await crash_then_take_over(temporal_env, sequential.name, crash_dir)
    error, resumed = outcome  # type: ignore[misc]
    assert executions(crash_dir) == ["charge_card"]  # never repeated; send_receipt never ran
    assert error.stage == "tool"
    partial = error.partial
    assert partial is not None
    results = [(m.tool_call_id, m.content) for m in partial.messages if m.role == "tool"]
    assert results == [("call-1", OUTCOME_UNKNOWN_RESULT), ("call-2", INTERRUPTED_RESULT)]
    assert not normalize_history(partial.messages)[1].changed
    assert resumed.output == f"finished: {OUTCOME_UNKNOWN_RESULT} | {INTERRUPTED_RESULT}"


async def test_crashed_parallel_batch_keeps_the_sibling_result_that_finished(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    # Killed once the model call and the sibling's result are recorded in the history.
    _, outcome = await crash_then_take_over(temporal_env, parallel.name, crash_dir, 2)
    error, _ = outcome  # type: ignore[misc]
    assert executions(crash_dir).count("charge_card") == 1
    partial = error.partial
    assert partial is not None
    results = [(m.tool_call_id, m.content) for m in partial.messages if m.role == "tool"]
    assert results == [("call-1", OUTCOME_UNKNOWN_RESULT), ("call-2", "quoted 42")]


async def activities_scheduled(env: WorkflowEnvironment, run_id: str, name: str) -> int:
    handle = env.client.get_workflow_handle(run_id)
    names = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    return names.count(name)


async def delegated_after_crash(
    env: WorkflowEnvironment, agent: Agent[Any, Any], crash_dir: Path
) -> Result[Any]:
    """``agent``'s run, whose delegate's lookup was on the worker that died, completed."""
    _, result = await crash_then_take_over(env, agent.name, crash_dir)
    assert isinstance(result, Result), result
    assert result.output == "delegated: finished: looked up"
    return result


async def test_a_child_run_whose_worker_died_goes_on_elsewhere_started_once(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    result = await delegated_after_crash(temporal_env, delegating, crash_dir)
    # The caller's model call ran once; the child's lookup died with its worker and was
    # retried on the other (idempotent): nothing repeated, nothing lost.
    assert sorted(executions(crash_dir)) == ["lookup", "lookup", "model:idempotent"]
    [child] = result.sub_runs
    caller = temporal_env.client.get_workflow_handle(result.run_id)
    started = [
        e
        async for e in caller.fetch_history_events()
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    assert len(started) == 1  # started once, by the caller's workflow: no activity to repeat
    assert await activities_scheduled(temporal_env, child, "golem.model_request") == 2
    assert await activities_scheduled(temporal_env, result.run_id, "golem.model_request") == 2


async def test_a_retried_tool_attaches_to_the_sub_run_its_ctx_delegate_started(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    result = await delegated_after_crash(temporal_env, delegating_in_tool, crash_dir)
    ran = executions(crash_dir)
    # The tool ran again on the second worker, the lookup too (both died mid-call); the
    # sub-run did not: the retry attached to it.
    assert (ran.count("model:ask"), ran.count("ask"), ran.count("lookup")) == (1, 2, 2)
    [sub_run] = result.sub_runs
    assert await activities_scheduled(temporal_env, sub_run, "golem.model_request") == 2
    found = [
        w.id
        async for w in temporal_env.client.list_workflows(f"GolemParentRunId = '{result.run_id}'")
    ]
    assert found == [sub_run]


@pytest.mark.parametrize(
    ("agent", "by"),
    [
        (evaluator_crash, "evaluator:_slow_reviewer"),  # an async function
        (agent_evaluator_crash, "evaluator:slow_reviewer"),  # another golem Agent
    ],
)
async def test_an_approval_evaluator_whose_worker_died_runs_again_and_decides_once(
    temporal_env: WorkflowEnvironment, crash_dir: Path, agent: Agent[Any, Any], by: str
) -> None:
    _, result = await crash_then_take_over(temporal_env, agent.name, crash_dir)
    assert executions(crash_dir) == ["evaluator", "evaluator", "refund"]
    assert result.output == "finished: refunded"  # type: ignore[attr-defined]
    [tool] = [m for m in result.messages if m.role == "tool"]  # type: ignore[attr-defined]
    assert tool.decision is not None and tool.decision.by == by


async def test_a_run_waiting_for_an_external_result_outlives_its_worker_and_is_answered_once(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    client = temporal_env.client
    task_queue = f"crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(client, external_wait, task_queue=task_queue)
    async with worker_process(temporal_env, task_queue, {}) as process:
        run = await durable.start("deliver")
        paused = await run.result()
        process.send_signal(signal.SIGKILL)
        await process.wait()
    # Sent while no worker runs: the answer waits for one (its validator runs there).
    answering = asyncio.create_task(run.complete({"d1": "2026-12-24"}, by="app"))
    plugin = GolemPlugin(*AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        done = await within(answering, what="the answer taken by the new worker", timeout=60)
        with pytest.raises(ValueError) as again:
            await run.complete({"d1": "2026-12-25"}, by="someone else")
    assert [c.id for c in paused.pending_calls] == ["d1"]
    assert done.output == "booked for 2026-12-24" and done.run_id == run.run_id
    [result] = [m for m in done.messages if m.role == "tool"]
    assert result.decision is not None and result.decision.by == "app"
    assert str(again.value) == f"run {run.run_id} has ended (completed): nothing to approve"
    assert executions(crash_dir) == ["model", "model"]  # the model asked once each turn
