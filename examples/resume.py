"""Resume a run that failed mid-batch, in the same conversation (offline).

    .venv/bin/python examples/resume.py

The model asks for two tools at once; one of them crashes. The RunError carries the
partial evidence: the assistant turn that requested the batch, the result that finished,
and the crashed call answered with a failed result naming the error (a call that never
started would read INTERRUPTED_RESULT, one whose outcome was lost OUTCOME_UNKNOWN_RESULT).
Every call is answered, so resuming needs no repair; the model re-asks for what failed
and the run completes under the same conversation id.
"""

from __future__ import annotations

import asyncio

from golem import Agent, Message, RunError, ToolCall, normalize_history
from golem.models import FunctionModel, ToolDefinition

flaky_backend_up = False


def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    """A stand-in model: ask for both cities, re-ask for failed ones, then answer."""
    last = messages[-1]
    if last.role == "user":
        cities = ["Paris", "Oslo"]
        if last.content == "continue":  # re-request the calls that did not succeed
            cities = [c for c in cities if _result_for(messages, c).failed]
        calls = [
            ToolCall(
                id=f"call_{city.lower()}_{len(messages)}",
                name="weather",
                args=f'{{"city": "{city}"}}',
            )
            for city in cities
        ]
        return Message.assistant(tool_calls=calls)
    return Message.assistant(
        "Now: " + "; ".join(_result_for(messages, c).content for c in ("Paris", "Oslo"))
    )


def _result_for(messages: list[Message], city: str) -> Message:
    """The newest result of the weather call for ``city``."""
    calls = {c.id: c for m in messages for c in m.tool_calls}
    for message in reversed(messages):
        if message.role == "tool" and city in calls[message.tool_call_id].args:
            return message
    raise LookupError(f"no result for {city}")


agent: Agent[None, str] = Agent(FunctionModel(answer), instructions="Answer with the tools.")


@agent.tool
def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    if city == "Oslo" and not flaky_backend_up:
        raise ConnectionError("weather backend unreachable")
    return f"{city}: 12°C, clear"


def show(messages: list[Message]) -> None:
    for message in messages:
        text = message.content or ", ".join(f"{c.name}({c.args})" for c in message.tool_calls)
        stamp = message.run_id[-8:] if message.run_id else "(none)"
        print(f"    {message.role:<9} run={stamp:<8}  {text}")


async def main() -> None:
    global flaky_backend_up
    try:
        await agent.run("What's the weather in Paris and Oslo?")
    except RunError as err:
        partial = err.partial
        assert partial is not None
        print(f"run failed at stage {err.stage!r}: {err.detail}")
        print(
            f"  requests={partial.requests} tool_calls={partial.tool_calls} "
            f"input_tokens={partial.usage.input_tokens}"
        )
        print(f"  run {partial.run_id}, conversation {partial.conversation_id}")
        print("  evidence (every call of the batch answered):")
        show(partial.messages)
        print("  repair needed to resume:", normalize_history(partial.messages)[1].changed)

        flaky_backend_up = True
        result = await agent.run("continue", history=partial.messages)
        print()
        print(f"resumed as run {result.run_id}, conversation {result.conversation_id}")
        print("  same conversation:", result.conversation_id == partial.conversation_id)
        print("  conversation:")
        show(result.messages)
        print()
        print("final answer:", result.output)


if __name__ == "__main__":
    asyncio.run(main())
