"""What a conversation turn costs beside a plain run doing the same work, side by side.

    .venv/bin/python benchmarks/conversation_cost.py [--repeats 3] [--conversations 50]

The same agent (a tool call with a 2 KB result, then an answer: three activities) runs as
250 plain runs (50 at a time) and as 50 conversations of 5 turns each (the conversations
concurrent, each one's turns in order). One golem worker runs in its own process, so its
CPU is read from the OS for that process alone. Repeats are interleaved (plain,
conversation, ...) and reported as median (min-max); ratios are conversation / plain.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _worker_process import WorkerProcess, side_by_side
from conversations import turn_agent
from temporalio.client import Client
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.testing import dev_server
from golem.worker import GolemPlugin

AGENT = turn_agent("cost")


async def serve(target: str, task_queue: str) -> None:
    """The worker, in this process, until stdin closes."""
    client = await Client.connect(target, plugins=[GolemPlugin(AGENT)])
    async with Worker(
        client,
        task_queue=task_queue,
        max_concurrent_activities=400,
        max_concurrent_workflow_tasks=400,
    ):
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def plain(durable: DurableAgent[str], runs: int, at_once: int) -> None:
    limit = asyncio.Semaphore(at_once)

    async def one(n: int) -> None:
        async with limit:
            await durable.run(f"page {n}?")

    await asyncio.gather(*(one(n) for n in range(runs)))


async def conversations(durable: DurableAgent[str], count: int, turns: int) -> None:
    async def one() -> None:
        conv = await durable.conversation()
        for n in range(turns):
            await conv.send(f"page {n}?")
        await conv.close()

    await asyncio.gather(*(one() for _ in range(count)))


async def measure(worker: WorkerProcess, work: Any) -> tuple[float, float]:
    """(worker CPU seconds, wall seconds) of ``work``."""
    cpu, wall = worker.cpu(), time.perf_counter()
    await work
    return worker.cpu() - cpu, time.perf_counter() - wall


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


async def main(repeats: int, count: int, turns: int) -> None:
    async with (
        dev_server() as env,
        WorkerProcess(
            env.client.service_client.config.target_host, __file__, prefix="cost"
        ) as worker,
    ):
        durable: DurableAgent[str] = DurableAgent(env.client, AGENT, task_queue=worker.task_queue)
        await plain(durable, 20, 20)  # warm the worker up
        await conversations(durable, 5, 2)
        runs = count * turns
        cpu: dict[str, list[float]] = {"plain": [], "conversation": []}
        rate: dict[str, list[float]] = {"plain": [], "conversation": []}
        for repeat in range(repeats):
            for kind in ("plain", "conversation"):
                print(f"  .. repeat {repeat + 1}: {kind}", file=sys.stderr, flush=True)
                work = (
                    plain(durable, runs, count)
                    if kind == "plain"
                    else conversations(durable, count, turns)
                )
                seconds, wall = await measure(worker, work)
                cpu[kind].append(seconds / runs * 1e3)
                rate[kind].append(runs / wall)
        print(
            f"a conversation turn vs a plain run, the same work ({runs} runs {count} at a time vs "
            f"{count} conversations x {turns} turns), {repeats} interleaved repeats"
        )
        print(
            f"   worker CPU per run/turn, ms   plain {summary(cpu['plain'])}   "
            f"conversation {summary(cpu['conversation'])}"
        )
        print(
            f"   throughput, runs/turns per s   plain {summary(rate['plain'])}   "
            f"conversation {summary(rate['conversation'])}"
        )
        ratios = [c / p for c, p in zip(cpu["conversation"], cpu["plain"], strict=True)]
        speeds = [c / p for c, p in zip(rate["conversation"], rate["plain"], strict=True)]
        print(f"   conversation / plain: CPU {summary(ratios)}x   throughput {summary(speeds)}x")


if __name__ == "__main__":
    side_by_side(serve, main, conversations=50, turns=5)
