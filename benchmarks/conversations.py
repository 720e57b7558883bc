"""Durable conversations at length, measured in one run on the local dev server.

1. per-turn latency of one ConversationWorkflow at turns 1-10 vs 491-500 (flat: <= 1.5x),
   and on past 2 MB of transcript (1100 turns: beyond what one Temporal payload can carry),
   with the largest input any of its continue-as-new runs started with;
2. history bytes per turn, summed over the conversation workflow (every continue-as-new
   run) and all its child runs, at 50 and 200 turns with 2 KB tool results
   (linear: total(200) / total(50) <= 4.6);
3. reading a closed 1000-turn run back (fetch_run) with no worker running, and the last
   turn of the long conversation (its history read from every workflow run holding it).

Run: .venv/bin/python benchmarks/conversations.py [--quick] [--read-turns 1000]
     [--long-turns 1100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent, conversation_runs, fetch_run
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.usage import UsageLimits
from golem.wire import message_size
from golem.worker import GolemPlugin

RESULT_BYTES = 2048


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def turn_agent(name: str) -> Agent[Any, str]:
    """Each prompt: one tool call with a 2 KB result, then an answer."""

    def answer(messages: list[Message], tools: Any) -> Message:
        last = messages[-1]
        if last.role == "user":
            n = sum(1 for m in messages if m.role == "user")
            return Message.assistant("", [ToolCall(id=f"c{n}", name="fetch", args=f'{{"n": {n}}}')])
        return Message.assistant(f"read page {last.content[:8]}")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=name)

    @agent.tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return f"{n:08d}" + "x" * (RESULT_BYTES - 8)

    return agent


def long_run_agent(turns: int) -> Agent[Any, str]:
    """One run of ``turns`` tool turns (2 KB results), then an answer."""

    def answer(messages: list[Message], tools: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < turns:
            return Message.assistant("", [ToolCall(id=f"c{done}", name="fetch", args="{}")])
        return Message.assistant(f"done after {done}")

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer),
        name=f"long{turns}",
        max_iterations=turns + 5,
        usage_limits=UsageLimits(request_limit=None),
    )

    @agent.tool
    def fetch() -> str:
        """Fetch a page."""
        return "x" * RESULT_BYTES

    return agent


async def history_bytes(client: Client, workflow_id: str, run_id: str | None = None) -> int:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    return sum([e.ByteSize() async for e in handle.fetch_history_events()])


async def conversation_bytes(client: Client, conversation_id: str, runs: list[str]) -> int:
    """Every run of the conversation workflow (across continue-as-new) and every turn."""
    total = 0
    async for execution in client.list_workflows(f"WorkflowId = '{conversation_id}'"):
        total += await history_bytes(client, conversation_id, execution.run_id)
    for run_id in runs:
        total += await history_bytes(client, run_id)
    return total


async def largest_input(client: Client, conversation_id: str) -> tuple[int, int]:
    """(workflow runs, largest input in bytes) along the conversation's continue-as-new chain."""
    sizes: list[int] = []
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(conversation_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            attrs = event.workflow_execution_started_event_attributes
            sizes.append(attrs.input.ByteSize())
            run_id = attrs.continued_execution_run_id
            break
        if not run_id:
            return len(sizes), max(sizes)


async def main(quick: bool, read_turns: int | None, conversation_turns: int | None) -> None:
    long_turns = read_turns or (200 if quick else 1000)
    latency_turns = 100 if quick else 500
    conversation_turns = max(conversation_turns or (150 if quick else 1100), latency_turns)
    agent = turn_agent("turns")
    model = agent.model
    assert isinstance(model, FunctionModel)
    long_agent = long_run_agent(long_turns)
    async with dev_server() as env:
        client = env.client
        tq = f"conv-bench-{uuid.uuid4().hex[:6]}"
        async with Worker(client, task_queue=tq, plugins=[GolemPlugin(agent, long_agent)]):
            durable = DurableAgent(client, agent, task_queue=tq)

            print(
                f"1. per-turn latency of one conversation ({conversation_turns} turns, "
                "3 activities each, 2 KB tool results)"
            )
            long_conv = conv = await durable.conversation()
            times = []
            for n in range(conversation_turns):
                start = time.perf_counter()
                last_turn = await conv.send(f"page {n}")
                times.append(time.perf_counter() - start)
                # The test model keeps every request it saw (O(turns^2) references in this
                # process): forget them, or the growing heap's GC is what turn 1100 measures.
                model.requests.clear()
                if (n + 1) % 50 == 0:
                    progress(f"latency: turn {n + 1}/{conversation_turns}")
            first = statistics.median(times[:10])
            at = statistics.median(times[latency_turns - 10 : latency_turns])
            end = statistics.median(times[-10:])
            print(f"   turns 1-10        median {first * 1e3:7.1f} ms")
            print(
                f"   turns {latency_turns - 9}-{latency_turns}    median {at * 1e3:7.1f} ms"
                f"   {at / first:5.2f}x turn 1   (flat: <= 1.5)"
            )
            print(
                f"   turns {conversation_turns - 9}-{conversation_turns}  median {end * 1e3:7.1f} ms"
                f"   {end / first:5.2f}x turn 1"
            )
            transcript = sum(map(message_size, last_turn.messages))
            runs, largest = await largest_input(client, conv.id)
            print(
                f"   transcript {transcript / 1e6:.2f} MB over {runs} workflow runs; largest "
                f"continue-as-new input {largest / 1e3:.1f} KB (one payload: at most 2 MB)"
            )

            print(
                "\n2. history bytes per turn, conversation workflow + its runs, 2 KB tool results"
            )
            totals = {}
            for turns in (50, 200):
                conv = await durable.conversation()
                for n in range(turns):
                    await conv.send(f"page {n}")
                totals[turns] = await conversation_bytes(client, conv.id, await conv.runs())
                progress(f"bytes: {turns} turns done")
                print(
                    f"   {turns:4d} turns  {totals[turns]:>12,} bytes  {totals[turns] / turns:>9,.0f} bytes/turn"
                )
            print(
                f"   total(200) / total(50) = {totals[200] / totals[50]:.2f}   (linear: 4.0; target <= 4.6)"
            )

            print(f"\n3. reading back one closed {long_turns}-turn run, 2 KB tool results")
            progress(f"running the {long_turns}-turn run")
            result = await DurableAgent(client, long_agent, task_queue=tq).run("go")
        # No worker from here on: the read must not need one.
        start = time.perf_counter()
        record = await fetch_run(client, result.run_id)
        elapsed = time.perf_counter() - start
        assert record.messages == result.messages
        print(
            f"   fetch_run, no worker: {elapsed:.2f} s for {len(record.messages)} messages   (target < 2 s)"
        )
        start = time.perf_counter()
        turns = await conversation_runs(client, long_conv.id)
        record = await fetch_run(client, turns[-1])
        elapsed = time.perf_counter() - start
        assert record.messages == last_turn.messages
        print(
            f"   the long conversation's last turn, no worker: {elapsed:.2f} s for its "
            f"{len(turns)} run ids and {len(record.messages)} messages"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--read-turns", type=int, help="turns of the run read back (3.)")
    parser.add_argument("--long-turns", type=int, help="turns of the long conversation (1.)")
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.read_turns, args.long_turns))
    sys.stdout.flush()
    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
