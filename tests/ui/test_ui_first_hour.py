"""What a new user meets first in the real Temporal UI (headless Chromium), issue 30 items
17-20: a readable workflow list, a failed run's one-line message, a waiting run that says
what waits and how to answer it, and a summary and details on every golem workflow."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.worker import Worker
from uicheck import Page, TemporalUI, run_page, snap

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.results import RunError
from golem.worker import GolemPlugin


def _desk(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "user":
        name = "refund" if "refund" in last.content else "order_status"
        if "break" in last.content:
            name = "explode"
        return Message.assistant("", [ToolCall(id="c1", name=name, args='{"order": 42}')])
    return Message.assistant(f"Order 42: {last.content}.")


@asynccontextmanager
async def desk(ui: TemporalUI) -> AsyncIterator[DurableAgent[Any]]:
    """A worker serving an agent with a plain tool, a failing one and one that needs
    approval; its DurableAgent."""
    agent: Agent[Any, Any] = Agent(FunctionModel(_desk, model_name="desk"), name="desk")

    @agent.tool
    def order_status(order: int) -> str:
        """Where an order is."""
        return "shipped"

    @agent.tool(retry_attempts=1)
    def explode(order: int) -> str:
        """Always fails."""
        raise ValueError("boom")

    @agent.tool(requires_approval=True)
    def refund(order: int) -> str:
        """Refund an order (a person approves first)."""
        return "refunded"

    task_queue = f"ui-{uuid.uuid4().hex[:8]}"
    async with Worker(ui.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        yield DurableAgent(ui.client, agent, task_queue=task_queue)


async def test_a_failed_runs_result_is_its_one_line_message_without_a_stack_trace(
    temporal_ui: TemporalUI,
) -> None:
    async with desk(temporal_ui) as durable:
        failed = await durable.start("break order 42")
        with pytest.raises(RunError):
            await failed.result()
        seen = await snap(
            "failed_run_result",
            [Page("failed", run_page(temporal_ui.url, failed.run_id), wait=["FAILED"])],
        )
    page = seen["failed"]
    assert not page.missing, page.missing
    result = page.text.split("Result", 1)[1].split("Timeline", 1)[0]
    message = "run failed at stage 'tool': tool 'explode' (call c1) failed: ValueError: boom"
    assert f'"message": "{message}"' in result, result
    for trace in ("stackTrace", "_workflow_instance.py", "File \\\"", "site-packages"):
        assert trace not in result, (trace, result)
