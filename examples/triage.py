"""Agents calling agents: a triage agent asks a ledger agent, then hands the customer over
(offline, in process and durably).

    .venv/bin/python examples/triage.py

``ledger`` is triage's delegate: a tool named after it, whose call is a child run that sees
only the question it is asked. ``billing`` and ``shipping`` are triage's handoffs: calling
``transfer_to_billing`` ends triage's turn and billing answers it, on the conversation so
far, under its own instructions. Billing's refund waits for a person's approval. Stand-in
models follow a script, so it runs without a provider key.

In process the caller routes the next turn (``golem.handoff_target``); durably a
conversation does: it starts billing's run for the same turn, and billing serves the turns
after it. In the Temporal UI (``golem dev``), each run's Relationships tab shows the tree.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from golem import Agent, Message, Result, ToolCall, handoff_target
from golem.client import DurableAgent
from golem.models import FunctionModel, ToolDefinition
from golem.worker import GolemPlugin

if __package__ in (None, ""):  # run as a script: the examples package's parent is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples.offline import quiet_dev_server, run_then_exit


def last(messages: list[Message], role: str) -> Message:
    return next(m for m in reversed(messages) if m.role == role)


def ledger_model(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    """Sees only what it was asked (one user message), never triage's conversation."""
    return Message.assistant(f"(sees {len(messages)} message) order 42: charged 2 x 19.90")


def triage_model(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    """Asks the ledger first, then hands over to the desk the customer needs."""
    if messages[-1].role == "user":
        return Message.assistant(
            tool_calls=[ToolCall(id="ask-1", name="ledger", args='{"prompt": "order 42?"}')]
        )
    desk = "billing" if "charged" in last(messages, "user").content else "shipping"
    call = ToolCall(id="hand-1", name=f"transfer_to_{desk}", args='{"reason": "ledger says so"}')
    return Message.assistant(tool_calls=[call])


def billing_model(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    """Refunds when the conversation was just handed over; answers questions after that."""
    if messages[-1].role == "tool" and messages[-1].tool_name.startswith("transfer_to_"):
        args = '{"order": "42", "amount": 19.9}'
        return Message.assistant(tool_calls=[ToolCall(id="refund-1", name="refund", args=args)])
    if messages[-1].role == "tool":
        return Message.assistant(f"Done: {messages[-1].content}.")
    return Message.assistant("A refund reaches your card in 3 to 5 days.")


ledger = Agent(
    FunctionModel(ledger_model, model_name="stand-in"),
    name="ledger",
    description="Looks orders up in the ledger.",
)
billing = Agent(
    FunctionModel(billing_model, model_name="stand-in"),
    name="billing",
    instructions="You handle refunds.",
    description="Refunds and invoices.",
)
shipping = Agent(
    FunctionModel(
        lambda m, t: Message.assistant("Order 42 ships tomorrow."), model_name="stand-in"
    ),
    name="shipping",
    description="Deliveries.",
)
triage = Agent(
    FunctionModel(triage_model, model_name="stand-in"),
    name="triage",
    instructions="Find out what the customer needs, then hand over.",
    delegates=[ledger],
    handoffs=[billing, shipping],
)
AGENTS = {agent.name: agent for agent in (triage, billing, shipping)}


@billing.tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order (a person approves first)."""
    return f"refunded {amount:.2f} on order {order}"


def tree(result: Result[Any]) -> None:
    own, whole = result.usage.total_tokens, result.total_usage.total_tokens
    print(f"  child runs: {len(result.sub_runs)}; tokens: the run's own {own}, its tree {whole}")


def show(result: Result[Any]) -> None:
    print(f"  {result.agent} answered: {result.output!r}")
    for m in result.messages:
        text = m.content or ", ".join(f"{c.name}({c.args})" for c in m.tool_calls)
        print(f"    {m.role:<9} [{m.run_id[-4:]}] {text}")


async def in_process() -> None:
    print("In process:")
    paused = await triage.run("I was charged twice for order 42")
    [call] = paused.pending_approvals
    desk = handoff_target(paused) or triage.name  # no conversation object: we route
    print(f"  triage handed over to {desk}, whose {call.name} waits for approval")
    tree(paused)  # ledger (a delegate) and billing (the handoff)
    show(await AGENTS[desk].run(history=paused.messages, approvals={call.id: True}))


async def durably() -> None:
    print("\nDurably, as a conversation (GolemPlugin(triage) serves all four agents):")
    async with quiet_dev_server() as env:
        task_queue = f"triage-{uuid.uuid4().hex[:6]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(triage)]):
            conv = await DurableAgent(env.client, triage, task_queue=task_queue).conversation()
            paused = await conv.send("I was charged twice for order 42")
            [call] = paused.pending_approvals
            print(
                f"  run {paused.pending_runs[call.id][-4:]} ({paused.agent}) waits for {call.name}"
            )
            answered = await conv.approve({call.id: True})
            tree(answered)
            show(answered)
            later = await conv.send("Thanks! When will I see it?")
            print(f"  the next turn went to {later.agent}: {later.output!r}")
            print(f"  serving now: {await conv.current_agent()}; runs: {len(await conv.runs())}")
            await conv.close()


if __name__ == "__main__":
    run_then_exit(in_process, durably)
