"""Durable overhead on the local dev server, measured side by side in one run.

1. a 10-turn tool-using run in process, durably, and a bare workflow running the same
   number of no-op activities (the floor), with small and with 2 KB tool results:
   per-activity latency and the ratio to the floor;
2. history events and bytes per turn for 5, 10, 20 and 40-turn runs with 2 KB tool results
   (target: <= 4 KB per turn), and the 40-turn run's bytes per turn by event type;
3. 50 concurrent 3-turn runs on one worker: runs/s and CPU seconds per run (client and
   worker share this process, so the CPU figure is an upper bound for the worker).

Run: .venv/bin/python benchmarks/durable_overhead.py [--inline-bytes N]
(``GolemPlugin(inline_messages_bytes=N)``: 0 reads every model call's messages by query.)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _floor import BareBytesWorkflow, BareWorkflow, echo, noop
from history_bytes import breakdown
from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin

REPEATS = 9


def tool_agent(turns: int, result_bytes: int, name: str) -> Agent[Any, str]:
    def answer(messages: list[Message], tools: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < turns:
            return Message.assistant(
                "", [ToolCall(id=f"c{done}", name="fetch", args=f'{{"n": {done}}}')]
            )
        return Message.assistant(f"done after {done} tools")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=name, max_iterations=turns + 5)

    @agent.tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return ("x" * result_bytes) if result_bytes else f"page {n}"

    return agent


async def best(fn: Any, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return min(times)


async def history(client: Client, run_id: str) -> list[Any]:
    return [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inline-bytes", type=int, default=None)
    inline = parser.parse_args().inline_bytes
    options = {} if inline is None else {"inline_messages_bytes": inline}
    async with dev_server() as env:
        client = env.client
        tq = f"bench-{uuid.uuid4().hex[:8]}"
        agents = [tool_agent(10, 0, "ten"), tool_agent(3, 0, "three")]
        agents += [tool_agent(n, 2048, f"bytes{n}") for n in (5, 10, 20, 40)]
        plugin = GolemPlugin(*agents, **options)
        async with Worker(
            client,
            task_queue=tq,
            plugins=[plugin],
            workflows=[BareWorkflow, BareBytesWorkflow],
            activities=[noop, echo],
            max_concurrent_activities=200,
            max_concurrent_workflow_tasks=200,
        ):
            activities = 10 + 11  # ten tool calls, eleven model requests
            print("1. a 10-turn tool-using run (21 activities), best of", REPEATS, "interleaved")
            print(
                "   tool result   in process   durable (golem)   floor (bare no-ops)"
                "   golem / floor   floor moving the bytes   golem / that"
            )

            async def timed(run: Any) -> float:
                start = time.perf_counter()
                await run()
                return time.perf_counter() - start

            for label, agent, size in (("small", agents[0], 0), ("2 KB", agents[3], 2048)):
                durable = DurableAgent(client, agent, task_queue=tq)
                await durable.run("warm up")
                local_s = await best(lambda a=agent: a.run("go"), repeats=50)  # type: ignore[misc]

                def bare() -> Any:
                    return client.execute_workflow(
                        BareWorkflow.run, activities, id=f"bare-{uuid.uuid4()}", task_queue=tq
                    )

                def bare_bytes(size: int = size) -> Any:
                    # Each activity takes and returns ``size`` bytes, as golem's 2 KB turns do.
                    return client.execute_workflow(
                        BareBytesWorkflow.run,
                        args=[activities, size],
                        id=f"bytes-{uuid.uuid4()}",
                        task_queue=tq,
                    )

                # Interleaved, so a load spike on a shared machine hits every side alike.
                times: dict[str, list[float]] = {"golem": [], "floor": [], "bytes": []}
                for _ in range(REPEATS):
                    times["golem"].append(await timed(lambda d=durable: d.run("go")))  # type: ignore[misc]
                    times["floor"].append(await timed(bare))
                    times["bytes"].append(await timed(bare_bytes))
                durable_s, floor_s, bytes_s = (min(times[k]) for k in ("golem", "floor", "bytes"))
                print(
                    f"   {label:11s} {local_s / activities * 1e6:8.0f} µs/step"
                    f" {durable_s / activities * 1e3:10.2f} ms/act"
                    f" {floor_s / activities * 1e3:14.2f} ms/act"
                    f" {durable_s / floor_s:15.2f}x"
                    f" {bytes_s / activities * 1e3:18.2f} ms/act"
                    f" {durable_s / bytes_s:12.2f}x   (target: golem / floor <= 1.15)"
                )

            print("\n2. history per turn, 2 KB tool results")
            print("   turns   events  events/turn      bytes  bytes/turn")
            rows = []
            for agent in agents[2:]:
                result = await DurableAgent(client, agent, task_queue=tq).run("go")
                turns = int(agent.name.removeprefix("bytes"))
                events = await history(client, result.run_id)
                size = sum(e.ByteSize() for e in events)
                rows.append((turns, size / turns))
                print(
                    f"   {turns:5d} {len(events):8d} {len(events) / turns:12.1f}"
                    f" {size:10d} {size / turns:11.0f}"
                )
            growth = rows[-1][1] / rows[0][1]
            print(f"   bytes/turn at 40 turns / at 5 turns: {growth:.2f} (1.0 = linear)")
            print(f"   bytes/turn at 40 turns: {rows[-1][1]:.0f} (target: <= 4000)")
            print("\n".join(breakdown(events, turns)))
            total_40 = rows[-1][1] * 40
            print(
                f"   40-turn total {total_40 / 1e3:.0f} KB (measured against pydantic-ai side by side: benchmarks/peers.py)"
            )

            three = DurableAgent(client, agents[1], task_queue=tq)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            results = await asyncio.gather(*(three.run("go") for _ in range(50)))
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            assert all(r.output == "done after 3 tools" for r in results)
            print("\n3. 50 concurrent 3-turn runs on one worker")
            print(
                f"   {50 / wall:.1f} runs/s, {cpu / 50 * 1e3:.1f} ms CPU per run (client + worker), wall {wall:.2f} s"
            )


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    import os

    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
