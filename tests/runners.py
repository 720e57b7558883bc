"""How tests run an agent: in process or durably (shared by conftest.py and the tests)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

from temporalio.client import Client
from temporalio.worker import Worker

from golem.agent import Agent
from golem.client import DurableAgent
from golem.messages import Message, Part
from golem.results import Result, RunError
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
        serving: Sequence[Agent[Any, Any]] = (),
    ) -> Result[Any]: ...


class LocalRunner:
    name = "local"

    async def __call__(
        self,
        agent: Agent[Any, Any],
        prompt: str | None = None,
        serving: Sequence[Agent[Any, Any]] = (),
        **kw: Any,
    ) -> Result[Any]:
        return await agent.run(prompt, **kw)


class DurableRunner:
    """Serves the agent from a fresh worker on its own task queue for each run."""

    name = "durable"

    def __init__(self, client: Client) -> None:
        self.client = client

    async def __call__(
        self,
        agent: Agent[Any, Any],
        prompt: str | None = None,
        serving: Sequence[Agent[Any, Any]] = (),
        **kw: Any,
    ) -> Result[Any]:
        """``serving``: agents the worker serves too (those a tool reaches by ctx.delegate)."""
        task_queue = f"test-{uuid.uuid4().hex[:12]}"
        plugin = GolemPlugin(agent, *serving, heartbeat_timeout=timedelta(seconds=5))
        async with Worker(self.client, task_queue=task_queue, plugins=[plugin]):
            durable = DurableAgent(self.client, agent, task_queue=task_queue)
            result = await durable.run(prompt, **kw)
            if result.paused:
                # A paused durable run waits in its workflow; these tests continue it by a
                # new run, as in process, which golem allows once it no longer waits.
                waiting = await durable.attach(result.run_id)
                await waiting.cancel()
                with contextlib.suppress(RunError):
                    await waiting.result(final=True)
            return result
