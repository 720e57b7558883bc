"""How a closed run ended, where a user looks in the real Temporal UI (headless Chromium):
its Current Details lead with the outcome, and its Result panel shows the output, the usage
and where the conversation is, not golem's wire internals (issue 19 items 6 and 7).

Current Details come from a query, so the worker stays up while the browser looks.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.worker import Worker
from uicheck import Page, Seen, TemporalUI, run_page, snap

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


def metadata_page(name: str, url: str, first: str) -> Page:
    """The run's page (its Result panel), then its User Metadata tab, once its Current
    Details show ``first`` and its static details their agent (``first`` alone may show
    elsewhere on the page first: a waiting run's did, under load in CI)."""
    shown = [first, "· agent desk"]
    return Page(name, url, wait=["golem.model_request"], clicks=[("User Metadata", shown)])


def current_details(seen: Seen) -> list[str]:
    """The Current Details' lines, as the UI renders them (after the static details)."""
    after = seen.text.rsplit("· agent desk", 1)[1]
    return [line.strip() for line in after.splitlines() if line.strip()]


async def test_a_runs_details_lead_with_how_it_ended_or_what_it_waits_for(
    temporal_ui: TemporalUI,
) -> None:
    async with desk(temporal_ui) as durable:
        done = await durable.run("Where is order 42?")
        failed = await durable.start("break order 42")
        with pytest.raises(RunError):
            await failed.result()
        waiting = await (await durable.start("refund order 42")).result()
        assert waiting.paused
        dropped = await durable.start("refund order 7")
        assert (await dropped.result()).paused
        await dropped.cancel()
        with pytest.raises(RunError, match="cancel"):
            await dropped.result(final=True)
        ui = temporal_ui.url
        seen = await snap(
            "run_details_outcome",
            [
                metadata_page("completed", run_page(ui, done.run_id), "tools in flight"),
                metadata_page("failed", run_page(ui, failed.run_id), "failed at tool"),
                metadata_page("waiting", run_page(ui, waiting.run_id), "waiting for approval"),
                metadata_page("canceled", run_page(ui, dropped.run_id), "canceled"),
            ],
        )
    for name in ("completed_1", "failed_1", "waiting_1", "canceled_1"):
        assert not seen[name].missing and not seen[name].error, (name, seen[name])
    assert current_details(seen["completed_1"])[:2] == [
        "completed",
        "turn 2 · requests 2 · tool calls 1",
    ]
    # Markdown renders the quotes typographically; the failed call counts: it ran.
    assert current_details(seen["failed_1"])[:2] == [
        "failed at tool: tool \u2018explode\u2019 (call c1) failed: ValueError: boom",
        "turn 1 · requests 1 · tool calls 1",
    ]
    assert current_details(seen["waiting_1"])[:2] == [
        "waiting for approval refund (c1)",
        "turn 1 · requests 1 · tool calls 0",
    ]
    assert current_details(seen["canceled_1"])[0] == "canceled"


async def test_a_completed_runs_result_shows_output_usage_and_where_its_messages_are(
    temporal_ui: TemporalUI,
) -> None:
    async with desk(temporal_ui) as durable:
        done = await durable.run("Where is order 42?")
        seen = await snap(
            "run_result_panel",
            [Page("run", run_page(temporal_ui.url, done.run_id), wait=['"kind": "completed"'])],
        )
    result = seen["run"].text.split("Result", 1)[1]
    assert not seen["run"].missing, seen["run"].missing
    for shown in (
        '"kind": "completed"',
        '"output": "Order 42: shipped."',
        f'"runId": "{done.run_id}"',
        '"usage": {',
        f'"inputTokens": {done.usage.input_tokens}',
        '"toolCalls": 1',
        '"messages": {',
        '"kind": "history"',  # the conversation is in the run's own history
    ):
        assert shown in result, shown
    for internal in ("snapshot", "unstamped", "paged", "logged"):
        assert internal not in result, internal
    # What a reader sees first: the outcome, then the output.
    assert result.index('"kind": "completed"') < result.index('"output"') < result.index('"usage"')
