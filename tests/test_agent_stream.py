"""Streaming: events as they happen, each carrying the run's ids; the same Result as ``run``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import pytest
from agents import ask, call, scripted

from golem.agent import Agent, RunStream
from golem.events import RunEvent
from golem.ids import new_id
from golem.messages import Message, Usage
from golem.models.base import ModelResponse, StreamDelta, ToolDefinition
from golem.models.function import FunctionModel
from golem.results import RunError
from golem.tools import Canceled

HANDSHAKE_TIMEOUT = 5.0


def echo_agent() -> Agent[Any, Any]:
    agent, _ = scripted([ask(call("c1", "echo", text="x")), Message.assistant("done")])
    agent.tool(name="echo")(lambda text: text)
    return agent


async def collect(stream: AsyncIterable[RunEvent]) -> list[RunEvent]:
    return [event async for event in stream]


async def test_the_streamed_result_equals_what_run_gives() -> None:
    run_id, stream_run_id, conversation_id = new_id(), new_id(), new_id()
    ran = await echo_agent().run("go", run_id=run_id, conversation_id=conversation_id)

    stream = echo_agent().run_stream("go", run_id=stream_run_id, conversation_id=conversation_id)
    await collect(stream)

    def same_run(messages: list[Message]) -> list[Message]:
        return [m.stamped(run_id, conversation_id) for m in messages]

    assert stream.result.output == ran.output
    assert same_run(stream.result.messages) == ran.messages
    assert (stream.result.usage, stream.result.requests, stream.result.tool_calls) == (
        ran.usage,
        ran.requests,
        ran.tool_calls,
    )


async def test_every_event_carries_the_run_and_conversation_ids() -> None:
    stream = echo_agent().run_stream("go")

    events = await collect(stream)

    assert events
    assert {(e.run_id, e.conversation_id) for e in events} == {
        (stream.result.run_id, stream.result.conversation_id)
    }


async def test_a_tool_turn_streams_model_then_tool_events_in_order() -> None:
    stream = echo_agent().run_stream("go")

    events = await collect(stream)

    assert [(e.kind, e.turn) for e in events] == [
        ("model_start", 1),
        ("tool_call_delta", 1),
        ("tool_call_delta", 1),
        ("model_end", 1),
        ("tool_start", 1),
        ("tool_end", 1),
        ("model_start", 2),
        ("text_delta", 2),
        ("model_end", 2),
    ]
    deltas = [e.delta for e in events if e.kind == "tool_call_delta"]
    assert deltas == [
        StreamDelta(kind="tool_call", index=0, call_id="c1", name="echo"),
        StreamDelta(kind="tool_call", index=0, text='{"text": "x"}'),
    ]
    tool_end = events[5]
    assert tool_end.call == call("c1", "echo", text="x")
    assert tool_end.message == stream.result.messages[2]
    assert events[-1].message == stream.result.messages[-1]


async def test_a_stream_fn_serves_custom_deltas_as_they_arrive() -> None:
    async def pieces(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        for text in ("Hel", "lo", "!"):
            yield StreamDelta(kind="text", text=text)
        yield ModelResponse(message=Message.assistant("Hello!"), usage=Usage(output_tokens=3))

    model = FunctionModel(lambda m, t: Message.assistant("unused"), stream_fn=pieces)
    stream: RunStream[str] = Agent(model).run_stream("hi")

    events = await collect(stream)

    assert [e.delta.text for e in events if e.kind == "text_delta" and e.delta] == [
        "Hel",
        "lo",
        "!",
    ]
    assert stream.result.output == "Hello!"
    assert stream.result.usage == Usage(output_tokens=3)
    assert len(model.requests) == 1


async def test_concurrent_tools_both_start_before_either_ends() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()
    agent, _ = scripted([ask(call("c1", "a"), call("c2", "b")), Message.assistant("ok")])

    @agent.tool
    async def a() -> str:
        """Waits for b."""
        a_started.set()
        await asyncio.wait_for(b_started.wait(), HANDSHAKE_TIMEOUT)
        return "a"

    @agent.tool
    async def b() -> str:
        """Waits for a."""
        b_started.set()
        await asyncio.wait_for(a_started.wait(), HANDSHAKE_TIMEOUT)
        return "b"

    events = await collect(agent.run_stream("go"))

    tools = [(e.kind, e.call.id) for e in events if e.call is not None]
    assert tools == [
        ("tool_start", "c1"),
        ("tool_start", "c2"),
        ("tool_end", "c1"),
        ("tool_end", "c2"),
    ]


async def test_a_deliberate_cancel_streams_a_canceled_event_then_raises() -> None:
    agent, _ = scripted([ask(call("c1", "stop")), Message.assistant("never")])

    @agent.tool
    def stop() -> str:
        """Stops."""
        raise Canceled("user left")

    stream = agent.run_stream("go")
    events: list[RunEvent] = []
    with pytest.raises(RunError) as caught:
        async for event in stream:
            events.append(event)

    assert caught.value.stage == "canceled"
    assert events[-1].kind == "canceled"
    assert events[-1].reason == "user left"
    partial = caught.value.partial
    assert partial is not None
    assert (events[-1].run_id, events[-1].conversation_id) == (
        partial.run_id,
        partial.conversation_id,
    )


async def test_the_result_is_unavailable_before_the_stream_is_exhausted() -> None:
    stream = echo_agent().run_stream("go")

    with pytest.raises(RuntimeError, match="iterate the stream to the end first"):
        _ = stream.result
