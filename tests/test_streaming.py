"""Live streams of durable runs, on the real dev server: the events of ``agent.run_stream``,
each once and in order, for late subscribers, reconnects, crashes and cancellation."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import json
import os
import pty
import signal
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import ask, call, scripted
from cli_agents import echo
from crash_agents import AGENTS as CRASH_AGENTS
from crash_agents import handing_crash, stream_crash
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowHistory
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import (
    PollResult,
    PublishEntry,
    PublishInput,
    WorkflowStreamClient,
)
from temporalio.contrib.workflow_streams._types import _WorkflowStreamWireItem
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from test_cli import GOLEM
from test_crash import crash_dir, doomed_worker
from waiting import eventually, within

from golem import streaming
from golem.activities.streams import coalesce
from golem.agent import Agent
from golem.client import DurableAgent, DurableRunStream
from golem.events import RunEvent
from golem.messages import Message, Usage
from golem.models.base import ModelHTTPError, ModelResponse, StreamDelta, ToolDefinition
from golem.models.function import FunctionModel
from golem.results import RunError
from golem.streaming import write_text
from golem.wire import StreamEvent, names
from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin

DEADLINE = 60.0
_ = crash_dir  # a fixture, shared with test_crash
SIGNALED = "workflow_execution_signaled_event_attributes"


def echo_agent(name: str = "echo") -> Agent[Any, Any]:
    agent, _ = scripted([ask(call("c1", "echo", text="x")), Message.assistant("done")], name=name)
    agent.tool(name="echo")(lambda text: text)
    return agent


def piece_agent(pieces: Sequence[str], gate: asyncio.Event | None = None) -> Agent[Any, Any]:
    """Streams ``pieces`` as text deltas; waits for ``gate`` (when given) after the first."""

    async def stream(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        for index, text in enumerate(pieces):
            yield StreamDelta(kind="text", text=text)
            if index == 0 and gate is not None:
                await gate.wait()
        yield ModelResponse(
            message=Message.assistant("".join(pieces)), usage=Usage(output_tokens=3)
        )

    model = FunctionModel(lambda m, t: Message.assistant("".join(pieces)), stream_fn=stream)
    return Agent(model, name="pieces")


@asynccontextmanager
async def serving(
    env: WorkflowEnvironment, *agents: Agent[Any, Any]
) -> AsyncIterator[DurableAgent[Any]]:
    """A worker for ``agents`` on a fresh task queue; a DurableAgent for the first."""
    task_queue = f"stream-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(*agents, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
        yield DurableAgent(env.client, agents[0], task_queue=task_queue)


async def collect(stream: AsyncIterable[RunEvent]) -> list[RunEvent]:
    async with asyncio.timeout(DEADLINE):
        return [event async for event in stream]


def texts(events: Sequence[RunEvent]) -> str:
    return "".join(e.delta.text for e in events if e.kind == "text_delta" and e.delta)


def shape(events: Sequence[RunEvent]) -> list[tuple[str, int]]:
    """Kinds and turns, adjacent deltas of one kind counted once (the stream batches them)."""
    out: list[tuple[str, int]] = []
    for event in events:
        key = (event.kind, event.turn)
        if not (event.kind.endswith("_delta") and out and out[-1] == key):
            out.append(key)
    return out


# -- batching -------------------------------------------------------------------------


deltas = st.lists(
    st.builds(
        StreamDelta,
        kind=st.sampled_from(["text", "thinking", "tool_call"]),
        text=st.text(max_size=5),
        index=st.integers(0, 2),
        call_id=st.sampled_from(["", "", "c1"]),
        name=st.sampled_from(["", "", "f"]),
    ),
    max_size=30,
)


@given(deltas)
def test_coalescing_keeps_every_piece_of_text_in_order_and_never_grows(
    pieces: list[StreamDelta],
) -> None:
    merged = coalesce(pieces)

    def per_stream(items: list[StreamDelta]) -> dict[tuple[str, int], str]:
        out: dict[tuple[str, int], str] = {}
        for d in items:
            key = (d.kind, d.index if d.kind == "tool_call" else 0)
            out[key] = out.get(key, "") + d.text
        return out

    assert per_stream(merged) == per_stream(pieces)
    assert len(merged) <= len(pieces)
    assert [(d.call_id, d.name) for d in merged if d.call_id or d.name] == [
        (d.call_id, d.name) for d in pieces if d.call_id or d.name
    ]


def test_coalescing_merges_a_burst_of_text_into_one_piece() -> None:
    burst = [StreamDelta(kind="text", text=t) for t in ("a", "b", "c")]
    call_start = StreamDelta(kind="tool_call", index=0, call_id="c1", name="f")
    args = StreamDelta(kind="tool_call", index=0, text="{}")

    assert coalesce([*burst, call_start, args]) == [
        StreamDelta(kind="text", text="abc"),
        StreamDelta(kind="tool_call", index=0, call_id="c1", name="f", text="{}"),
    ]


# -- the wire: items readable in the UI ----------------------------------------------


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
items = st.lists(
    st.one_of(
        json_values.map(lambda v: golem_data_converter.payload_converter.to_payload(v)),
        st.binary().map(lambda b: Payload(metadata={"encoding": b"binary/plain"}, data=b)),
    ),
    max_size=4,
)


def wire(payload: Payload) -> str:
    return base64.b64encode(payload.SerializeToString()).decode()


def unwire(data: str) -> Payload:
    payload = Payload()
    payload.ParseFromString(base64.b64decode(data))
    return payload


@given(items, st.text(max_size=8), st.integers(0, 2**31))
def test_a_published_batch_reads_back_with_every_item_equal(
    payloads: list[Payload], publisher: str, sequence: int
) -> None:
    sent = PublishInput([PublishEntry(names.TOPIC, wire(p)) for p in payloads], publisher, sequence)
    converter = golem_data_converter.payload_converter
    back = converter.from_payload(converter.to_payload(sent), PublishInput)

    assert (back.publisher_id, back.sequence) == (publisher, sequence)
    decode = golem_data_converter.payload_converter.from_payload
    for original, entry in zip(payloads, back.items, strict=True):
        echoed = unwire(entry.data)
        assert echoed.metadata == original.metadata
        if original.metadata["encoding"] == b"json/plain":
            assert decode(echoed) == decode(original)
        else:
            assert echoed.data == original.data  # not JSON: its base64 stays as it was


def poll_answer(events: Sequence[object], offset: int = 0, more: bool = False) -> Payload:
    """A poll's answer as a run's workflow writes it (its items in golem's converter)."""
    converter = golem_data_converter.payload_converter
    items = [
        _WorkflowStreamWireItem(names.TOPIC, wire(converter.to_payload(e)), offset + i)
        for i, e in enumerate(events)
    ]
    return converter.to_payload(PollResult(items, offset + len(items), more))


def test_a_polls_answer_reads_into_the_events_its_items_hold() -> None:
    events = [
        StreamEvent(kind="model_start", turn=1, agent="a"),
        StreamEvent.of_delta(StreamDelta(kind="text", text="héllo"), 1, 2, of_run="r1"),
        StreamEvent(kind="end"),
    ]
    items, offset, more = streaming._read_poll(poll_answer([*events], offset=4, more=True))

    assert [(i.offset, i.event) for i in items] == [(4, events[0]), (5, events[1]), (6, events[2])]
    assert (offset, more) == (7, True)
    # One that is no event is refused as golem's converter refuses it, saying why.
    with pytest.raises(ApplicationError, match="does not decode as StreamEvent: kind"):
        streaming._read_poll(poll_answer([events[0], {"kind": "no such kind"}]))


class _AnsweredOnce:
    """The handle of a run whose stream answers one poll with ``answer``; the next waits."""

    id = "r1"

    def __init__(self, answer: Payload) -> None:
        self.answers, self.asked = [answer], 0

    async def start_update(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        if not self.answers:
            await asyncio.Event().wait()  # nothing more is published
        answer = RawValue(self.answers.pop())

        async def result() -> RawValue:
            return answer

        return SimpleNamespace(workflow_run_id="w1", result=result)


async def test_a_stream_waiting_in_its_next_poll_holds_nothing_it_read() -> None:
    """An open stream waits most of its life: in its next poll, it holds none of the
    events (nor the answer) it has handed on."""
    events = [StreamEvent(kind="model_start", turn=1), StreamEvent(kind="end")]
    handle = _AnsweredOnce(poll_answer(events))
    reader = streaming._subscribe(handle, 0)  # type: ignore[arg-type]
    read = [(await anext(reader)).event for _ in events]
    waiting = asyncio.ensure_future(anext(reader))
    try:
        await eventually(lambda: handle.asked == 2, what="the next poll", interval=0)
        held = list(reader.ag_frame.f_locals.values())  # type: ignore[union-attr]
    finally:
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)

    assert read == events
    kept = [v for v in held if isinstance(v, RawValue | list) and v]
    assert kept == []


async def test_a_streamed_runs_history_holds_its_items_as_json(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with serving(temporal_env, echo_agent()) as durable:
        stream = durable.run_stream("go")
        events = await collect(stream)
        history = await stream.run.handle.fetch_history()

    published = [
        json.loads(e.workflow_execution_signaled_event_attributes.input.payloads[0].data)
        for e in history.events
        if e.HasField(SIGNALED)
    ]
    polled = [
        json.loads(
            e.workflow_execution_update_completed_event_attributes.outcome.success.payloads[0].data
        )
        for e in history.events
        if e.HasField("workflow_execution_update_completed_event_attributes")
    ]
    written = [item for batch in published + polled for item in batch["items"]]
    assert published and polled
    assert all("data" not in item for item in written), written
    kinds = {item["json"]["kind"] for item in written}
    assert kinds >= {"model_start", "tool_call_delta", "text_delta", "end"}
    assert texts(events) == "done"


# -- live runs ---------------------------------------------------------------------


async def test_deltas_arrive_while_the_run_is_still_going(
    temporal_env: WorkflowEnvironment,
) -> None:
    gate = asyncio.Event()  # the model finishes only after the test has seen its first piece
    agent = piece_agent(["Hel", "lo", "!"], gate)
    async with serving(temporal_env, agent) as durable:
        stream = durable.run_stream("hi")
        events: list[RunEvent] = []
        async with asyncio.timeout(DEADLINE):
            async for event in stream:
                events.append(event)
                if event.kind == "text_delta":
                    gate.set()

    assert shape(events) == [("model_start", 1), ("text_delta", 1), ("model_end", 1)]
    assert events[1].delta == StreamDelta(kind="text", text="Hel")
    assert texts(events) == "Hello!"
    assert stream.result.output == "Hello!"
    assert stream.result.usage == Usage(output_tokens=3)
    assert {(e.run_id, e.conversation_id) for e in events} == {
        (stream.result.run_id, stream.result.conversation_id)
    }


async def test_a_durable_stream_yields_the_events_and_result_of_an_in_process_one(
    temporal_env: WorkflowEnvironment,
) -> None:
    local = echo_agent().run_stream("go")
    local_events = await collect(local)
    async with serving(temporal_env, echo_agent()) as durable:
        stream = durable.run_stream("go")
        events = await collect(stream)

    assert shape(events) == shape(local_events)
    assert [e.call for e in events if e.call] == [e.call for e in local_events if e.call]
    result = stream.result
    assert result.output == local.result.output == "done"
    assert [e.message for e in events if e.kind in ("model_end", "tool_end")] == [
        result.messages[1],
        result.messages[2],
        result.messages[3],
    ]
    assert events[-1].response is not None
    assert events[-1].response.message == local_events[-1].response.message  # type: ignore[union-attr]
    tool_deltas = [e.delta for e in events if e.kind == "tool_call_delta"]
    assert tool_deltas == [
        StreamDelta(kind="tool_call", index=0, call_id="c1", name="echo", text='{"text": "x"}')
    ]


async def test_a_late_subscriber_gets_every_event_once_in_order(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with serving(temporal_env, echo_agent()) as durable:
        live = durable.run_stream("go")
        events = await collect(live)
        late = live.run.stream()
        replayed = await collect(late)

    assert replayed == events
    assert late.result == live.result


async def test_a_subscriber_attaching_mid_run_gets_the_events_before_it_came(
    temporal_env: WorkflowEnvironment,
) -> None:
    gate = asyncio.Event()
    agent = piece_agent(["early ", "later"], gate)
    async with serving(temporal_env, agent) as durable:
        live = durable.run_stream("go")
        events = aiter(live)
        first: list[RunEvent] = []
        async with asyncio.timeout(DEADLINE):
            while not first or first[-1].kind != "text_delta":
                first.append(await anext(events))
            late = live.run.stream()  # the run waits on the gate: it is mid-answer
            late_events = aiter(late)
            caught_up = [await anext(late_events) for _ in first]
        gate.set()
        rest = await collect(events)
        late_rest = await collect(late_events)

    assert caught_up == first
    assert caught_up + late_rest == first + rest
    assert texts(first + rest) == "early later"
    assert late.result == live.result


async def test_a_reconnect_from_an_offset_gets_the_rest_exactly_once(
    temporal_env: WorkflowEnvironment,
) -> None:
    gate = asyncio.Event()
    agent = piece_agent(["one ", "two ", "three"], gate)
    async with serving(temporal_env, agent) as durable:
        first = durable.run_stream("count")
        before: list[RunEvent] = []
        async with asyncio.timeout(DEADLINE):
            async for event in first:
                before.append(event)
                if event.kind == "text_delta":
                    break  # the client goes away mid-answer
        resumed = (await durable.attach(first.run.run_id)).stream(from_offset=first.offset)
        gate.set()
        after = await collect(resumed)
        everything = await collect(first.run.stream())

    assert before + after == everything
    assert texts(everything) == "one two three"
    assert resumed.result.output == "one two three"


FRESH = StreamDelta(kind="text", text="fresh ")
STALE = StreamDelta(kind="text", text="stale")


@pytest.mark.parametrize(
    "items",
    [
        # What a zombie first attempt and a retry would publish, interleaved.
        [
            StreamEvent(kind="turn_restarted", turn=1, attempt=3),
            StreamEvent.of_delta(STALE, turn=1, attempt=2),
            StreamEvent.of_delta(FRESH, turn=1, attempt=3),
        ],
        # Attempt 2 timed out before it called the model (reading its request), attempt 3
        # answered, then the zombie attempt 2 went on: its restart comes after attempt 3's
        # (crash_trials.py --shape inline saw a turn's text come out empty so).
        [
            StreamEvent(kind="turn_restarted", turn=1, attempt=3),
            StreamEvent.of_delta(FRESH, turn=1, attempt=3),
            StreamEvent(kind="turn_restarted", turn=1, attempt=2),
            StreamEvent.of_delta(STALE, turn=1, attempt=2),
        ],
    ],
    ids=["late-piece", "late-restart"],
)
async def test_the_late_items_of_a_superseded_attempt_are_dropped(
    temporal_env: WorkflowEnvironment, items: list[StreamEvent]
) -> None:
    gate = asyncio.Event()
    agent = piece_agent(["first ", "second"], gate)
    async with serving(temporal_env, agent) as durable:
        stream = durable.run_stream("go")
        events = aiter(stream)
        seen: list[RunEvent] = []
        async with asyncio.timeout(DEADLINE):
            while not seen or seen[-1].kind != "text_delta":
                seen.append(await anext(events))
        publisher = WorkflowStreamClient(stream.run.handle, client=temporal_env.client)
        topic = publisher.topic(names.TOPIC, type=StreamEvent)
        for item in items:
            topic.publish(item)
        await publisher.flush()
        gate.set()
        seen += await collect(events)

    assert [(e.kind, e.attempt) for e in seen[:4]] == [
        ("model_start", 0),
        ("text_delta", 0),
        ("turn_restarted", 3),
        ("text_delta", 0),
    ]
    assert [e.attempt for e in seen if e.kind == "turn_restarted"] == [3]
    # The real call, attempt 1, is a zombie here too: its later "second" is dropped.
    assert texts(seen) == "first fresh "
    assert seen[-1].kind == "model_end"


async def test_cancelling_a_streamed_run_ends_the_stream_with_run_error_canceled(
    temporal_env: WorkflowEnvironment,
) -> None:
    never = asyncio.Event()
    agent = piece_agent(["thinking about it", "never sent"], never)
    async with serving(temporal_env, agent) as durable:
        stream = durable.run_stream("hi")
        events: list[RunEvent] = []
        with pytest.raises(RunError) as caught:
            async with asyncio.timeout(DEADLINE):
                async for event in stream:
                    events.append(event)
                    if event.kind == "text_delta":
                        await stream.run.cancel()

    assert caught.value.stage == "canceled"
    assert texts(events) == "thinking about it"


async def test_a_failing_run_ends_its_stream_with_the_same_run_error_as_run(
    temporal_env: WorkflowEnvironment,
) -> None:
    refusal = ModelHTTPError(404, "model_not_found", provider="test")
    failing, _ = scripted([ask(call("c1", "echo", text="x")), refusal], name="failing")
    failing.tool(name="echo")(lambda text: text)
    async with serving(temporal_env, failing) as durable:
        stream = durable.run_stream("go")
        events: list[RunEvent] = []
        with pytest.raises(RunError) as streamed:
            async with asyncio.timeout(DEADLINE):
                async for event in stream:
                    events.append(event)
        with pytest.raises(RunError) as waited:
            await stream.run.result()

    assert (streamed.value.stage, str(streamed.value)) == (waited.value.stage, str(waited.value))
    assert streamed.value.stage == "model"
    assert streamed.value.partial == waited.value.partial
    assert [e.kind for e in events][-2:] == ["tool_end", "model_start"]


async def test_a_burst_of_deltas_costs_a_few_signals_not_one_per_token(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = piece_agent([f"t{i} " for i in range(200)])
    async with serving(temporal_env, agent) as durable:
        stream = durable.run_stream("go")
        events = await collect(stream)
        history = await stream.run.handle.fetch_history()

    signals = [
        e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert texts(events) == "".join(f"t{i} " for i in range(200))
    assert 1 <= len(signals) <= 3
    assert len([e for e in events if e.kind == "text_delta"]) == len(signals)


async def test_a_recorded_streamed_run_replays_deterministically(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = echo_agent()
    async with serving(temporal_env, agent) as durable:
        stream = durable.run_stream("go")
        await collect(stream)
        await collect(stream.run.stream())  # a late reader's polls are in the history too
        history = await stream.run.handle.fetch_history()

    recorded = WorkflowHistory.from_json(stream.run.run_id, history.to_json())
    replayer = Replayer(workflows=[], plugins=[GolemPlugin(echo_agent())])
    result = await replayer.replay_workflow(recorded, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def test_a_run_started_without_streaming_streams_its_turns_without_deltas(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with serving(temporal_env, echo_agent()) as durable:
        run = await durable.start("go")
        stream: DurableRunStream[Any] = run.stream()
        events = await collect(stream)

    assert [e.kind for e in events] == [
        "model_start",
        "model_end",
        "tool_start",
        "tool_end",
        "model_start",
        "model_end",
    ]
    assert stream.result.output == "done"


def test_a_negative_offset_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="from_offset must be 0 or more, not -1"):
        DurableRunStream(lambda: None, from_offset=-1)  # type: ignore[arg-type,return-value]


async def killed_mid_answer(
    env: WorkflowEnvironment,
    task_queue: str,
    crash_dir: Path,
    stream: Callable[[], Awaitable[DurableRunStream[Any]]],
) -> list[RunEvent]:
    """Every event of ``stream()`` (made once a doomed worker is up): its worker SIGKILLed
    after the first text piece, the rest read once a fresh worker took over."""
    seen: list[RunEvent] = []
    async with doomed_worker(env, task_queue, crash_dir) as process:
        events = aiter(await stream())
        async with asyncio.timeout(DEADLINE):
            while not seen or seen[-1].kind != "text_delta":
                seen.append(await anext(events))
        process.send_signal(signal.SIGKILL)  # mid-answer: its first piece is out
        await process.wait()
    plugin = GolemPlugin(*CRASH_AGENTS, heartbeat_timeout=timedelta(seconds=2))
    async with Worker(env.client, task_queue=task_queue, plugins=[plugin]):
        seen += await collect(events)
    return seen


async def test_a_worker_killed_mid_stream_yields_a_marked_restart_and_the_retried_answer(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    task_queue = f"crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(
        temporal_env.client, stream_crash.name, task_queue=task_queue
    )
    stream = durable.run_stream("go")

    async def started() -> DurableRunStream[str]:
        return stream

    seen = await killed_mid_answer(temporal_env, task_queue, crash_dir, started)

    assert [(e.kind, e.turn, e.attempt) for e in seen] == [
        ("model_start", 1, 0),
        ("text_delta", 1, 0),
        ("turn_restarted", 1, 2),
        *[("text_delta", 1, 0)] * (len(seen) - 4),
        ("model_end", 1, 0),
    ]
    restart = [e.kind for e in seen].index("turn_restarted")
    assert texts(seen[:restart]) == "a partial "
    assert texts(seen[restart:]) == "the retried answer"
    assert stream.result.output == "the retried answer"
    assert stream.result.requests == 1
    assert (crash_dir / "executions").read_text().split() == ["stream", "stream"]


async def test_an_inline_turn_streams_through_a_worker_killed_mid_answer(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    """The same marked restart for a turn run inline: its conversation's stream carries the
    retried call's items after the takeover, each naming the turn."""
    task_queue = f"crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(
        temporal_env.client, stream_crash.name, task_queue=task_queue
    )
    streams: list[DurableRunStream[Any]] = []

    async def sent() -> DurableRunStream[Any]:
        conv = await durable.conversation(inline_turns=True)  # a worker is up to take it
        streams.append(conv.send_stream("go"))
        return streams[0]

    seen = await killed_mid_answer(temporal_env, task_queue, crash_dir, sent)
    stream = streams[0]

    shape = [(e.kind, e.attempt) for e in seen if e.kind != "text_delta"]
    assert shape == [("model_start", 0), ("turn_restarted", 2), ("model_end", 0)]
    restart = [e.kind for e in seen].index("turn_restarted")
    assert texts(seen[:restart]) == "a partial "
    assert texts(seen[restart:]) == "the retried answer"
    assert {e.run_id for e in seen} == {stream.result.run_id}
    assert stream.result.output == "the retried answer"


@pytest.mark.usefixtures("conversation_shapes")
async def test_a_handed_over_turn_streams_through_a_worker_killed_in_the_targets_answer(
    temporal_env: WorkflowEnvironment, crash_dir: Path
) -> None:
    """The worker dies while the run a turn was handed to streams its answer: the turn's
    reader, which read the caller's events, reads the target's restart and retried answer
    from the worker that took over."""
    task_queue = f"crash-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(
        temporal_env.client, handing_crash.name, task_queue=task_queue
    )
    streams: list[DurableRunStream[Any]] = []

    async def sent() -> DurableRunStream[Any]:
        conv = await durable.conversation()  # a worker is up to take it
        streams.append(conv.send_stream("go"))
        return streams[0]

    seen = await killed_mid_answer(temporal_env, task_queue, crash_dir, sent)
    result = streams[0].result
    [target] = result.sub_runs

    shape = [(e.agent, e.kind, e.attempt) for e in seen if not e.kind.endswith("_delta")]
    assert shape == [
        ("handing_crash", "model_start", 0),
        ("handing_crash", "model_end", 0),
        ("handing_crash", "tool_end", 0),  # the transfer's result
        ("stream_crash", "model_start", 0),
        ("stream_crash", "turn_restarted", 2),
        ("stream_crash", "model_end", 0),
    ]
    restart = [e.kind for e in seen].index("turn_restarted")
    assert texts(seen[:restart]) == "a partial "
    assert texts(seen[restart:]) == "the retried answer"
    assert {e.run_id for e in seen if e.agent == "stream_crash"} == {target}
    assert (result.agent, result.output) == ("stream_crash", "the retried answer")


async def test_write_text_prints_each_turn_on_its_line_and_marks_a_restart() -> None:
    def event(kind: str, text: str = "", attempt: int = 0) -> RunEvent:
        delta = StreamDelta(kind="text", text=text) if text else None
        return RunEvent(kind, "r", "c", 1, delta=delta, attempt=attempt)  # type: ignore[arg-type]

    async def events() -> AsyncIterator[RunEvent]:
        for item in [
            event("model_start"),
            event("text_delta", "Let me look."),
            event("model_end"),
            event("model_start"),
            event("text_delta", "Hal"),
            event("turn_restarted", attempt=2),
            event("text_delta", "Hello"),
            event("model_end"),
        ]:
            yield item

    written: list[str] = []
    assert await write_text(events(), written.append) is True
    assert "".join(written) == (
        "Let me look.\nHal\n[the model call was retried (attempt 2): its answer restarts]\nHello\n"
    )


async def test_write_text_names_each_agent_whose_text_follows_another_agents() -> None:
    def event(kind: str, agent: str, text: str = "") -> RunEvent:
        delta = StreamDelta(kind="text", text=text) if text else None
        return RunEvent(kind, "r", "c", 1, delta=delta, agent=agent)  # type: ignore[arg-type]

    async def events() -> AsyncIterator[RunEvent]:
        for item in [
            event("model_start", "front"),
            event("text_delta", "front", "Let me pass you on."),
            event("model_end", "front"),
            event("model_start", "billing"),  # the run handed over to
            event("text_delta", "billing", "Billing"),
            event("text_delta", "billing", " here."),
            event("model_end", "billing"),
            event("model_start", "billing"),
            event("text_delta", "billing", "Anything else?"),
        ]:
            yield item

    written: list[str] = []
    assert await write_text(events(), written.append, lambda agent: f"{agent}> ") is True
    assert "".join(written) == (
        "front> Let me pass you on.\nbilling> Billing here.\nAnything else?\n"
    )


# -- who streams -------------------------------------------------------------------


async def golem_run_to(terminal: bool, task_queue: str) -> tuple[str, str]:
    """``golem run`` writing to a terminal (a pty) or a pipe: its output and run id."""
    master, slave = pty.openpty() if terminal else os.pipe()
    proc = await asyncio.create_subprocess_exec(
        GOLEM,
        *("run", "--agent", "echo", "--task-queue", task_queue, "hi"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=slave,
        stderr=asyncio.subprocess.PIPE,
    )
    os.close(slave)

    def read_all() -> bytes:
        chunks = []
        with contextlib.suppress(OSError):  # a pty whose writer has gone reads EIO
            while chunk := os.read(master, 4096):
                chunks.append(chunk)
        os.close(master)
        return b"".join(chunks)

    async with asyncio.timeout(120):
        out, (_, err) = await asyncio.gather(asyncio.to_thread(read_all), proc.communicate())
    text = out.decode().replace("\r\n", "\n")
    assert proc.returncode == 0, err.decode()
    run_id = next(line.split()[-1] for line in text.splitlines() if line.startswith("run id:"))
    return text, run_id


async def test_golem_run_streams_to_a_terminal_and_not_into_a_pipe(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    task_queue = f"who-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_env.client, task_queue=task_queue, plugins=[GolemPlugin(echo)]):
        piped, piped_run = await golem_run_to(False, task_queue)
        shown, shown_run = await golem_run_to(True, task_queue)

    async def polls(run_id: str) -> int:
        history = await temporal_env.client.get_workflow_handle(run_id).fetch_history()
        return sum(
            1
            for e in history.events
            if e.HasField("workflow_execution_update_accepted_event_attributes")
        )

    assert piped.startswith("echo: hi (LOUD)\n") and shown.startswith("echo: hi (LOUD)\n")
    assert await polls(piped_run) == 0  # nobody read a stream: the run kept none
    assert await polls(shown_run) > 0


class _OffsetUnreadable:
    """``WorkflowStreamClient`` of a run that paused: where its stream stands cannot be read
    (``unreadable``)."""

    unreadable = RPCError("the run's stream offset cannot be read", RPCStatusCode.UNAVAILABLE, b"")

    def __init__(self, handle: object) -> None:
        self.handle = handle

    async def get_offset(self) -> int:
        raise self.unreadable


async def _polls_for_ever(handle: object, offset: int, held: bool = False) -> AsyncIterator[Any]:
    """The poll of a run that paused: it waits for items the pause will not publish."""
    await asyncio.Event().wait()
    yield None  # never: nothing is published after the pause


async def test_a_pause_watch_that_cannot_read_the_offset_raises_its_error_to_the_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch's error is the reader's (its own poll's would be), not an unretrieved task
    error left behind while the reader waits for ever."""
    monkeypatch.setattr(streaming, "WorkflowStreamClient", _OffsetUnreadable)
    monkeypatch.setattr(streaming, "_subscribe", _polls_for_ever)
    run = SimpleNamespace(
        run_id="r1",
        conversation_id="c1",
        agent="a",
        handle=SimpleNamespace(id="r1"),
        followed={},
        turn_runs={},
    )
    run.handle._client = None  # what a stream's tree takes from its run's handle

    async def as_is(error: RPCError) -> Exception:  # a run that can go on
        return error

    run.stuck = as_is

    async def paused() -> None:  # the run waits for a person at once
        return None

    unhandled: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    try:
        stream: DurableRunStream[Any] = DurableRunStream(run, paused=paused)  # type: ignore[arg-type]
        with pytest.raises(RPCError) as raised:
            await within(collect(stream), what="the reader to get the watch's error", timeout=10)
        del stream
        gc.collect()
    finally:
        loop.set_exception_handler(handler)  # the session's loop serves every later test
    assert raised.value is _OffsetUnreadable.unreadable
    assert [context["message"] for context in unhandled] == []
