"""Sync tools do not stall a worker: 10 concurrent durable runs, each calling one 0.2 s
sync tool, against one such run, on one worker (goal: <= 1.5x one run's wall time; a sync
tool executed on the event loop serializes them, about 10x).

Run: .venv/bin/python benchmarks/sync_tools.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin

CONCURRENT = 10
TOOL_SECONDS = 0.2
REPEATS = 5


def _answer(messages: list[Message], tools: Any) -> Message:
    if not any(m.role == "tool" for m in messages):
        return Message.assistant("", [ToolCall(id="c1", name="slow_lookup", args="{}")])
    return Message.assistant("done")


agent: Agent[Any, str] = Agent(FunctionModel(_answer), name="sync_tool_bench")


@agent.tool
def slow_lookup() -> str:
    """A blocking call, as requests.get would be."""
    time.sleep(TOOL_SECONDS)
    return "found"


instant: Agent[Any, str] = Agent(FunctionModel(_answer), name="instant_tool_bench")


@instant.tool(name="slow_lookup")
def instant_lookup() -> str:
    """The same run with a tool that takes no time: durable overhead alone."""
    return "found"


async def timed(durable: DurableAgent[str], runs: int) -> float:
    start = time.perf_counter()
    results = await asyncio.gather(*(durable.run("go") for _ in range(runs)))
    assert all(r.output == "done" for r in results)
    return time.perf_counter() - start


async def main() -> None:
    async with dev_server() as env:
        task_queue = f"sync-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(agent, instant, heartbeat_timeout=timedelta(seconds=10))
        async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
            durable: DurableAgent[str] = DurableAgent(env.client, agent, task_queue=task_queue)
            floor: DurableAgent[str] = DurableAgent(env.client, instant, task_queue=task_queue)
            await timed(durable, 2)  # warm up
            one, many, zero = [], [], []
            for _ in range(REPEATS):  # interleaved, so machine load hits every case alike
                one.append(await timed(durable, 1))
                many.append(await timed(durable, CONCURRENT))
                zero.append(await timed(floor, CONCURRENT))
    one_s, many_s, zero_s = (statistics.median(t) for t in (one, many, zero))
    print(f"sync tool of {TOOL_SECONDS} s, one worker, median of {REPEATS} repeats")
    print(f"{'case':<40}{'wall s':>10}{'vs one run':>12}")
    print(f"{'1 run':<40}{one_s:>10.3f}{1.0:>11.2f}x")
    print(f"{f'{CONCURRENT} concurrent runs':<40}{many_s:>10.3f}{many_s / one_s:>11.2f}x")
    print(f"{f'{CONCURRENT} concurrent runs, 0 s tool':<40}{zero_s:>10.3f}{zero_s / one_s:>11.2f}x")
    serial = one_s + (CONCURRENT - 1) * TOOL_SECONDS
    print(f"{'(tools serialized, estimate)':<40}{serial:>10.3f}{serial / one_s:>11.2f}x")
    print(
        f"time the {CONCURRENT} sync tools add: {many_s - zero_s:.3f} s "
        f"(parallel: about {TOOL_SECONDS} s; serialized: {CONCURRENT * TOOL_SECONDS} s)"
    )
    verdict = "met" if many_s / one_s <= 1.5 else "NOT met"
    print(f"goal <= 1.5x: {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
