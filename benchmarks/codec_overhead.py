"""What encryption costs per activity, side by side with encryption off, in one run.

A 10-turn run whose tool returns 2 KB each turn (11 model requests, 10 tool calls), on the
local dev server, best of REPEATS:

1. wall time per activity with encryption off and on (end to end; on a shared machine the
   difference is within noise);
2. the codec's own time, measured inside it: every encode and decode the client and the
   worker perform for one run, per activity (the goal: <= 1 ms).

Run: .venv/bin/python benchmarks/codec_overhead.py
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.testing import dev_server
from golem.worker import GolemPlugin
from golem.worker.codec import EncryptionCodec

REPEATS = 7
TURNS = 10
RESULT_BYTES = 2048


class TimedCodec(PayloadCodec):
    """Wraps a codec and adds up the time and bytes it handles."""

    def __init__(self, inner: PayloadCodec) -> None:
        self.inner = inner
        self.reset()

    def reset(self) -> None:
        self.seconds = {"encode": 0.0, "decode": 0.0}
        self.payloads = {"encode": 0, "decode": 0}
        self.bytes = {"encode": 0, "decode": 0}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        start = time.perf_counter()
        result = await self.inner.encode(payloads)
        self.seconds["encode"] += time.perf_counter() - start
        self.payloads["encode"] += len(payloads)
        self.bytes["encode"] += sum(len(p.data) for p in payloads)
        return result

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        start = time.perf_counter()
        result = await self.inner.decode(payloads)
        self.seconds["decode"] += time.perf_counter() - start
        self.payloads["decode"] += len(payloads)
        self.bytes["decode"] += sum(len(p.data) for p in result)
        return result


def tool_agent() -> Agent[Any, str]:
    def answer(messages: list[Message], tools: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < TURNS:
            return Message.assistant(
                "", [ToolCall(id=f"c{done}", name="fetch", args=f'{{"n": {done}}}')]
            )
        return Message.assistant(f"done after {done} tools")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="codec-bench")

    @agent.tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        return (f"page {n} " * RESULT_BYTES)[:RESULT_BYTES]

    return agent


async def timed_runs(client: Client, agent: Agent[Any, str]) -> tuple[float, int]:
    """Best wall time of REPEATS runs, and the activities one run schedules."""
    tq = f"codec-{uuid.uuid4().hex[:8]}"
    durable = DurableAgent(client, agent, task_queue=tq)
    times = []
    async with Worker(client, task_queue=tq):
        await durable.run("warm up")
        for _ in range(REPEATS):
            start = time.perf_counter()
            result = await durable.run("fetch ten pages")
            times.append(time.perf_counter() - start)
    events = [e async for e in client.get_workflow_handle(result.run_id).fetch_history_events()]
    scheduled = sum(
        1 for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )
    return min(times), scheduled


async def main() -> None:
    agent = tool_agent()
    async with dev_server() as env:
        # Both share the environment's connection, closed with it.
        service = env.client.service_client
        plain = Client(service, plugins=[GolemPlugin(agent)])
        codec = TimedCodec(EncryptionCodec.parse(EncryptionCodec.new_key()))
        sealed = Client(service, plugins=[GolemPlugin(agent, encryption_key=codec)])

        # Alternate the two, so load on a shared machine falls on both alike.
        offs, ons = [], []
        for _ in range(3):
            off, activities = await timed_runs(plain, agent)
            on, _ = await timed_runs(sealed, agent)
            offs.append(off)
            ons.append(on)
        off, on = min(offs), min(ons)

        # The codec's own work for exactly one run, client and worker together.
        tq = f"codec-{uuid.uuid4().hex[:8]}"
        async with Worker(sealed, task_queue=tq):
            await DurableAgent(sealed, agent, task_queue=tq).run("warm up")
            best = None
            for _ in range(REPEATS):
                codec.reset()
                await DurableAgent(sealed, agent, task_queue=tq).run("fetch ten pages")
                total = codec.seconds["encode"] + codec.seconds["decode"]
                if best is None or total < best[0]:
                    best = (total, dict(codec.seconds), dict(codec.payloads), dict(codec.bytes))
        assert best is not None
        total, seconds, payloads, sizes = best

    print(
        f"{TURNS}-turn run, {RESULT_BYTES} B tool results, {activities} activities, best of {3 * REPEATS}"
    )
    print(f"{'':<24}{'run ms':>10}{'per activity ms':>18}")
    print(f"{'encryption off':<24}{off * 1e3:>10.1f}{off / activities * 1e3:>18.3f}")
    print(f"{'encryption on':<24}{on * 1e3:>10.1f}{on / activities * 1e3:>18.3f}")
    print(
        f"{'difference (wall)':<24}{(on - off) * 1e3:>10.1f}{(on - off) / activities * 1e3:>18.3f}"
        f"   ratio on/off {on / off:.2f}x"
    )
    print()
    print("codec time inside one encrypted run (client + worker, measured in the codec):")
    for op in ("encode", "decode"):
        print(
            f"  {op:<8}{payloads[op]:>5} payloads {sizes[op] / 1024:>8.1f} KiB "
            f"{seconds[op] * 1e3:>8.3f} ms"
        )
    per_activity = total / activities * 1e3
    verdict = "meets" if per_activity <= 1.0 else "MISSES"
    print(f"  per activity: {per_activity:.3f} ms ({verdict} the goal of <= 1 ms)")


if __name__ == "__main__":
    asyncio.run(main())
