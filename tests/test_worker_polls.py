"""A golem worker gives its task queue more of its pollers than Temporal's default (ADR 0049):
every conversation turn is a new child run, whose first task waits on the task queue,
not on the worker's sticky queue."""

from __future__ import annotations

import uuid

from agents import scripted
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem.messages import Message
from golem.worker import GolemPlugin


async def test_the_plugin_gives_new_runs_more_pollers_unless_the_worker_says_otherwise(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent, _ = scripted([Message.assistant("hello")])
    client = temporal_env.client
    golem = Worker(client, task_queue=f"polls-{uuid.uuid4().hex[:8]}", plugins=[GolemPlugin(agent)])
    told = Worker(
        client,
        task_queue=f"polls-{uuid.uuid4().hex[:8]}",
        plugins=[GolemPlugin(agent)],
        nonsticky_to_sticky_poll_ratio=0.25,
    )
    assert golem.config(active_config=True)["nonsticky_to_sticky_poll_ratio"] == 0.5
    assert told.config(active_config=True)["nonsticky_to_sticky_poll_ratio"] == 0.25
