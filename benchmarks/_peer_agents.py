"""The agents ``benchmarks/peers.py`` compares: one agent, written for golem and for
pydantic-ai's Temporal integration, plus the bare-activity floor.

Both agents get their turns from the same kind of offline ``FunctionModel``: the prompt
says how many tool turns to take and how big each tool result is (``turns=N bytes=B``),
so one registered agent serves every scenario and the two libraries do the same work.
Kept in its own module because Temporal's sandbox re-imports workflow modules.
"""

from __future__ import annotations

from typing import Any, ClassVar

from _peer_floor import Floor, noop, prompt, result_text, spec
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent as PaiAgent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PaiFunctionModel
    from pydantic_ai.usage import UsageLimits

    from golem import Agent, Message, ToolCall
    from golem.models import FunctionModel
    from golem.usage import UsageLimits as GolemUsageLimits

AGENT_NAME = "peer"
__all__ = ["AGENT_NAME", "Floor", "PydanticAIRun", "golem_agent", "noop", "pai_agent", "prompt"]


# -- golem --------------------------------------------------------------------------------


def _golem_answer(messages: list[Message], tools: Any) -> Message:
    turns, size = spec(next(m.content for m in messages if m.role == "user"))
    done = sum(1 for m in messages if m.role == "tool")
    if done >= turns:
        return Message.assistant(f"done after {done} tools")
    args = f'{{"n": {done}, "size": {size}}}'
    return Message.assistant("", [ToolCall(id=f"c{done}", name="fetch", args=args)])


golem_agent: Agent[None, str] = Agent(
    FunctionModel(_golem_answer),
    name=AGENT_NAME,
    max_iterations=10_000,
    usage_limits=GolemUsageLimits(request_limit=None),  # pydantic-ai's runs get the same
)


@golem_agent.tool
def fetch(n: int, size: int) -> str:
    """Fetch page n."""
    return result_text(n, size)


# -- pydantic-ai --------------------------------------------------------------------------


def _pai_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    first = next(
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    )
    turns, size = spec(first)
    done = sum(
        1
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    )
    if done >= turns:
        return ModelResponse(parts=[TextPart(f"done after {done} tools")])
    args = f'{{"n": {done}, "size": {size}}}'
    return ModelResponse(parts=[ToolCallPart("fetch", args, tool_call_id=f"c{done}")])


pai_agent = PaiAgent(
    PaiFunctionModel(_pai_answer), name=AGENT_NAME, capabilities=[TemporalDurability()]
)


@pai_agent.tool_plain(name="fetch")
def pai_fetch(n: int, size: int) -> str:
    """Fetch page n."""
    return result_text(n, size)


@workflow.defn(name="PeerPydanticAIRun")
class PydanticAIRun(PydanticAIWorkflow):
    """What a pydantic-ai user writes: a workflow whose run is one agent run."""

    __pydantic_ai_agents__: ClassVar[list[Any]] = [pai_agent]

    @workflow.run
    async def run(self, text: str) -> str:
        result = await pai_agent.run(text, usage_limits=UsageLimits(request_limit=None))
        return result.output
