"""Run and conversation identity across chained and forked runs (offline).

    .venv/bin/python examples/run_ids.py

Every run gets a fresh run id. Passing a result's messages back as history keeps the
conversation id; passing ``conversation_id=new_id()`` forks the conversation.
"""

from __future__ import annotations

import asyncio

from golem import Agent, Message, new_id
from golem.models import FunctionModel, ToolDefinition


def answer(messages: list[Message], tools: list[ToolDefinition]) -> Message:
    return Message.assistant(f"you said {messages[-1].content!r}")


async def main() -> None:
    agent: Agent[None, str] = Agent(FunctionModel(answer), instructions="Repeat the user.")

    first = await agent.run("hi")
    continued = await agent.run("and then?", history=first.messages)
    fork = await agent.run("fork this", history=first.messages, conversation_id=new_id())

    print(f"{'run':<10} {'run id':<38} {'conversation id':<38}")
    for label, result in (("first", first), ("continued", continued), ("fork", fork)):
        print(f"{label:<10} {result.run_id:<38} {result.conversation_id:<38}")
    print()
    print("continued keeps the conversation:", continued.conversation_id == first.conversation_id)
    print(
        "each run has a fresh run id:     ", len({first.run_id, continued.run_id, fork.run_id}) == 3
    )
    print("the fork is a new conversation:  ", fork.conversation_id != first.conversation_id)
    print()
    print("the fork's messages (history keeps the stamps it carried in):")
    for message in fork.messages:
        run, conversation = message.run_id[-12:], message.conversation_id[-12:]
        print(f"  {message.role:<9} run=…{run}  conversation=…{conversation}  {message.content!r}")


if __name__ == "__main__":
    asyncio.run(main())
