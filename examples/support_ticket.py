"""Agents inside your own workflow: a support ticket that a triage agent reads, a person
reviews, and a reply agent answers.

    .venv/bin/python examples/support_ticket.py

``TicketWorkflow`` is ordinary Temporal code: it runs the triage agent as a child run
(its own page in the UI, linked to the ticket), waits for a person's ``review`` signal,
then runs the reply agent inline (its model call lands in the ticket's own history).
Offline: both agents answer with small deterministic models.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem import Agent, Message
    from golem.models import FunctionModel
    from golem.workflows import run_agent


def _triage(messages: list[Message], tools: Any) -> Message:
    text = messages[-1].content.lower()
    return Message.assistant("billing" if "invoice" in text or "charge" in text else "general")


def _reply(messages: list[Message], tools: Any) -> Message:
    note = messages[-1].content
    return Message.assistant(f"Thanks for writing in. {note}")


triage_agent: Agent[None, str] = Agent(
    FunctionModel(_triage), name="triage", instructions="Answer with one word: the queue."
)
reply_agent: Agent[None, str] = Agent(
    FunctionModel(_reply), name="reply", instructions="Write a short, kind reply."
)


@dataclass
class Ticket:
    text: str


@dataclass
class TicketOutcome:
    queue: str
    reply: str
    triage_run_id: str
    reply_run_id: str


@workflow.defn(name="TicketWorkflow")
class TicketWorkflow:
    def __init__(self) -> None:
        self._note: str | None = None

    @workflow.run
    async def run(self, ticket: Ticket) -> TicketOutcome:
        triage = await run_agent("triage", ticket.text)  # a child AgentRunWorkflow
        await workflow.wait_condition(lambda: self._note is not None)  # a person reviews
        reply = await run_agent(
            "reply",
            f"Queue {triage.output}. {self._note}",
            history=triage.messages,
            inline=True,  # the reply's model call runs in this workflow's history
        )
        return TicketOutcome(triage.output, reply.output, triage.run_id, reply.run_id)

    @workflow.signal
    def review(self, note: str) -> None:
        self._note = note

    @workflow.query
    def waiting_for_review(self) -> bool:
        return self._note is None


async def main() -> None:
    from temporalio.worker import Worker

    from examples.offline import quiet_dev_server
    from golem.worker import GolemPlugin

    async with quiet_dev_server() as env:  # the server's banner and warnings kept off
        client = env.client
        plugin = GolemPlugin(triage_agent, reply_agent)
        async with Worker(
            client, task_queue="tickets", workflows=[TicketWorkflow], plugins=[plugin]
        ):
            handle = await client.start_workflow(
                TicketWorkflow.run,
                Ticket("I was charged twice on my last invoice."),
                id=f"ticket-{uuid.uuid4().hex[:8]}",
                task_queue="tickets",
            )
            print(f"ticket {handle.id} started; the triage agent runs as a child workflow")
            while not await handle.query(TicketWorkflow.waiting_for_review):
                await asyncio.sleep(0.1)
            print("triage done; a person reviews and signals")
            await handle.signal(TicketWorkflow.review, "A refund of the duplicate is on its way.")
            outcome = await handle.result()
            print(f"queue: {outcome.queue}")
            print(f"reply: {outcome.reply}")
            print(f"triage run: {outcome.triage_run_id} (a child workflow)")
            print(f"reply run:  {outcome.reply_run_id} (inline, in the ticket's history)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples.offline, as a script
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
