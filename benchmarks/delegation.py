"""The cost of a delegation, measured side by side in one run.

The same work three ways: a caller whose tool answers itself (a local tool), a caller that
asks a delegate (``Agent(delegates=[helper])``: a one-turn child run, durably a child
workflow), and a caller whose tool asks the helper with ``ctx.delegate`` (durably the tool
activity starts the helper's run as a workflow of its own). Printed: each one's latency in
process and durably (median and range of interleaved repeats) with its ratio to the local
tool, and durably the history events and bytes of the caller and of the child run, whose
sum is what a delegation costs in Temporal's storage.

Run: .venv/bin/python benchmarks/delegation.py [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, Result, RunContext, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin

ANSWER = "order 42 was charged twice; refund 19.90"


def caller(name: str, tool: str, **options: Any) -> Agent[Any, str]:
    """Calls ``tool`` once with a prompt, then answers with its result."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":
            return Message.assistant(messages[-1].content)
        args = '{"prompt": "what happened to order 42?"}'
        return Message.assistant("", [ToolCall(id="c1", name=tool, args=args)])

    return Agent(FunctionModel(answer, model_name="bench"), name=name, **options)


def agents() -> dict[str, Agent[Any, str]]:
    helper: Agent[Any, str] = Agent(
        FunctionModel(lambda m, t: Message.assistant(ANSWER), model_name="bench"), name="helper"
    )
    local = caller("bench_local", "lookup")

    @local.tool
    def lookup(prompt: str) -> str:
        """Look it up."""
        return ANSWER

    delegated = caller("bench_delegated", "helper", delegates=[helper])
    in_tool = caller("bench_in_tool", "ask")

    @in_tool.tool
    async def ask(ctx: RunContext[Any], prompt: str) -> str:
        """Ask the helper."""
        return str((await ctx.delegate(helper, prompt)).output)

    return {"local tool": local, "delegates=": delegated, "ctx.delegate": in_tool, "": helper}


async def timed(runs: dict[str, Callable[[], Awaitable[Result[Any]]]], repeats: int) -> Any:
    """Seconds per run of each, over ``repeats`` interleaved rounds (after a warm-up)."""
    times: dict[str, list[float]] = {label: [] for label in runs}
    for run in runs.values():
        assert (await run()).output == ANSWER
    for _ in range(repeats):
        for label, run in runs.items():
            start = time.perf_counter()
            await run()
            times[label].append(time.perf_counter() - start)
    return times


def cell(seconds: list[float], base: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    ratio = statistics.median(seconds) / statistics.median(base)
    return f"{statistics.median(ms):8.2f} ({min(ms):.2f}-{max(ms):.2f}) ms {ratio:5.2f}x"


async def history(client: Client, run_id: str) -> tuple[int, int]:
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    return len(events), sum(e.ByteSize() for e in events)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    repeats = parser.parse_args().repeats
    named = agents()
    helper = named.pop("")
    local = await timed({k: (lambda a=a: a.run("go")) for k, a in named.items()}, repeats * 10)

    print("starting the dev server...", file=sys.stderr)
    async with dev_server() as env:
        client = env.client
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(*named.values(), helper)
        async with Worker(client, task_queue=task_queue, plugins=[plugin]):
            durables = {k: DurableAgent(client, a, task_queue=task_queue) for k, a in named.items()}
            durable = await timed(
                {k: (lambda d=d: d.run("go")) for k, d in durables.items()}, repeats
            )
            sizes = {}
            for label, agent in durables.items():
                result = await agent.run("go")
                child = await history(client, result.sub_runs[0]) if result.sub_runs else (0, 0)
                sizes[label] = (await history(client, result.run_id), child)

    base_local, base_durable = local["local tool"], durable["local tool"]
    print("one delegation vs the same work as a local tool; median (range), ratio to the tool")
    print(
        f"{'':<14}{'in process (' + str(repeats * 10) + ' rounds)':>38}{'durably (' + str(repeats) + ' rounds)':>38}"
    )
    for label in named:
        print(
            f"{label:<14}{cell(local[label], base_local):>38}{cell(durable[label], base_durable):>38}"
        )
    print("\ndurable history, events / bytes: the caller's, the child run's, both")
    tool_bytes = sizes["local tool"][0][1]
    for label, ((events, size), (child_events, child_size)) in sizes.items():
        total = size + child_size
        print(
            f"{label:<14}{events:>5} / {size:>6,}   {child_events:>4} / {child_size:>6,}   "
            f"{events + child_events:>4} / {total:>6,}  {total / tool_bytes:5.2f}x the tool's"
        )


if __name__ == "__main__":
    asyncio.run(main())
