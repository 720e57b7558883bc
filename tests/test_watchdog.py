"""A tool that blocks the worker's event loop is named, once, in the worker's log."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
from agents import ask, call, scripted
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem.agent import Agent
from golem.client import DurableAgent
from golem.messages import Message
from golem.worker import GolemPlugin, watchdog
from golem.worker.watchdog import watching_loop


async def test_an_async_tool_that_blocks_the_worker_loop_is_named_in_one_warning(
    temporal_env: WorkflowEnvironment,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent, _ = scripted(
        [ask(call("a", "nap"), call("b", "nap")), ask(call("c", "nap")), Message.assistant("ok")]
    )

    @agent.tool(sequential=True)
    async def nap() -> str:
        """Sleeps the wrong way."""
        time.sleep(1.0)
        return "rested"

    warnings = await loop_warnings(agent, temporal_env, caplog, monkeypatch)
    assert len(warnings) == 1, warnings  # three blocking calls, one warning
    assert warnings[0].startswith("tool 'nap' has held this worker's event loop for")
    assert "plain `def` tool" in warnings[0]


async def test_a_sync_tool_marked_on_loop_that_blocks_is_named_as_such(
    temporal_env: WorkflowEnvironment,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent, _ = scripted([ask(call("a", "nap")), Message.assistant("ok")])

    @agent.tool(on_loop=True)
    def nap() -> str:
        """Promised never to block, and blocks."""
        time.sleep(1.0)
        return "rested"

    warnings = await loop_warnings(agent, temporal_env, caplog, monkeypatch)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("tool 'nap' (marked on_loop) has held this worker's event loop")
    assert "not marked on_loop" in warnings[0]


async def loop_warnings(
    agent: Agent[Any, Any],
    temporal_env: WorkflowEnvironment,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> list[str]:
    """Run ``agent`` durably once (it answers "ok") on a worker whose watchdog warns past
    0.3 s; the warnings about its event loop."""
    monkeypatch.setattr(watchdog, "BLOCKED_AFTER", 0.3)
    task_queue = f"dog-{uuid.uuid4().hex[:8]}"
    client = temporal_env.client
    with caplog.at_level(logging.WARNING, logger="golem.worker"):
        async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            result = await DurableAgent(client, agent, task_queue=task_queue).run("go")
    assert result.output == "ok"
    return [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()]


async def test_a_loop_that_keeps_answering_gets_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="golem.worker"):
        async with watching_loop(blocked_after=0.2) as dog:
            for _ in range(20):
                await asyncio.sleep(0.02)  # busy, but never holding the loop
    assert dog.warned == set() and caplog.records == []
