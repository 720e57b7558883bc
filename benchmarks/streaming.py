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
from dataclasses import dataclass
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
from golem.wire import stream_wire
from golem.worker import GolemPlugin

DELTAS = 40
PAUSE = 0.025  # seconds between deltas: a 1 s answer of 40 pieces
PIECE = "word "
REPEATS = 9
TOOL_TURNS = 3
DEFAULT_INTERVAL = streams.BATCH_INTERVAL.total_seconds()
INTERVALS = (0.1, DEFAULT_INTERVAL, 0.3)
HISTORY_REPEATS = 3
SIGNAL = "workflow_execution_signaled_event_attributes"
POLL = "workflow_execution_update_completed_event_attributes"


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


@dataclass
class History:
    events: int
    size: int
    signals: int
    polls: int
    carried: int
    """Bytes of the stream's payloads: publish signals' inputs and poll updates' results."""


async def history_size(client: Client, run_id: str) -> History:
    """What a run's history holds, and what of it carries its stream."""
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    signals = [e.workflow_execution_signaled_event_attributes for e in events if e.HasField(SIGNAL)]
    polls = [
        e.workflow_execution_update_completed_event_attributes for e in events if e.HasField(POLL)
    ]
    carried = sum(p.ByteSize() for s in signals for p in s.input.payloads)
    carried += sum(p.ByteSize() for u in polls for p in u.outcome.success.payloads)
    return History(
        len(events), sum(e.ByteSize() for e in events), len(signals), len(polls), carried
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def with_interval(seconds: float, events: AsyncIterable[RunEvent]) -> AsyncIterable[RunEvent]:
    """The stream, its deltas batched every ``seconds`` (the worker runs in this process)."""
    streams.BATCH_INTERVAL = timedelta(seconds=seconds)
    return events


async def streamed_run(many: DurableAgent[str], interval: float, json_items: bool = True) -> str:
    """A streamed run read live to its end; its items JSON or the contrib's base64."""
    wire_types = stream_wire.WIRE_TYPES
    if not json_items:
        stream_wire.WIRE_TYPES = ()  # golem's converter leaves the contrib's wire as it is
    try:
        stream = with_interval(interval, many.run_stream("go"))
        await timed(stream)
    finally:
        stream_wire.WIRE_TYPES = wire_types
    return stream.run.run_id


async def history_per_turn(client: Client, many: DurableAgent[str]) -> None:
    """Section 2: a run's history per turn, without a stream and streamed; at the default
    interval its items written as JSON (golem's converter) and as the contrib's base64
    (as before), HISTORY_REPEATS runs each, interleaved, median."""
    turns = TOOL_TURNS + 1
    print(
        f"\n2. history per turn: {turns}-turn run ({TOOL_TURNS} tool turns), "
        f"{DELTAS} deltas = {len(PIECE) * DELTAS} chars of text per turn, one live reader"
    )
    widths = (46, 7, 8, 13, 12, 14)
    heads = ("", "events", "bytes", "delta signals", "poll updates", "stream bytes")
    print("| " + " | ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")

    def row(name: str, runs: list[History]) -> float:
        def median(field: str) -> float:
            return statistics.median(getattr(r, field) for r in runs) / turns

        cells = [median(f) for f in ("events", "size", "signals", "polls", "carried")]
        print(
            f"| {name:<46} | {cells[0]:7.1f} | {cells[1]:8.0f} | {cells[2]:13.1f} | "
            f"{cells[3]:12.1f} | {cells[4]:14.0f} |"
        )
        return cells[4]

    plain_run = await many.start("go")
    await plain_run.result()
    row("durable run (no stream)", [await history_size(client, plain_run.run_id)])
    for interval in (i for i in INTERVALS if i != DEFAULT_INTERVAL):
        run_id = await streamed_run(many, interval)
        row(
            f"durable run_stream, batch {interval * 1000:.0f} ms",
            [await history_size(client, run_id)],
        )
    as_json: list[History] = []
    as_base64: list[History] = []
    for _ in range(HISTORY_REPEATS):
        as_json.append(await history_size(client, await streamed_run(many, DEFAULT_INTERVAL)))
        as_base64.append(
            await history_size(client, await streamed_run(many, DEFAULT_INTERVAL, False))
        )
    batch = f"batch {DEFAULT_INTERVAL * 1000:.0f} ms"
    json_carried = row(f"durable run_stream, {batch}, JSON items", as_json)
    base64_carried = row(f"durable run_stream, {batch}, base64 items", as_base64)
    print(
        f"stream bytes per turn, JSON items / base64 items (before): "
        f"{json_carried / base64_carried:.2f}x; history bytes per turn: "
        f"{statistics.median(r.size for r in as_json) / statistics.median(r.size for r in as_base64):.2f}x"
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
