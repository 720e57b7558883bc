"""The tree of runs in the real Temporal UI (headless Chromium): a run that delegated shows
its child runs under Relationships, and a child shows its parent."""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.worker import Worker
from uicheck import Page, TemporalUI, run_page, snap

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.worker import GolemPlugin


def asks(*delegates: str) -> FunctionModel:
    """Asks each delegate once, in one batch; then answers with what they said."""

    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return Message.assistant(" | ".join(m.content for m in results))
        calls = [
            ToolCall(id=f"c{i}", name=d, args=json.dumps({"prompt": f"ask {d}"}))
            for i, d in enumerate(delegates)
        ]
        return Message.assistant("", calls)

    return FunctionModel(answer, model_name="desk")


async def test_a_delegating_run_shows_its_child_runs_under_relationships(
    temporal_ui: TemporalUI,
) -> None:
    def reply(messages: list[Message], tools: Any) -> Message:
        return Message.assistant("done")

    ledger = Agent(FunctionModel(reply, model_name="desk"), name="ledger")
    billing = Agent(asks("ledger"), name="billing", delegates=[ledger])
    shipping = Agent(FunctionModel(reply, model_name="desk"), name="shipping")
    triage = Agent(asks("billing", "shipping"), name="triage", delegates=[billing, shipping])
    task_queue = f"ui-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_ui.client, task_queue=task_queue, plugins=[GolemPlugin(triage)]):
        result = await DurableAgent(temporal_ui.client, triage, task_queue=task_queue).run(
            "I was charged twice"
        )
        billing_run, shipping_run = result.sub_runs
        query = f"GolemParentRunId = '{billing_run}'"
        [ledger_run] = [w.id async for w in temporal_ui.client.list_workflows(query)]
        seen = await snap(
            "delegation_relationships",
            [
                Page(
                    "top",
                    run_page(temporal_ui.url, result.run_id),
                    wait=["COMPLETED"],
                    clicks=[("Relationships", [billing_run, shipping_run])],
                ),
                Page(
                    "billing",
                    run_page(temporal_ui.url, billing_run),
                    wait=["COMPLETED"],
                    # The whole tree, from the top: its parent, then (expanded) its child.
                    clicks=[
                        ("Relationships", [result.run_id, "Child Count"]),
                        ("Expand All", [ledger_run]),
                    ],
                ),
            ],
        )
    top, relations = seen["top"], seen["top_1"]
    assert not top.missing and not relations.missing, (top.missing, relations.missing)
    tree, expanded = seen["billing_1"], seen["billing_2"]
    assert not tree.missing and not expanded.missing, (tree.missing, expanded.missing)
    assert "billing: ask billing" in top.text + relations.text  # the children's summaries
