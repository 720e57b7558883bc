"""Live streaming from durable runs vs in process, side by side in one run on the dev server.

1. Time to the first text delta and to the final result: in process (``agent.run_stream``),
   durably streamed (``DurableAgent.run_stream``) and durably without streaming
   (``DurableAgent.run``), with an offline model that yields N deltas with a fixed pause
   between them. Goals: first delta <= in process + 150 ms; total <= in process + 10%.
2. History events and bytes per turn of a 4-turn run (3 tool turns, then the answer; every
   turn streams N deltas), with and without streaming, and the signals that carried deltas;
   streamed with its items as JSON (golem's converter) and as the contrib's base64.

Run: .venv/bin/python benchmarks/streaming.py [--history]   (--history: section 2 only)
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.activities import streams
from golem.client import DurableAgent
from golem.events import RunEvent
from golem.models import FunctionModel, ModelResponse, StreamDelta, ToolDefinition
from golem.testing import dev_server
from golem.worker import GolemPlugin, stream_wire

DELTAS = 40
PAUSE = 0.025  # seconds between deltas: a 1 s answer of 40 pieces
PIECE = "word "
REPEATS = 9
TOOL_TURNS = 3
DEFAULT_INTERVAL = streams.BATCH_INTERVAL.total_seconds()
INTERVALS = (0.1, DEFAULT_INTERVAL, 0.3)


def streaming_agent(name: str, tool_turns: int = 0) -> Agent[Any, str]:
    """Each turn streams DELTAS pieces PAUSE apart; the first ``tool_turns`` turns end in a
    tool call."""

    def answer(messages: list[Message]) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        text = PIECE * DELTAS
        if done < tool_turns:
            call = ToolCall(id=f"c{done}", name="lookup", args=f'{{"n": {done}}}')
            return Message.assistant(text, [call])
        return Message.assistant(text)

    async def whole(messages: list[Message], tools: list[ToolDefinition]) -> Message:
        await asyncio.sleep(DELTAS * PAUSE)
        return answer(messages)

    async def stream(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        message = answer(messages)
        for index in range(DELTAS):
            if index:
                await asyncio.sleep(PAUSE)
            yield StreamDelta(kind="text", text=PIECE)
        for index, call in enumerate(message.tool_calls):
            yield StreamDelta(kind="tool_call", index=index, call_id=call.id, name=call.name)
            yield StreamDelta(kind="tool_call", index=index, text=call.args)
        yield ModelResponse(message=message)

    agent: Agent[Any, str] = Agent(FunctionModel(whole, stream), name=name)

    @agent.tool
    def lookup(n: int) -> str:
        """Look n up."""
        return f"result {n}"

    return agent


async def timed(events: AsyncIterable[RunEvent]) -> tuple[float, float]:
    """Seconds to the first text delta and to the end of the stream (the result)."""
    start = time.perf_counter()
    first = 0.0
    async for event in events:
        if event.kind == "text_delta" and not first:
            first = time.perf_counter() - start
    return first, time.perf_counter() - start


async def history_size(client: Client, run_id: str) -> tuple[int, int, int, int]:
    """Events, bytes, delta signals and poll updates of a run's history."""
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    signals = sum(1 for e in events if e.HasField("workflow_execution_signaled_event_attributes"))
    polls = sum(
        1 for e in events if e.HasField("workflow_execution_update_completed_event_attributes")
    )
    return len(events), sum(e.ByteSize() for e in events), signals, polls


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def with_interval(seconds: float, events: AsyncIterable[RunEvent]) -> AsyncIterable[RunEvent]:
    """The stream, its deltas batched every ``seconds`` (the worker runs in this process)."""
    streams.BATCH_INTERVAL = timedelta(seconds=seconds)
    return events


async def history_per_turn(client: Client, many: DurableAgent[str]) -> None:
    """Section 2: a run's history per turn, without a stream and streamed, its items
    written as JSON (golem's converter) and as the contrib's base64 (as before)."""
    turns = TOOL_TURNS + 1
    print(
        f"\n2. history per turn: {turns}-turn run ({TOOL_TURNS} tool turns), "
        f"{DELTAS} deltas = {len(PIECE) * DELTAS} chars of text per turn, one live reader"
    )
    print(
        "| {:<42} | {:>7} | {:>8} | {:>12} | {:>11} |".format(
            "", "events", "bytes", "delta signals", "poll updates"
        )
    )
    print("|" + "|".join("-" * (w + 2) for w in (42, 7, 8, 13, 12)) + "|")
    plain_run = await many.start("go")
    await plain_run.result()
    runs = [("durable run (no stream)", plain_run.run_id)]
    for interval in INTERVALS:
        stream = with_interval(interval, many.run_stream("go"))
        await timed(stream)
        runs.append((f"durable run_stream, batch {interval * 1000:.0f} ms", stream.run.run_id))
    json_items = runs[-2][1]
    wire_types, stream_wire.WIRE_TYPES = stream_wire.WIRE_TYPES, ()  # the contrib's own wire
    try:
        stream = with_interval(DEFAULT_INTERVAL, many.run_stream("go"))
        await timed(stream)
    finally:
        stream_wire.WIRE_TYPES = wire_types
    base64_items = stream.run.run_id
    runs.append((f"  same, batch {DEFAULT_INTERVAL * 1000:.0f} ms, base64 items", base64_items))
    sizes: dict[str, int] = {}
    for name, run_id in runs:
        events, size, signals, polls = await history_size(client, run_id)
        sizes[run_id] = size
        print(
            f"| {name:<42} | {events / turns:7.1f} | {size / turns:8.0f} | "
            f"{signals / turns:13.1f} | {polls / turns:12.1f} |"
        )
    print(
        f"JSON items / base64 items, bytes per streamed turn: "
        f"{sizes[json_items] / sizes[base64_items]:.2f}x; "
        f"streamed (JSON) / no stream: {sizes[json_items] / sizes[plain_run.run_id]:.2f}x"
    )


async def main() -> None:
    async with dev_server() as env:
        client = env.client
        task_queue = f"bench-stream-{uuid.uuid4().hex[:8]}"
        one, multi = streaming_agent("one"), streaming_agent("multi", TOOL_TURNS)
        async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(one, multi)]):
            durable: DurableAgent[str] = DurableAgent(client, one, task_queue=task_queue)
            many: DurableAgent[str] = DurableAgent(client, multi, task_queue=task_queue)
            await timed(durable.run_stream("warm up"))
            if "--history" in sys.argv:
                await history_per_turn(client, many)
                return
            local: list[tuple[float, float]] = []
            plain: list[float] = []
            streamed: dict[float, list[tuple[float, float]]] = {i: [] for i in INTERVALS}
            for _ in range(REPEATS):  # interleaved, so the machine's load hits all alike
                local.append(await timed(one.run_stream("go")))
                start = time.perf_counter()
                await durable.run("go")
                plain.append(time.perf_counter() - start)
                for interval in INTERVALS:
                    stream = with_interval(interval, durable.run_stream("go"))
                    streamed[interval].append(await timed(stream))

            local_first = statistics.median(f for f, _ in local)
            local_total = statistics.median(t for _, t in local)
            print(
                f"1. one turn: {DELTAS} deltas {PAUSE * 1000:.0f} ms apart; median of {REPEATS}, "
                f"interleaved; default batch interval {DEFAULT_INTERVAL * 1000:.0f} ms"
            )
            header = ("", "first delta", "vs in proc", "total", "vs in proc")
            print("| {:<34} | {:>11} | {:>10} | {:>8} | {:>10} |".format(*header))
            print("|" + "|".join("-" * (w + 2) for w in (34, 11, 10, 8, 10)) + "|")

            def row(name: str, first: float | None, total: float) -> None:
                first_text = "-" if first is None else ms(first)
                vs = "-" if first is None else f"+{ms(first - local_first)}"
                share = f"{(total / local_total - 1) * 100:+.1f}%"
                print(
                    f"| {name:<34} | {first_text:>11} | {vs:>10} | {ms(total):>8} | {share:>10} |"
                )

            row("in process run_stream", local_first, local_total)
            row("durable run (no stream)", None, statistics.median(plain))
            for interval, samples in streamed.items():
                first = statistics.median(f for f, _ in samples)
                total = statistics.median(t for _, t in samples)
                row(f"durable run_stream, batch {interval * 1000:.0f} ms", first, total)

            await history_per_turn(client, many)
            streams.BATCH_INTERVAL = timedelta(seconds=DEFAULT_INTERVAL)


if __name__ == "__main__":
    asyncio.run(main())
