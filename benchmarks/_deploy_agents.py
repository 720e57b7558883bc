"""The agent ``support`` in two versions, as benchmarks/deploy_rollout.py's worker processes
serve it: ``golem worker --agent _deploy_agents:v1 --deployment D --build-id v1`` (and v2).

v1: instructions "support v1"; tools ``order_status`` and ``legacy_refund`` (needs approval).
v2: instructions "support v2"; ``legacy_refund`` removed, ``track_parcel`` added.

The model is offline and says what governed it: every answer is
``<instructions> | <prompt> [(<tool>: <result>)] | tools <names>``; a prompt
``call NAME`` asks for tool NAME.
"""

from __future__ import annotations

from golem import Agent, Message, ToolCall
from golem.models import FunctionModel
from golem.models.base import ToolDefinition


def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    last = messages[-1]
    if last.role == "user" and last.content.startswith("call "):
        name = last.content.split()[1]
        return Message.assistant("", [ToolCall(id=f"{name}-{len(messages)}", name=name, args="{}")])
    system = next((m.content for m in messages if m.role == "system"), "")
    prompt = next(m.content for m in reversed(messages) if m.role == "user")
    said = f" ({last.tool_name}: {last.content})" if last.role == "tool" else ""
    names = ",".join(sorted(t.name for t in tools))
    return Message.assistant(f"{system} | {prompt}{said} | tools {names}")


def order_status() -> str:
    """Where the customer's order is."""
    return "shipped"


v1 = Agent(
    FunctionModel(answer, model_name="support-model"), name="support", instructions="support v1"
)
v1.tool(order_status)


@v1.tool(requires_approval=True)
def legacy_refund() -> str:
    """Refund the customer's order (the old way)."""
    return "refunded by v1"


v2 = Agent(
    FunctionModel(answer, model_name="support-model"), name="support", instructions="support v2"
)
v2.tool(order_status)


@v2.tool
def track_parcel() -> str:
    """Where the customer's parcel is."""
    return "in Oslo"
