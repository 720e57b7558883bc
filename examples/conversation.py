"""Interactive chat loop: each turn continues the conversation; runs see the newest 20 messages.

    OPENAI_API_KEY=sk-... python examples/conversation.py
    ANTHROPIC_API_KEY=... python examples/conversation.py
    GEMINI_API_KEY=...    python examples/conversation.py     (or GOOGLE_API_KEY)

With no key set it says so and chats with an offline echo model instead.
Type an empty line or press Ctrl-D to quit.
"""

from __future__ import annotations

import asyncio
import os

from golem import Agent, Message, trim_history
from golem.models import FunctionModel, Model, ToolDefinition, infer_model

PROVIDERS = [
    ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-haiku-4-5"),
    ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
]


def echo(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    """The offline stand-in: repeat the last prompt and say how much history it saw."""
    prompt = next(m.content for m in reversed(messages) if m.role == "user")
    return Message.assistant(f"(echo, {len(messages)} messages in view) {prompt}")


def choose_model() -> Model:
    for variable, spec in PROVIDERS:
        if os.environ.get(variable):
            print(f"Using {spec} ({variable} is set).")
            return infer_model(spec)
    print(
        "No provider key is set (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY or "
        "GOOGLE_API_KEY): falling back to an offline echo model."
    )
    return FunctionModel(echo, model_name="echo")


async def main() -> None:
    agent = Agent(
        choose_model(),
        name="chat",
        instructions="You are a concise, friendly assistant.",
        history_processor=trim_history(20),
    )
    history: list[Message] = []
    while True:
        try:
            prompt = input("you> ").strip()
        except EOFError:
            break
        if not prompt:
            break
        result = await agent.run(prompt, history=history)
        history = result.messages
        print(f"bot> {result.output}")


if __name__ == "__main__":
    asyncio.run(main())
