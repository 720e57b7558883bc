"""What a new user meets first in the real Temporal UI (headless Chromium), issue 30 items
17-20: a readable workflow list, a failed run's one-line message, a waiting run that says
what waits and how to answer it, and a summary and details on every golem workflow."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import pytest
from temporalio.worker import Worker
from uicheck import Page, TemporalUI, run_page, snap

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent, DurableConversation
from golem.client.conversations import start_conversation
from golem.models import FunctionModel
from golem.results import RunError
from golem.wire import ConversationInput, lineage
from golem.worker import GolemPlugin
from golem.workflows.conversation import ConversationWorkflow


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
    for trace in ("stackTrace", "_workflow_instance.py", 'File \\"', "site-packages"):
        assert trace not in result, (trace, result)


async def test_the_workflow_list_shows_each_runs_agent_and_prompt(temporal_ui: TemporalUI) -> None:
    async with desk(temporal_ui) as durable:
        done = await durable.run("Where is order 42?")
        conversation = await durable.conversation()
        turn = await conversation.send("Where is order 7?")
        query = f'GolemConversationId IN ("{done.conversation_id}", "{conversation.id}")'
        url = f"{temporal_ui.url}/namespaces/default/workflows?query={quote(query)}"
        seen = await snap(
            "workflow_list_summaries",
            [Page("list", url, wait=[done.run_id, turn.run_id, conversation.id])],
            columns=True,
        )
    page = seen["list"]
    assert not page.missing, page.missing
    # The GolemSummary column: a standalone run, a conversation and its turn (a child run).
    for summary in ("desk: Where is order 42?", "desk: Where is order 7?", "desk: conversation"):
        assert summary in page.text, page.text


async def test_a_waiting_run_says_what_waits_and_how_to_answer_it_first(
    temporal_ui: TemporalUI,
) -> None:
    async with desk(temporal_ui) as durable:
        waiting = await durable.start("refund order 42")
        assert (await waiting.result()).paused
        answer = f"waiting for approval: refund (c1) · answer: golem approve {waiting.run_id} c1"
        query = quote(f'WorkflowId = "{waiting.run_id}"')
        seen = await snap(
            "waiting_run_first",
            [
                Page("run", run_page(temporal_ui.url, waiting.run_id), wait=[answer]),
                Page(
                    "list",
                    f"{temporal_ui.url}/namespaces/default/workflows?query={query}",
                    wait=[f"{answer} · desk: refund order 42"],
                ),
            ],
            columns=True,
        )
        approved = await waiting.approve({"c1": True})
    assert not seen["run"].missing, seen["run"].text  # in the timeline, above the fold
    assert not seen["list"].missing, seen["list"].text
    assert approved.output == "Order 42: refunded."
    listed = await temporal_ui.client.get_workflow_handle(waiting.run_id).describe()
    assert listed.typed_search_attributes.get(lineage.SUMMARY) == "desk: refund order 42"


async def test_every_golem_workflow_has_a_summary_and_details(temporal_ui: TemporalUI) -> None:
    def ask_ledger(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":  # the ledger answered this turn's question
            return Message.assistant(messages[-1].content)
        return Message.assistant("", [ToolCall(id="d1", name="ledger", args='{"prompt": "42?"}')])

    ledger: Agent[Any, Any] = Agent(
        FunctionModel(lambda m, t: Message.assistant("paid"), model_name="desk"), name="ledger"
    )
    front: Agent[Any, Any] = Agent(
        FunctionModel(ask_ledger, model_name="desk"), name="front", delegates=[ledger]
    )
    task_queue = f"ui-{uuid.uuid4().hex[:8]}"
    client = temporal_ui.client
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(front)]):
        durable = DurableAgent(client, front, task_queue=task_queue)
        handle = await client.start_workflow(  # continues as new after every turn
            ConversationWorkflow.run,
            ConversationInput(agent=front.name, turns_per_run=1),
            id=f"conv-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        conversation = DurableConversation(durable, handle)
        await conversation.send("Was order 42 paid?")
        turn = await conversation.send("And order 7?")
        [child] = turn.sub_runs
        ui = temporal_ui.url
        seen = await snap(
            "summaries_and_details",
            [
                Page(
                    "continued",
                    run_page(ui, conversation.id),
                    wait=["RUNNING"],
                    clicks=[("User Metadata", ["front: conversation (continued", "turns 2"])],
                ),
                Page(
                    "turn",
                    run_page(ui, turn.run_id),
                    wait=["COMPLETED"],
                    clicks=[("User Metadata", [f"golem run id {turn.run_id}"])],
                ),
                Page(
                    "delegate",
                    run_page(ui, child),
                    wait=["COMPLETED"],
                    clicks=[("User Metadata", ["ledger: 42?", f"golem run id {child}"])],
                ),
            ],
        )
    for name in ("continued_1", "turn_1", "delegate_1"):
        assert not seen[name].missing, (name, seen[name].text)
    assert "front: And order 7?" in seen["turn_1"].text
    assert f"conversation {conversation.id} · agent front" in seen["turn_1"].text


async def test_a_conversation_continued_as_new_keeps_its_summary_in_the_list_and_its_page(
    temporal_ui: TemporalUI,
) -> None:
    """Continue-as-new carries no static summary (the Python SDK's ``continue_as_new`` takes
    none), so a continued run shows its summary by what does cross: the ``GolemSummary``
    search attribute (the list's column, the page's Search Attributes), its memo, and
    current details set from the run's start (User Metadata, while a worker answers)."""
    front: Agent[Any, Any] = Agent(
        FunctionModel(lambda m, t: Message.assistant("noted"), model_name="desk"), name="front"
    )
    task_queue = f"ui-{uuid.uuid4().hex[:8]}"
    client = temporal_ui.client
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(front)]):
        durable = DurableAgent(client, front, task_queue=task_queue)
        seed = ConversationInput(agent=front.name, turns_per_run=1)  # continues after each turn
        conversation = await start_conversation(durable, f"conv-{uuid.uuid4()}", seed)
        await conversation.send("Was order 42 paid?")
        await conversation.send("And order 7?")
        runs = [w async for w in client.list_workflows(f'WorkflowId = "{conversation.id}"')]
        query = quote(f'WorkflowId = "{conversation.id}"')
        ui = temporal_ui.url
        seen = await snap(
            "continued_conversation",
            [
                Page(
                    "list",
                    f"{ui}/namespaces/default/workflows?query={query}",
                    wait=["RUNNING", "CONTINUED AS NEW"],
                ),
                Page(
                    "page",
                    run_page(ui, conversation.id),
                    wait=["RUNNING"],
                    clicks=[
                        ("User Metadata", ["front: conversation (continued as new)", "turns 2"]),
                        ("Search Attributes", ["GolemSummary"]),
                        ("Memo", ["golemSummary"]),
                    ],
                ),
            ],
            columns=True,
        )
    assert len(runs) == 3  # the first run and the two it continued as
    listed = seen["list"].text
    assert not seen["list"].missing, listed
    rows = [line for line in listed.splitlines() if "\tConversationWorkflow\t" in line]
    assert len(rows) == 3 and all("front: conversation" in row for row in rows), rows
    for name in ("page_1", "page_2", "page_3"):
        assert not seen[name].missing, (name, seen[name].text)
    assert "No summary available" in seen["page_1"].text  # what no SDK call can fill
    assert "front: conversation" in seen["page_2"].text.split("GolemSummary", 1)[1]
    # The memo crosses continue-as-new too, and needs no worker (nor the attribute).
    memo = seen["page_3"].text.split('"golemSummary"', 1)[1]
    assert memo.lstrip(": ").startswith('"front: conversation (continued as new)"'), memo
