"""The pending inbox against scanning: N runs wait for approval, then every waiting call is
listed twice, side by side.

- inbox: ``golem.client.pending`` (one visibility query on ``GolemWaiting``, the calls read
  from each run's memo; no workflow asked, no worker needed);
- scan-and-query (the baseline): list every running golem run of the agent, then ask each
  for its ``golem.pending`` query (50 at a time), which needs a worker to answer.

Prints each one's wall time (median of ``--repeats``), the client's CPU, the RPCs it made
and the calls it found, and the ratio; the issue's target is the inbox at <= 2 s for 1,000
waiting runs on the dev server.

Run: .venv/bin/python benchmarks/inbox.py [--runs 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent, pending
from golem.client.inbox import inbox_query
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.wire.lineage import AGENT
from golem.worker import GolemPlugin

NAME = "inbox-bench"
TARGET_SECONDS = 2.0
QUERIES_AT_ONCE = 50


def waiting_agent() -> Agent[Any, str]:
    """Asks for one refund, which waits for a person."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message.assistant("done")
        return Message.assistant("", [ToolCall(id="r1", name="refund", args='{"order": 7}')])

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=NAME)

    @agent.tool(requires_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        return f"refunded {order}"

    return agent


async def start_waiting(durable: DurableAgent[str], runs: int) -> None:
    """Start ``runs`` runs, 50 at a time, each until it waits."""
    for first in range(0, runs, 50):

        async def one() -> None:
            run = await durable.start("refund order 7")
            await run.result()

        await asyncio.gather(*(one() for _ in range(min(50, runs - first))))
        print(f"  {min(first + 50, runs)} runs waiting", file=sys.stderr, flush=True)


async def scan_and_query(client: Client) -> int:
    """The baseline: every running run of the agent, each asked what it waits for."""
    query = f'{AGENT.name} = "{NAME}" AND ExecutionStatus = "Running"'
    ids = [w.id async for w in client.list_workflows(query)]
    gate = asyncio.Semaphore(QUERIES_AT_ONCE)

    async def ask(run_id: str) -> int:
        async with gate:
            calls = await client.get_workflow_handle(run_id).query("golem.pending")
            return len(calls)

    return sum(await asyncio.gather(*(ask(i) for i in ids)))


async def visibility_floor(client: Client) -> int:
    """What any listing of these runs costs: their ids from visibility, nothing more."""
    query = f'{AGENT.name} = "{NAME}" AND ExecutionStatus = "Running"'
    return len([w.id async for w in client.list_workflows(query)])


async def inbox(client: Client) -> int:
    return len(await pending(client, agent=NAME))


class Counted:
    """Counts the RPCs a client makes, by wrapping its workflow service's calls."""

    def __init__(self, client: Client) -> None:
        self.calls = 0
        service = client.workflow_service
        for name in ("list_workflow_executions", "query_workflow"):
            self._wrap(service, name)

    def _wrap(self, service: Any, name: str) -> None:
        method = getattr(service, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await method(*args, **kwargs)

        setattr(service, name, counted)


async def measure(
    label: str, counter: Counted, listing: Callable[[], Awaitable[int]], repeats: int
) -> tuple[float, float, int, int]:
    """Median wall seconds, median client CPU seconds, RPCs per listing, calls found."""
    walls, cpus, found = [], [], 0
    before = counter.calls
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        found = await listing()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    rpcs = (counter.calls - before) // repeats
    print(f"  {label}: {walls}", file=sys.stderr, flush=True)
    return statistics.median(walls), statistics.median(cpus), rpcs, found


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    agent = waiting_agent()
    async with dev_server() as env:
        client = env.client
        task_queue = f"inbox-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=30))
        async with Worker(
            client, task_queue=task_queue, plugins=[plugin], max_cached_workflows=args.runs
        ):
            durable = DurableAgent(client, agent, task_queue=task_queue)
            print(f"starting {args.runs} waiting runs", file=sys.stderr, flush=True)
            await start_waiting(durable, args.runs)
            while (await client.count_workflows(inbox_query(NAME))).count < args.runs:
                await asyncio.sleep(0.2)  # visibility catches up
            counter = Counted(client)
            floor = await measure("ids only", counter, lambda: visibility_floor(client), 3)
            listed = await measure("inbox", counter, lambda: inbox(client), args.repeats)
            scanned = await measure(
                "scan-and-query", counter, lambda: scan_and_query(client), args.repeats
            )
    print(f"\n{args.runs} waiting runs, median of {args.repeats} listings each:\n")
    print(f"{'':22}{'inbox':>12}{'scan+query':>14}{'ratio':>9}{'ids only':>12}")
    rows = [
        ("wall time (s)", listed[0], scanned[0], floor[0]),
        ("client CPU (s)", listed[1], scanned[1], floor[1]),
        ("RPCs per listing", listed[2], scanned[2], floor[2]),
    ]
    for label, mine, base, least in rows:
        ratio = f"{mine / base:.3f}x" if base else "-"
        print(f"{label:22}{mine:>12.3f}{base:>14.3f}{ratio:>9}{least:>12.3f}")
    print(f"{'calls found':22}{listed[3]:>12}{scanned[3]:>14}{'':9}{floor[3]:>12}")
    print("(ids only: the same runs listed by visibility with no memo read, the floor)")
    verdict = "met" if listed[0] <= TARGET_SECONDS else "NOT met"
    print(f"\ntarget: inbox <= {TARGET_SECONDS:g} s for 1,000 waiting runs: {verdict}")
    print("(the inbox needs no worker; scan-and-query needs one to answer each query)")


if __name__ == "__main__":
    asyncio.run(main())
