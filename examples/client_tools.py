"""A tool the application runs: the model asks the user for a date through the app.

    .venv/bin/python examples/client_tools.py

``agent.external_tool`` declares ``pick_date`` (its arguments' schema, and a schema its
results must match); a call of it waits, in ``Result.pending_calls``, until the application
answers: in process by continuing the run with ``tool_results=``, durably with
``run.complete`` (the run waits in its workflow meanwhile) or ``ToolFailed`` when the user
gave up. Offline: a small deterministic model asks for a delivery date, then confirms it.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from golem import Message, ToolCall, ToolFailed
from golem.agent import Agent
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.worker import GolemPlugin

if __package__ in (None, ""):  # run as a script: the examples package's parent is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples.offline import quiet_dev_server, run_then_exit


def _scheduler(messages: list[Message], tools: Any) -> Message:
    last = messages[-1]
    if last.role == "user":
        ask = ToolCall(id=f"date-{len(messages)}", name="pick_date", args='{"why": "delivery"}')
        return Message.assistant("", [ask])
    if last.failed:
        return Message.assistant(f"No date yet ({last.content}); I will ask again later.")
    return Message.assistant(f"Delivery booked for {last.content}.")


agent = Agent(FunctionModel(_scheduler, model_name="offline-scheduler"), name="scheduler")
agent.external_tool(
    "pick_date",
    "Ask the user to pick a date in the app's calendar",
    {"type": "object", "properties": {"why": {"type": "string"}}},
    result_schema={"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
)


async def in_process() -> None:
    print("In process:")
    paused = await agent.run("Book my delivery")
    [call] = paused.pending_calls
    print(f"  the app is asked: {call.name}({call.args})")
    try:
        await agent.run(history=paused.messages, tool_results={call.id: "next week"})
    except ValueError as exc:
        print(f"  refused before the run: {exc}")
    done = await agent.run(history=paused.messages, tool_results={call.id: "2026-12-24"})
    print(f"  {done.output}")


async def durably() -> None:
    print("\nDurably (the run waits in its workflow for the app):")
    async with quiet_dev_server() as env:
        task_queue = f"scheduler-{uuid.uuid4().hex[:6]}"
        async with Worker(env.client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(env.client, agent, task_queue=task_queue)
            run = await durable.start("Book my delivery")
            [call] = (await run.result()).pending_calls
            done = await run.complete({call.id: ToolFailed("the user closed the calendar")})
            print(f"  {done.output}")


if __name__ == "__main__":
    run_then_exit(in_process, durably)
