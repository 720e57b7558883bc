"""The cost of a fallback switch, in process and durably, measured side by side in one run.

A one-turn run on ``FallbackModel(primary, backup)`` whose primary answers, and the same run
whose primary fails at once (a 503 that its policy, ``Retry(max_attempts=1)``, does not
retry) so that the backup answers. Printed: the best-of-N latency of each, the ratio, what
the switch itself costs (the difference), and durably the history events and bytes it adds
(one failed model activity). Backoff is policy, not overhead: none is measured here.

Run: .venv/bin/python benchmarks/fallback.py [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, Retry
from golem.client import DurableAgent
from golem.models import FallbackModel, FunctionModel, ModelHTTPError, ModelRequest
from golem.testing import dev_server
from golem.worker import GolemPlugin


def fallback_agent(primary_up: bool, name: str) -> Agent[Any, str]:
    def primary(messages: list[Message], tools: Any) -> Message:
        if not primary_up:
            raise ModelHTTPError(503, "the primary is down")
        return Message.assistant("primary")

    model = FallbackModel(
        FunctionModel(primary, model_name="primary"),
        FunctionModel(lambda m, t: Message.assistant("backup"), model_name="backup"),
        retry=[Retry(max_attempts=1), None],
    )
    return Agent(model, name=name)


async def best(run: Callable[[], Awaitable[Any]], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` runs (after one warm-up)."""
    await run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await run()
        times.append(time.perf_counter() - start)
    return min(times)


async def history_size(client: Client, run_id: str) -> tuple[int, int]:
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    return len(events), sum(e.ByteSize() for e in events)


def row(label: str, plain: float, switched: float) -> str:
    return (
        f"{label:<12} {plain * 1000:>9.2f} ms {switched * 1000:>9.2f} ms "
        f"{switched / plain:>7.2f}x {(switched - plain) * 1000:>+9.2f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    repeats = parser.parse_args().repeats
    up, down = fallback_agent(True, "bench_up"), fallback_agent(False, "bench_down")
    assert (await up.run("go")).model == "primary"
    assert (await down.run("go")).model == "backup"

    request = ModelRequest(messages=[Message.user("go")])
    alone_up = await best(lambda: up.model.request(request), repeats * 20)
    alone_down = await best(lambda: down.model.request(request), repeats * 20)
    local_up = await best(lambda: up.run("go"), repeats * 20)
    local_down = await best(lambda: down.run("go"), repeats * 20)

    print("starting the dev server...", file=sys.stderr)
    async with dev_server() as env:
        client = env.client
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(up, down)]):
            durable_up = DurableAgent(client, up, task_queue=task_queue)
            durable_down = DurableAgent(client, down, task_queue=task_queue)
            durable_plain = await best(lambda: durable_up.run("go"), repeats)
            durable_switched = await best(lambda: durable_down.run("go"), repeats)
            sizes_up = await history_size(client, (await durable_up.run("go")).run_id)
            sizes_down = await history_size(client, (await durable_down.run("go")).run_id)

    print(f"one-turn run, best of {repeats * 20} in process and {repeats} durably")
    print(f"{'':<12} {'primary up':>12} {'switched':>12} {'ratio':>8} {'switch costs':>12}")
    print(row("model alone", alone_up, alone_down))
    print(row("in process", local_up, local_down))
    print(row("durable", durable_plain, durable_switched))
    print(
        f"durable history: {sizes_up[0]} -> {sizes_down[0]} events "
        f"({sizes_down[0] - sizes_up[0]:+d}), {sizes_up[1]} -> {sizes_down[1]} bytes "
        f"({sizes_down[1] - sizes_up[1]:+d}, {sizes_down[1] / sizes_up[1]:.2f}x)"
    )
    switch_local = local_down - local_up
    switch_durable = durable_switched - durable_plain
    print(
        f"a switch costs {switch_durable / switch_local:.0f}x more durably than in process "
        f"(one more activity: {switch_durable * 1000:.1f} ms vs {switch_local * 1000:.3f} ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
