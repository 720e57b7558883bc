"""An agent whose refunds wait for a person: ``golem run`` asks, ``golem approve`` answers.

    .venv/bin/golem worker --agent examples.refunds:agent --task-queue golem
    .venv/bin/golem run --agent refunds "Refund order 42"      # asks: approve refund(...)? [y/N]
    .venv/bin/golem run --agent refunds "Refund order 7" </dev/null   # no terminal: exits 3
    .venv/bin/golem approve RUN_ID                              # or --deny, from anywhere

Offline: a small deterministic model asks to refund the order the prompt names, then says
what the tool answered (or that the refund was denied).
"""

from __future__ import annotations

import json
import re
from typing import Any

from golem import Message, ToolCall
from golem.agent import Agent
from golem.models import FunctionModel


def _desk(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "user":
        order = int((re.findall(r"\d+", last.content) or ["0"])[0])
        call = ToolCall(id=f"refund-{order}", name="refund", args=json.dumps({"order": order}))
        return Message.assistant("", [call])
    if last.failed:
        return Message.assistant(f"No refund: {last.content}.")
    return Message.assistant(f"Done: {last.content}.")


agent = Agent(FunctionModel(_desk, model_name="offline-refunds"), name="refunds")


@agent.tool(requires_approval=True)
def refund(order: int) -> str:
    """Refund an order in full (moves money: a person approves each one).

    Args:
        order: The order number.
    """
    return f"order {order} refunded"
