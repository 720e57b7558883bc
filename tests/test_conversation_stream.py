"""Streamed conversation turns (``DurableConversation.send_stream``) on the real dev server:
the turn's run events as they happen, then the ``Result`` (or ``RunError``) ``send`` gives."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker
from test_conversation import _until_update_admitted
from test_durable_approvals import transfer_agent

from golem.agent import Agent
from golem.client import ConversationClosedError, DurableAgent
from golem.errors import ModelConnectionError
from golem.events import RunEvent
from golem.messages import Message, ToolCall, Usage
from golem.models.base import ModelResponse, StreamDelta, ToolDefinition
from golem.models.function import FunctionModel
from golem.results import Result, RunError
from golem.worker import GolemPlugin

DEADLINE = 60.0


# Every test here twice: turns as child runs, and run inline in the conversation's workflow
# (docs/adr/0050-turns-inline.md), whose stream carries them.
pytestmark = pytest.mark.usefixtures("conversation_shapes")


def talker(gate: asyncio.Event | None = None) -> Agent[Any, Any]:
    """Streams ``N: `` and the prompt in two pieces (N counts user turns); waits for
    ``gate`` (when given) after the first piece, or before answering unstreamed. A prompt
    with "explode" calls a tool that always fails."""

    def exploding(messages: list[Message]) -> Message | None:
        if messages[-1].role == "user" and "explode" in messages[-1].content:
            return Message.assistant("", [ToolCall(id="x", name="explode", args="{}")])
        return None

    def answer(messages: list[Message]) -> tuple[str, str]:
        users = [m for m in messages if m.role == "user"]
        return f"{len(users)}: ", users[-1].content

    async def stream(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        if (call := exploding(messages)) is not None:
            yield ModelResponse(message=call, usage=Usage())
            return
        head, tail = answer(messages)
        yield StreamDelta(kind="text", text=head)
        if gate is not None:
            await gate.wait()
        yield StreamDelta(kind="text", text=tail)
        yield ModelResponse(message=Message.assistant(head + tail), usage=Usage(output_tokens=2))

    async def whole(messages: list[Message], tools: Any) -> Message:
        if (call := exploding(messages)) is not None:
            return call
        if gate is not None:
            await gate.wait()
        return Message.assistant("".join(answer(messages)))

    agent = Agent(FunctionModel(whole, stream_fn=stream), name="talker")

    @agent.tool(retry_attempts=1)
    def explode() -> str:
        """Always fails."""
        raise ValueError("boom")

    return agent


@asynccontextmanager
async def serving(client: Client, agent: Agent[Any, Any]) -> AsyncIterator[DurableAgent[Any]]:
    task_queue = f"cstream-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        yield DurableAgent(client, agent, task_queue=task_queue)


def texts(events: list[RunEvent]) -> str:
    return "".join(e.delta.text for e in events if e.kind == "text_delta" and e.delta)


def shared(result: Result[Any]) -> tuple[Any, ...]:
    """What two runs of the same turn share: not their ids, nor the usage (a streamed
    answer reports its own, an unstreamed one is estimated)."""
    messages = [(m.role, m.content, m.tool_name) for m in result.messages]
    owners = [result.messages.index(m) for m in result.messages if m.run_id == result.run_id]
    return messages, owners, result.output, result.requests, result.tool_calls, result.paused


async def test_a_streamed_turn_yields_deltas_before_it_ends_then_what_send_returns(
    temporal_client: Client, conversation_shapes: str
) -> None:
    gate = asyncio.Event()  # the model finishes only after the test has seen a delta
    async with serving(temporal_client, talker(gate)) as durable:
        conv = await durable.conversation()
        gate.set()
        first = await conv.send("hello")
        gate.clear()
        stream = conv.send_stream("again")
        events: list[RunEvent] = []
        async with asyncio.timeout(DEADLINE):
            async for event in stream:
                events.append(event)
                if event.kind == "text_delta":
                    gate.set()
        transcript = await conv.messages()
        runs = await conv.runs()
        twin = await durable.conversation()
        gate.set()
        await twin.send("hello")
        sent = await twin.send("again")

    result = stream.result
    kinds = [e.kind for e in events]
    assert kinds[0] == "model_start" and kinds[-1] == "model_end"
    assert kinds.index("text_delta") < kinds.index("model_end")
    assert texts(events) == "2: again"
    assert {(e.run_id, e.conversation_id) for e in events} == {(result.run_id, conv.id)}
    assert result.conversation_id == conv.id and runs == [first.run_id, result.run_id]
    assert result.messages == transcript  # the whole conversation, as send gives it
    assert shared(result) == shared(sent)
    assert result.usage == Usage(output_tokens=2)  # what the streamed response reported
    try:
        parent = (await temporal_client.get_workflow_handle(result.run_id).describe()).parent_id
    except RPCError as exc:
        parent = exc.status.name
    assert parent == (
        "NOT_FOUND" if conversation_shapes == "inline" else conv.id
    )  # inline: no child run


async def test_a_failing_streamed_turn_raises_the_run_error_send_raises(
    temporal_client: Client,
) -> None:
    async with serving(temporal_client, talker()) as durable:
        conv = await durable.conversation()
        await conv.send("first")
        stream = conv.send_stream("explode now")
        events: list[RunEvent] = []
        with pytest.raises(RunError) as streamed:
            async with asyncio.timeout(DEADLINE):
                async for event in stream:
                    events.append(event)
        twin = await durable.conversation()
        await twin.send("first")
        with pytest.raises(RunError) as sent:
            await twin.send("explode now")
        after = await conv.send("calmly")

    assert [e.kind for e in events][-2:] == ["tool_start", "tool_end"]
    assert streamed.value.stage == sent.value.stage == "tool"
    assert "boom" in streamed.value.detail and "boom" in sent.value.detail
    assert streamed.value.partial is not None and sent.value.partial is not None
    contents = [(m.role, m.content) for m in streamed.value.partial.messages]
    assert contents == [(m.role, m.content) for m in sent.value.partial.messages]
    with pytest.raises(RuntimeError, match="not finished"):
        _ = stream.result
    # The failed turn's evidence is in the conversation: the next turn goes on from it.
    assert after.output == "3: calmly"
    roles = ["user", "assistant", "user", "assistant", "tool", "user", "assistant"]
    assert [m.role for m in after.messages] == roles


async def test_a_refused_streamed_turn_raises_what_send_raises(temporal_client: Client) -> None:
    async with serving(temporal_client, talker()) as durable:
        conv = await durable.conversation()
        with pytest.raises(ValueError, match="needs a prompt or parts"):
            async with asyncio.timeout(DEADLINE):
                async for _ in conv.send_stream("  "):
                    pass
        await conv.close()
        with pytest.raises(ConversationClosedError):
            async with asyncio.timeout(DEADLINE):
                async for _ in conv.send_stream("late"):
                    pass
        assert await conv.runs() == []


async def test_a_streamed_turn_behind_a_turn_in_flight_streams_only_its_own_run(
    temporal_client: Client,
) -> None:
    gate = asyncio.Event()
    async with serving(temporal_client, talker(gate)) as durable:
        conv = await durable.conversation()
        first = asyncio.ensure_future(conv.send("first"))
        await _until_update_admitted(conv.handle, 1)  # it holds the conversation
        stream = conv.send_stream("second")
        events: list[RunEvent] = []

        async def consume() -> None:
            async for event in stream:
                events.append(event)

        consuming = asyncio.ensure_future(consume())
        await _until_update_admitted(conv.handle, 2)  # the streamed turn waits its turn
        gate.set()  # the first turn ends; the second starts, and streams ungated
        async with asyncio.timeout(DEADLINE):
            await consuming
            one = await first
        runs = await conv.runs()

    assert one.output == "1: first"
    assert texts(events) == "2: second"
    assert {e.run_id for e in events} == {stream.result.run_id}
    assert stream.result.run_id != one.run_id
    assert runs == [one.run_id, stream.result.run_id]


async def test_a_streamed_turn_that_waits_for_approvals_ends_with_its_paused_result(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serving(temporal_client, agent) as durable:
        conv = await durable.conversation()
        stream = conv.send_stream("move 5")
        async with asyncio.timeout(DEADLINE):
            events = [event async for event in stream]
        paused = stream.result
        done = await conv.approve({"t1": True})

    assert [c.id for c in paused.pending_approvals] == ["t1"] and executed == [5]
    # Every event before the pause, once: the model turn that asked for the calls.
    kinds = [e.kind for e in events if not e.kind.endswith("_delta")]
    assert kinds == ["model_start", "model_end"]
    calls = [e.delta.name for e in events if e.kind == "tool_call_delta" and e.delta]
    assert [name for name in calls if name] == ["transfer", "balance"]
    assert {e.run_id for e in events} == {paused.run_id}
    assert done.run_id == paused.run_id and done.output == "moved 5 | balance 100"


async def test_a_streamed_turn_read_on_after_its_approval_ends_with_its_final_result(
    temporal_client: Client,
) -> None:
    """Reading the rest of a paused turn's events after ``conv.approve`` (as ``stream.run``
    and ``stream.offset`` allow) ends with the turn's final ``Result``, not the pause."""
    executed: list[int] = []
    async with serving(temporal_client, transfer_agent(executed)) as durable:
        conv = await durable.conversation()
        stream = conv.send_stream("move 5")
        async with asyncio.timeout(DEADLINE):
            before = [event async for event in stream]
        assert stream.result.paused
        done = await conv.approve({"t1": True})
        rest = stream.run.stream(from_offset=stream.offset)
        async with asyncio.timeout(DEADLINE):
            after = [event async for event in rest]

    assert [e.kind for e in before if not e.kind.endswith("_delta")] == [
        "model_start",
        "model_end",
    ]
    kinds = [e.kind for e in after if not e.kind.endswith("_delta")]
    assert kinds.count("tool_end") == 2 and kinds[-2:] == ["model_start", "model_end"]
    assert done.output == "moved 5 | balance 100" and executed == [5]
    assert not rest.result.paused and rest.result.output == done.output
    assert rest.result.run_id == done.run_id and rest.result.messages == done.messages


async def test_a_streamed_turn_whose_model_call_is_retried_marks_the_restart(
    temporal_client: Client,
) -> None:
    """A model call that fails mid-answer is retried (attempt 2): the reader sees the turn
    restart, then only the retried answer's text."""
    calls: list[int] = []

    async def stream(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            yield StreamDelta(kind="text", text="a partial ")
            raise ModelConnectionError("the connection dropped mid-answer")
        yield StreamDelta(kind="text", text="the retried answer")
        yield ModelResponse(message=Message.assistant("the retried answer"), usage=Usage())

    def whole(messages: list[Message], tools: Any) -> Message:
        return Message.assistant("the retried answer")

    agent = Agent(FunctionModel(whole, stream_fn=stream), name=f"flaky_{uuid.uuid4().hex[:6]}")
    async with serving(temporal_client, agent) as durable:
        conv = await durable.conversation()
        turn = conv.send_stream("go")
        async with asyncio.timeout(DEADLINE):
            events = [event async for event in turn]

    kinds = [(e.kind, e.attempt) for e in events if e.kind != "text_delta"]
    assert kinds == [("model_start", 0), ("turn_restarted", 2), ("model_end", 0)]
    restart = [e.kind for e in events].index("turn_restarted")
    assert texts(events[restart:]) == "the retried answer"
    assert {e.run_id for e in events} == {turn.result.run_id}
    assert turn.result.output == "the retried answer" and calls == [1, 2]


async def test_a_streamed_turn_cannot_take_its_conversations_id_as_its_run_id(
    temporal_client: Client,
) -> None:
    """A turn's run id names its events on the stream: the conversation's own id is taken
    (by the conversation), as a child run finds it, and no turn runs under it."""
    async with serving(temporal_client, talker()) as durable:
        conv = await durable.conversation()
        async with asyncio.timeout(DEADLINE):
            said = texts([e async for e in conv.send_stream("one")])
            with pytest.raises(ValueError, match=rf"run id '{conv.id}' is taken"):
                _ = [e async for e in conv.send_stream("two", run_id=conv.id)]
        runs = await conv.runs()
    assert said == "1: one" and conv.id not in runs and len(runs) == 1
