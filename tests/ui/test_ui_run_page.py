"""A durable run's page in the real Temporal UI (headless Chromium): what a user sees."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio.worker import Worker
from uicheck import Page, TemporalUI, run_page, snap

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.worker import GolemPlugin


def answer(messages: list[Message], tools: Any) -> Message:
    if any(m.role == "tool" for m in messages):
        return Message.assistant("Order 42 has shipped.")
    return Message.assistant("", [ToolCall(id="c1", name="order_status", args='{"order": 42}')])


@asynccontextmanager
async def orders(ui: TemporalUI) -> AsyncIterator[DurableAgent[Any]]:
    """A worker serving an agent that looks an order up, then answers; its DurableAgent."""
    agent: Agent[Any, Any] = Agent(FunctionModel(answer, model_name="desk"), name="orders")

    @agent.tool
    def order_status(order: int) -> str:
        """Where an order is."""
        return "shipped"

    task_queue = f"ui-{uuid.uuid4().hex[:8]}"
    async with Worker(ui.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        yield DurableAgent(ui.client, agent, task_queue=task_queue)


async def test_a_completed_run_page_shows_its_summary_and_labelled_activities(
    temporal_ui: TemporalUI,
) -> None:
    async with orders(temporal_ui) as durable:
        result = await durable.run("Where is order 42?")
        seen = await snap(
            "completed_run_page",
            [
                Page(
                    "run",
                    run_page(temporal_ui.url, result.run_id),
                    wait=["COMPLETED", "golem.tool • tool: order_status"],
                    clicks=[("User Metadata", ["orders: Where is order 42?"])],
                )
            ],
        )
    page, metadata = seen["run"], seen["run_1"]
    assert not page.missing, page.missing
    assert "golem.model_request • model: desk (turn 1)" in page.text
    assert "golem.model_request • model: desk (turn 2)" in page.text
    assert "Order 42 has shipped." in page.text  # the result panel
    assert not metadata.missing, metadata.missing  # the start summary, under User Metadata


async def test_a_streamed_runs_items_read_as_json_in_its_event_history(
    temporal_ui: TemporalUI,
) -> None:
    async with orders(temporal_ui) as durable:
        stream = durable.run_stream("Where is order 42?")
        async for _ in stream:
            pass
        seen = await snap(
            "streamed_run_items",
            [
                Page(
                    "run",
                    run_page(temporal_ui.url, stream.run.run_id),
                    wait=["COMPLETED", "__temporal_workflow_stream_publish"],
                    clicks=[
                        ("Event History", ["Workflow Execution Signaled"]),
                        ("Workflow Execution Signaled", ['"text": "Order 42 has shipped."']),
                    ],
                )
            ],
        )
    signal = seen["run_2"]
    assert not signal.missing, signal.missing
    assert '"kind": "text_delta"' in signal.text  # the item as JSON, not base64 protobuf
    assert '"topic": "golem.events"' in signal.text
