"""A tool that blocks the worker's event loop is named, once, in the worker's log."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import pytest
from agents import ask, call, scripted
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.messages import Message
from golem.worker import GolemPlugin, watchdog
from golem.worker.watchdog import watching_loop


async def test_an_async_tool_that_blocks_the_worker_loop_is_named_in_one_warning(
    temporal_env: WorkflowEnvironment,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "BLOCKED_AFTER", 0.3)
    agent, _ = scripted(
        [ask(call("a", "nap"), call("b", "nap")), ask(call("c", "nap")), Message.assistant("ok")]
    )

    @agent.tool(sequential=True)
    async def nap() -> str:
        """Sleeps the wrong way."""
        time.sleep(1.0)
        return "rested"

    task_queue = f"dog-{uuid.uuid4().hex[:8]}"
    client = temporal_env.client
    with caplog.at_level(logging.WARNING, logger="golem.worker"):
        async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            result = await DurableAgent(client, agent, task_queue=task_queue).run("go")
    assert result.output == "ok"
    warnings = [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()]
    assert len(warnings) == 1, warnings  # three blocking calls, one warning
    assert warnings[0].startswith("tool 'nap' has held this worker's event loop for")
    assert "plain `def` tool" in warnings[0]


async def test_a_loop_that_keeps_answering_gets_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="golem.worker"):
        async with watching_loop(blocked_after=0.2) as dog:
            for _ in range(20):
                await asyncio.sleep(0.02)  # busy, but never holding the loop
    assert dog.warned == set() and caplog.records == []
