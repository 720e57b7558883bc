"""Shared fixtures. ``runner`` runs an agent through an executor: in process today, and
through a real Temporal dev server (``durable``) for the tests marked ``both_executors``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pytest

from golem.agent import Agent
from golem.messages import Message, Part
from golem.results import Result


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

    async def __call__(self, agent: Agent[Any, Any], prompt: str | None = None, **kw: Any) -> Result[Any]:
        return await agent.run(prompt, **kw)


@pytest.fixture
def runner() -> Runner:
    """Run an agent in process (tests of loop behaviour use this, so other executors can too)."""
    return LocalRunner()
