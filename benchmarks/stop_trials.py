"""Graceful-stop trials: does a worker that stops in a process that goes on running
workflows ever leave a command of its runs in another workflow's history?

Each trial, in this one process: a conversation's turn waits for an approval with a 1 s
approval timeout on worker A; A stops (its runs still cached); the timeout fires with no
worker; a late approval is sent and worker B starts, refuses it, finishes the turn and
closes the conversation; then its transcript is queried and every workflow of the trial
(the conversation and its turn) is replayed with ``temporalio.worker.Replayer``. Trials
run ``--width`` at a time, so one trial's stopped worker leaves its runs while the others'
workflows activate: before golem evicted a stopped worker's cached runs itself
(docs/adr/0036), Python's garbage collector closed them inside those activations and 4 of
150 trials failed here (a query or a replay's nondeterminism error).

Run: .venv/bin/python benchmarks/stop_trials.py [--rounds 10] [--width 6]   (not a test)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin


def held_agent(release: asyncio.Event) -> Agent[Any, str]:
    """Asks for a transfer that needs approval; its answer after the call waits for
    ``release``, so the turn is still going when the late approval arrives."""

    async def answer(messages: list[Message], tools: Any) -> Message:
        if not any(m.role == "tool" for m in messages):
            return Message.assistant("", [ToolCall(id="t1", name="transfer", args='{"amount": 5}')])
        await release.wait()
        return Message.assistant("done")

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer), name="held", approval_timeout=timedelta(seconds=1)
    )

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        return f"moved {amount}"

    return agent


async def timer_fired(client: Client, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    kind = EventType.EVENT_TYPE_TIMER_FIRED
    async with asyncio.timeout(60):
        while not any([e async for e in handle.fetch_history_events() if e.event_type == kind]):
            await asyncio.sleep(0.1)


async def trial(client: Client) -> str:
    """ "" when nothing went wrong, else what did."""
    release = asyncio.Event()
    agent = held_agent(release)
    task_queue = f"stop-{uuid.uuid4().hex[:12]}"
    durable = DurableAgent(client, agent, task_queue=task_queue)

    def worker() -> Worker:
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
        return Worker(client, task_queue=task_queue, plugins=[plugin])

    async with worker():
        conv = await durable.conversation()
        await conv.send("pay")
    await timer_fired(client, conv.id)  # no worker: the server fired it
    late = asyncio.ensure_future(conv.approve({"t1": True}))
    async with worker():
        try:
            await late
            return "a late approval was accepted"
        except ValueError:
            pass  # refused, as it must be
        release.set()
        await conv.close()
        try:
            await conv.messages()
        except Exception as exc:  # a query replays the closed conversation
            return f"query: {exc}"
        turns = await conv.runs()
    for workflow_id in [conv.id, *turns]:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        replayer = Replayer(workflows=[], plugins=[GolemPlugin(agent)])
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if replayed.replay_failure is not None:
            return f"replay of {workflow_id}: {replayed.replay_failure}"
    return ""


async def main(rounds: int, width: int) -> None:
    problems: list[str] = []
    began = time.perf_counter()
    async with dev_server() as env:
        for number in range(rounds):
            results = await asyncio.gather(*(trial(env.client) for _ in range(width)))
            problems += [r for r in results if r]
            print(f"  .. round {number + 1}/{rounds}: {len(problems)} problems", file=sys.stderr)
    wall = time.perf_counter() - began
    print(f"stop trials: a worker stopped while its turn waits, {width} trials at a time")
    print(f"{'trials':<48}{rounds * width:>6}")
    print(
        f"{'a query or a replay failed, or a late approval taken':<48}{len(problems):>6}  must be 0"
    )
    print(f"{'wall seconds':<48}{wall:>6.1f}")
    for problem in problems:
        print(f"  problem: {problem[:300]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--width", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.width))
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
