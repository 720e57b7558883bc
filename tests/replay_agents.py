"""Representative agents whose recorded workflow histories live in tests/histories/.

Regenerate with ``python tests/record_histories.py`` after an intentional change to the
workflow; the replay test then guards every later change against nondeterminism.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from golem import Message, ToolCall
from golem.agent import Agent
from golem.history.processors import trim_history
from golem.models import FunctionModel
from golem.tools import Canceled, RunContext, ToolFailed


def _script(messages: list[Message], tools: Any) -> Message:
    results = [m for m in messages if m.role == "tool"]
    if len(results) == 0:
        return Message.assistant(
            "",
            [
                ToolCall(id="w1", name="weather", args='{"city": "Paris"}'),
                ToolCall(id="w2", name="weather", args='{"city": "Oslo"}'),
            ],
        )
    if len(results) == 2:
        return Message.assistant("", [ToolCall(id="b1", name="flaky", args="{}")])
    if len(results) == 3:
        return Message.assistant("", [ToolCall(id="x1", name="nope", args="{}")])
    return Message.assistant("Paris is sunny, Oslo is cold.")


class Deps(BaseModel):
    user: str


def _instructions(ctx: RunContext[Deps]) -> str:
    return f"The user is {ctx.deps.user}."


tools_agent = Agent(
    FunctionModel(_script, model_name="replay-model"),
    name="replay_tools",
    instructions="Answer briefly.",
    instructions_fn=_instructions,
    deps_type=Deps,
    history_processor=trim_history(20),
)


@tools_agent.tool
def weather(city: str) -> str:
    """Weather for a city."""
    return "sunny" if city == "Paris" else "cold"


@tools_agent.tool
def flaky() -> str:
    """Always fails definitively."""
    raise ToolFailed("service unavailable")


def _stopper(messages: list[Message], tools: Any) -> Message:
    return Message.assistant("", [ToolCall(id="s1", name="stop", args="{}")])


stop_agent = Agent(FunctionModel(_stopper, model_name="replay-model"), name="replay_stop")


@stop_agent.tool
def stop() -> str:
    """Stop the run."""
    raise Canceled("the user hung up")


AGENTS = [tools_agent, stop_agent]
