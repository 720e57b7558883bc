"""Where a run's history bytes go: one 40-turn run with 2 KB tool results, its history
bytes per turn grouped by event type, and how much of each group is payload data.

Run: .venv/bin/python benchmarks/history_bytes.py [--turns 40] [--inline-bytes N] [-v]
(``-v`` prints one middle turn's events and the run's result in full; ``--inline-bytes``
is ``GolemPlugin(inline_messages_bytes=...)``, 0 reads every model call's messages by query.)
``--conversation N`` instead sends N turns to one conversation (benchmarks/conversations.py's
agent: a tool call with a 2 KB result, then an answer) and breaks down, per turn, the
conversation workflow's history and its runs' histories.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from golem.client import DurableAgent
from golem.testing import dev_server
from golem.worker import GolemPlugin

PAYLOAD = "temporal.api.common.v1.Payload"


def payload_bytes(message: Any) -> int:
    """Bytes of the data of every Payload inside a protobuf message (its metadata aside)."""
    if message.DESCRIPTOR.full_name == PAYLOAD:
        return len(message.data)
    total = 0
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = [v for v in value.values() if hasattr(v, "ListFields")]
        else:
            values = [value] if hasattr(value, "ListFields") else list(value)
        total += sum(payload_bytes(v) for v in values)
    return total


def breakdown(events: list[Any], turns: int) -> list[str]:
    """A table: per event type, its events, bytes per turn and payload data per turn."""
    count: dict[str, int] = defaultdict(int)
    size: dict[str, int] = defaultdict(int)
    data: dict[str, int] = defaultdict(int)
    for event in events:
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        count[name] += 1
        size[name] += event.ByteSize()
        data[name] += payload_bytes(event)
    lines = ["   event type                              events   bytes/turn   payload data/turn"]
    for name in sorted(size, key=lambda n: -size[n]):
        lines.append(
            f"   {name:38s} {count[name]:7d} {size[name] / turns:12.0f} {data[name] / turns:19.0f}"
        )
    total, payload = sum(size.values()), sum(data.values())
    lines.append(f"   {'total':38s} {len(events):7d} {total / turns:12.0f} {payload / turns:19.0f}")
    return lines


async def main() -> None:
    from durable_overhead import tool_agent  # here: durable_overhead imports this module

    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--inline-bytes", type=int, default=None)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("-v", action="store_true")
    args = parser.parse_args()
    options = {} if args.inline_bytes is None else {"inline_messages_bytes": args.inline_bytes}
    if args.conversation:
        await conversation(args.conversation, options)
        return
    async with dev_server() as env:
        client = env.client
        tq = f"bytes-{uuid.uuid4().hex[:8]}"
        agent = tool_agent(args.turns, 2048, "bytes")
        async with Worker(client, task_queue=tq, plugins=[GolemPlugin(agent, **options)]):
            result = await DurableAgent(client, agent, task_queue=tq).run("go")
        handle = client.get_workflow_handle(result.run_id)
        events = [e async for e in handle.fetch_history_events()]
    total = sum(e.ByteSize() for e in events)
    print(f"{args.turns}-turn run, 2 KB tool results: {total / args.turns:.0f} bytes/turn")
    print("\n".join(breakdown(events, args.turns)))
    if args.v:
        middle = len(events) // 2
        for event in [*events[middle : middle + 13], events[-1]]:
            name = EventType.Name(event.event_type)
            print(f"\n--- {event.event_id} {name} ({event.ByteSize()} bytes)\n{event}")


async def conversation(turns: int, options: dict[str, Any]) -> None:
    from conversations import turn_agent

    async with dev_server() as env:
        client = env.client
        tq = f"bytes-{uuid.uuid4().hex[:8]}"
        agent = turn_agent("turns")
        async with Worker(client, task_queue=tq, plugins=[GolemPlugin(agent, **options)]):
            conv = await DurableAgent(client, agent, task_queue=tq).conversation()
            for n in range(turns):
                await conv.send(f"page {n}")
            runs = await conv.runs()
        own: list[Any] = []
        async for execution in client.list_workflows(f"WorkflowId = '{conv.id}'"):
            handle = client.get_workflow_handle(conv.id, run_id=execution.run_id)
            own += [e async for e in handle.fetch_history_events()]
        children: list[Any] = []
        for run_id in runs:
            children += [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    total = sum(e.ByteSize() for e in [*own, *children])
    print(f"{turns}-turn conversation, 2 KB tool results: {total / turns:.0f} bytes/turn")
    print("\nthe conversation workflow (every run)")
    print("\n".join(breakdown(own, turns)))
    print(f"\nits {len(runs)} runs (one per turn)")
    print("\n".join(breakdown(children, turns)))


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    import os

    os._exit(0)  # the Temporal core runtime can abort at interpreter teardown
