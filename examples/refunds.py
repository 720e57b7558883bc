"""An agent whose large refunds wait for a person, who may approve, edit or deny them.

    .venv/bin/golem worker --agent examples.refunds:agent --task-queue golem
    .venv/bin/golem run --agent refunds "Refund order 42"       # 150 > 100: asks [y/N]
    .venv/bin/golem run --agent refunds "Refund order 42 for 30" # 30: runs without asking
    .venv/bin/golem run --agent refunds "Refund order 7" </dev/null   # no terminal: exits 3
    .venv/bin/golem approve RUN_ID refund-7 --args '{"order": 7, "amount": 100}' --by alice
    .venv/bin/golem approve RUN_ID refund-7 --deny --reason "over the limit; offer store credit"
    .venv/bin/python examples/refunds.py       # the same three answers, in process and durably

Offline: a small deterministic model asks to refund the order the prompt names (for the
amount it names, else 150), then says what the tool answered (or why it was denied).
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from golem import Approve, Deny, Message, RunContext, ToolCall
from golem.agent import Agent
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.worker import GolemPlugin

if __package__ in (None, ""):  # run as a script: the examples package's parent is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples.offline import quiet_dev_server, run_then_exit

#: Refunds up to this much run without asking.
LIMIT = 100


def _desk(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "user":
        numbers = [int(n) for n in re.findall(r"\d+", last.content)]
        order = numbers[0] if numbers else 0
        amount = numbers[1] if len(numbers) > 1 else 150
        args = json.dumps({"order": order, "amount": amount})
        return Message.assistant("", [ToolCall(id=f"refund-{order}", name="refund", args=args)])
    if last.failed:
        return Message.assistant(f"No refund: {last.content}.")
    return Message.assistant(f"Done: {last.content.splitlines()[-1]}.")


agent = Agent(FunctionModel(_desk, model_name="offline-refunds"), name="refunds")


def over_the_limit(ctx: RunContext[Any], args: dict[str, Any]) -> bool:
    """Only refunds over ``LIMIT`` wait for a person (a pure function of the arguments)."""
    return bool(args["amount"] > LIMIT)


@agent.tool(requires_approval=over_the_limit)
def refund(order: int, amount: int) -> str:
    """Refund part of an order (moves money: a person approves the large ones).

    Args:
        order: The order number.
        amount: How much to refund.
    """
    return f"order {order} refunded {amount}"


async def in_process() -> None:
    print("In process:")
    small = await agent.run("Refund order 41 for 30")
    print(f"  a small refund runs without asking: {small.output}")
    paused = await agent.run("Refund order 42 for 500")
    [call] = paused.pending_approvals
    print(f"  {call.name}({call.args}) waits for a person")
    edited = await agent.run(
        history=paused.messages, approvals={call.id: Approve(args={"order": 42, "amount": 100})}
    )
    print(f"  approved with other arguments: {edited.output}")
    denied = await agent.run(
        history=paused.messages,
        approvals={call.id: Deny(reason="over the limit; offer store credit")},
    )
    print(f"  denied with a reason: {denied.output}")


async def durably() -> None:
    print("\nDurably (the run waits in its workflow for the decision):")
    async with quiet_dev_server() as env:
        task_queue = f"refunds-{uuid.uuid4().hex[:6]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(env.client, agent, task_queue=task_queue)
            run = await durable.start("Refund order 43 for 700")
            [call] = (await run.result()).pending_approvals
            done = await run.approve(
                {call.id: Approve(args={"order": 43, "amount": 90})}, by="alice"
            )
            decision = done.messages[-2].decision
            assert decision is not None
            print(f"  {done.output} (approved by {decision.by}, ran with {decision.args})")
            run = await durable.start("Refund order 44 for 900")
            [call] = (await run.result()).pending_approvals
            done = await run.approve({call.id: Deny(reason="ask the customer first")}, by="bob")
            print(f"  {done.output}")


if __name__ == "__main__":
    run_then_exit(in_process, durably)
