"""The cost of a stored payload: durable runs whose tool results are small, 1 MB or 5 MB,
with and without external storage (golem.storage.LocalDirectory), measured side by side in
one run.

Each run calls its tool ``--calls`` times (every result distinct, so the store's content
addressing saves nothing) and then answers: ``2 * calls + 1`` activities. Printed per case:
the latency per activity (median, min-max, over interleaved repeats), its ratio to the small
inline case, and what the store and the history hold per run. 5 MB has no inline case:
without storage Temporal refuses it.

Run: .venv/bin/python benchmarks/storage.py [--repeats N] [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.storage import LocalDirectory
from golem.testing import dev_server
from golem.worker import GolemPlugin

MB = 1_000_000
SIZES = {"small": 100, "1 MB": MB, "5 MB": 5 * MB}


def tool_agent(name: str, size: int, calls: int) -> Agent[Any, str]:
    """Calls ``fetch`` ``calls`` times (each result ``size`` characters), then answers."""

    def answer(messages: list[Message], tools: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < calls:
            return Message.assistant("", [ToolCall(id=f"c{done}", name="fetch", args="{}")])
        return Message.assistant("done")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=name)
    filler = "0123456789abcdef" * (size // 16 + 1)

    @agent.tool
    def fetch() -> str:
        """A result of the case's size."""
        head = uuid.uuid4().hex
        return head + filler[: max(0, size - len(head))]

    return agent


def client_with(env_client: Client, plugin: GolemPlugin) -> Client:
    config = env_client.config()
    config["plugins"] = [plugin]
    return Client(**config)


def history_bytes(events: list[Any]) -> int:
    return sum(e.ByteSize() for e in events)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    calls, activities = args.calls, 2 * args.calls + 1
    cases = [
        ("small", False),
        ("small", True),
        ("1 MB", False),
        ("1 MB", True),
        ("5 MB", True),
    ]
    agents = {
        (label, stored): tool_agent(f"bench_{label[0]}_{int(stored)}", SIZES[label], calls)
        for label, stored in cases
    }
    print("starting the dev server...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as folder:
        store = LocalDirectory(Path(folder) / "blobs")
        storage = ExternalStorage(drivers=[store])
        async with dev_server() as env:
            inline_agents = [a for (_, stored), a in agents.items() if not stored]
            stored_agents = [a for (_, stored), a in agents.items() if stored]
            inline = client_with(env.client, GolemPlugin(*inline_agents))
            stored = client_with(env.client, GolemPlugin(*stored_agents, external_storage=storage))
            queue = f"bench-{uuid.uuid4().hex[:8]}"
            async with (
                Worker(inline, task_queue=queue + "-inline"),
                Worker(stored, task_queue=queue + "-stored"),
            ):
                durable = {
                    case: DurableAgent(
                        stored if case[1] else inline,
                        agent,
                        task_queue=queue + ("-stored" if case[1] else "-inline"),
                    )
                    for case, agent in agents.items()
                }
                for case in cases:  # warm-up
                    await durable[case].run("go")
                times: dict[tuple[str, bool], list[float]] = {case: [] for case in cases}
                footprint: dict[tuple[str, bool], tuple[int, int]] = {}
                for _ in range(args.repeats):
                    for case in cases:  # interleaved: a busy moment hits every case alike
                        written = store.bytes_written
                        start = time.perf_counter()
                        result = await durable[case].run("go")
                        times[case].append((time.perf_counter() - start) / activities)
                        handle = (stored if case[1] else inline).get_workflow_handle(result.run_id)
                        events = [e async for e in handle.fetch_history_events()]
                        footprint[case] = (store.bytes_written - written, history_bytes(events))

    base = statistics.median(times[("small", False)])
    print(
        f"durable runs of {calls} tool calls + {calls + 1} model calls ({activities} activities),"
        f" {args.repeats} interleaved repeats; latency per activity, ms"
    )
    print(
        f"{'tool result':<12} {'storage':<8} {'median (min-max)':>22} {'/ small inline':>15}"
        f" {'stored per run':>15} {'history per run':>16}"
    )
    for label, on in cases:
        values = [t * 1000 for t in times[(label, on)]]
        median = statistics.median(values)
        spread = f"{median:.2f} ({min(values):.2f}-{max(values):.2f})"
        written, history = footprint[(label, on)]
        print(
            f"{label:<12} {'on' if on else 'off':<8} {spread:>22} {median / (base * 1000):>14.2f}x"
            f" {written:>15,} {history:>16,}"
        )
    inline_1mb = statistics.median(times[("1 MB", False)])
    stored_1mb = statistics.median(times[("1 MB", True)])
    stored_5mb = statistics.median(times[("5 MB", True)])
    print(
        f"a stored 1 MB result vs the same inline: {stored_1mb / inline_1mb:.2f}x per activity "
        f"({(stored_1mb - inline_1mb) * activities / calls * 1000:+.1f} ms per stored payload); "
        f"5 MB stored vs 1 MB stored: {stored_5mb / stored_1mb:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
