"""Handoffs in a durable conversation: the turn that hands over is answered by the target,
which serves the turns after it (across continue-as-new) until it hands over again."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from delegation_agents import answer, calls, read_late, refund_agent
from temporalio.client import Client
from temporalio.worker import Worker
from test_conversation import serve
from test_conversation_approvals import details
from test_conversation_boundaries import budgeted, continued
from waiting import eventually

from golem import Agent, Message, handoff_target
from golem.client import DurableAgent
from golem.client.lookups import awaiting_approval
from golem.client.records import history_reader
from golem.models import FunctionModel, ModelResponse
from golem.results import RunError
from golem.wire import ConversationSummary, names
from golem.worker import GolemPlugin

sys.path.insert(0, str(Path(__file__).parents[1]))
from examples.triage import triage as triage_example

DEADLINE = 30.0

# Every test here twice: turns as child runs, and run inline (docs/adr/0050-turns-inline.md).
pytestmark = pytest.mark.usefixtures("conversation_shapes")


def desk(name: str, hands_to: str = "", **options: Any) -> tuple[Agent[Any, Any], list[str]]:
    """An agent answering ``<name>: <last user prompt>``; with ``hands_to``, a prompt that
    names that agent is handed over to it first. Records each prompt it answers."""
    answered: list[str] = []

    def model(messages: list[Message], tools: Any) -> ModelResponse:
        prompt = [m for m in messages if m.role == "user"][-1].content
        if hands_to and hands_to in prompt and messages[-1].role == "user":
            return calls((f"h{len(messages)}", f"transfer_to_{hands_to}", {}))
        answered.append(prompt)
        return answer(f"{name}: {prompt}")

    return Agent(FunctionModel(model), name=name, **options), answered


async def activity_summaries(client: Client, conversation_id: str) -> list[str]:
    """The summaries the UI shows for the activities of every workflow run of the
    conversation, the latest run's first."""
    found: list[str] = []
    run_id: str | None = None
    while True:
        started = ""
        async for e in client.get_workflow_handle(
            conversation_id, run_id=run_id
        ).fetch_history_events():
            attributes = e.workflow_execution_started_event_attributes
            started = started or attributes.continued_execution_run_id
            if e.HasField("activity_task_scheduled_event_attributes"):
                found.append(e.user_metadata.summary.data.decode())
        if not started:
            return found
        run_id = started


async def test_a_conversation_follows_a_handoff_for_the_turns_after_it(
    temporal_client: Client, conversation_shapes: str
) -> None:
    billing, billing_answered = desk("billing")
    triage, triage_answered = desk("triage", hands_to="billing", handoffs=[billing])
    turn = f"turn-2-{uuid.uuid4().hex[:6]}"  # a run id names one run: one per shape
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        assert await conv.current_agent() == "triage"
        first = await conv.send("hello")
        handed = await conv.send("billing please: I was charged twice", run_id=turn)
        after = await conv.send("and the refund?")
        assert await conv.current_agent() == "billing"
        runs = await conv.runs()
        shown = await details(conv)
        await conv.close()
        closed = temporal_client.get_workflow_handle(conv.id, result_type=ConversationSummary)
        summary = await closed.result()
    assert first.agent == "triage" and first.output == "triage: hello"
    assert handed.run_id == turn  # the turn's own id, whoever answered it
    assert handed.agent == "billing"
    assert handed.output == "billing: billing please: I was charged twice"
    assert handoff_target(handed) == "billing"
    [target] = handed.sub_runs
    assert runs == [first.run_id, turn, target, after.run_id]
    assert after.agent == "billing" and after.output == "billing: and the refund?"
    assert triage_answered == ["hello"]
    assert billing_answered == ["billing please: I was charged twice", "and the refund?"]
    # The whole conversation, each message stamped with the run that added it.
    assert [(m.role, m.run_id) for m in after.messages[-6:]] == [
        ("user", turn),
        ("assistant", turn),
        ("tool", turn),
        ("assistant", target),
        ("user", after.run_id),
        ("assistant", after.run_id),
    ]
    assert handed.total_usage.input_tokens == 20
    # The UI counts the person's turns: the run handed to answered the second one.
    assert shown.startswith("**turns** 3 ·"), shown
    assert (summary.turns, summary.last_run) == (3, after.run_id)
    if conversation_shapes == "inline":  # the UI names the run handed to under its turn
        summaries = await activity_summaries(temporal_client, conv.id)
        assert f"conversation turn 2, run {turn}" in summaries[1]
        handed_to = f"conversation turn 2, handed over to billing, run {target}"
        assert handed_to in summaries[2], summaries
        assert f"conversation turn 3, run {after.run_id}" in summaries[3], summaries


async def test_the_current_agent_crosses_continue_as_new_and_can_hand_back(
    temporal_client: Client, conversation_shapes: str
) -> None:
    billing, billing_answered = desk("billing", hands_to="triage")
    triage, triage_answered = desk("triage", hands_to="billing", handoffs=[billing])
    billing.add_handoffs(triage)  # a specialist hands back to the agent that handed to it
    async with serve(temporal_client, triage) as tq:
        inline = conversation_shapes == "inline"
        conv = await budgeted(temporal_client, triage, tq, turns_per_run=1, inline_turns=inline)
        await conv.send("to billing")
        second = await conv.send("still billing?")
        third = await conv.send("back to triage")
        fourth = await conv.send("who is here?")
        switches = await continued(temporal_client, conv.id)
        current = await conv.current_agent()
        shown = await details(conv)
        await conv.close()
    assert switches >= 3
    # Six runs, four turns of the person's: the count crossed continue-as-new.
    assert "**turns** 4 ·" in shown, shown
    if inline:  # each turn's requests, in the workflow run that ran it
        summaries = await activity_summaries(temporal_client, conv.id)
        [last] = [s for s in summaries if fourth.run_id in s]
        assert f"conversation turn 4, run {fourth.run_id}" in last, summaries
        [back] = [s for s in summaries if "handed over to triage" in s]
        assert "conversation turn 3, handed over to triage, run" in back, summaries
    assert second.agent == "billing"
    assert third.agent == "triage" and fourth.agent == "triage" and current == "triage"
    assert billing_answered == ["to billing", "still billing?"]
    assert triage_answered == ["back to triage", "who is here?"]


@pytest.mark.parametrize("inline_bytes", [64 * 1024, 1], ids=["shipped", "read-by-query"])
async def test_a_conversation_that_handed_over_reads_back_whole_from_its_history_alone(
    temporal_client: Client, inline_bytes: int
) -> None:
    """Inline, the runs of a handed-over turn are rebuilt from their activities, or from the
    records that keep their messages when a request was read by query."""
    billing, _ = desk(f"billing-back-{uuid.uuid4().hex[:6]}")
    triage, _ = desk(f"triage-back-{uuid.uuid4().hex[:6]}", billing.name, handoffs=[billing])
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(triage, inline_messages_bytes=inline_bytes)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        conv = await DurableAgent(temporal_client, triage, task_queue=task_queue).conversation()
        first = await conv.send("hello")
        handed = await conv.send(f"{billing.name} please")
        after = await conv.send("and then?")
        await conv.close()
    # The worker is gone: everything below reads histories only.
    reader = history_reader(temporal_client)
    transcript = await reader.transcript(conv.id)
    [target] = handed.sub_runs
    assert await reader.messages(transcript) == after.messages
    assert await reader.runs(transcript) == [first.run_id, handed.run_id, target, after.run_id]
    assert after.agent == billing.name and handed.output == f"{billing.name}: {billing.name} please"


async def test_a_handed_over_turn_streams_the_targets_events_too(temporal_client: Client) -> None:
    billing, _ = desk("billing")
    triage, _ = desk("triage", hands_to="billing", handoffs=[billing])
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        stream = conv.send_stream("billing please")
        events = [event async for event in stream]
        await conv.close()
    result = stream.result
    assert result.agent == "billing"
    agents = [(e.agent, e.kind) for e in events if e.kind in ("model_start", "model_end")]
    assert agents == [
        ("triage", "model_start"),
        ("triage", "model_end"),
        ("billing", "model_start"),
        ("billing", "model_end"),
    ]
    assert {e.run_id for e in events if e.agent == "billing"} == set(result.sub_runs)


async def test_a_delegates_events_stream_before_the_handoff_targets_however_late_read(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/triage.py, its delegate ledger's stream read only once billing's refund
    waits (a loaded reader): the turn's stream still yields ledger's events before
    billing's, the order they happened in."""
    conversation = ""

    async def waits() -> bool:
        return bool((await awaiting_approval(temporal_client, conversation)).calls)

    read_late(monkeypatch, "ledger", until=waits)
    async with serve(temporal_client, triage_example) as tq:
        durable = DurableAgent(temporal_client, triage_example, task_queue=tq)
        conv = await durable.conversation()
        conversation = conv.id
        events = [event async for event in conv.send_stream("I was charged twice")]
        await conv.approve({"refund-1": True})
    agents = [event.agent for event in events]
    billing = agents.index("billing")
    assert "ledger" in agents[:billing] and set(agents[billing:]) == {"billing"}
    after = events[max(n for n, agent in enumerate(agents) if agent == "ledger") + 1]
    assert (after.agent, after.kind, after.call and after.call.name) == (
        "triage",
        "tool_end",
        "ledger",
    )  # the delegation's result


async def test_the_run_a_turn_was_handed_to_waits_for_approvals_as_the_turn(
    temporal_client: Client,
) -> None:
    refunds: list[int] = []
    triage, _ = desk("triage", hands_to="billing", handoffs=[refund_agent(refunds)])
    turn = f"turn-1-{uuid.uuid4().hex[:6]}"  # a run id names one run: one per shape
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        paused = await conv.send("billing please", run_id=turn)
        [call] = paused.pending_approvals
        assert paused.agent == "billing" and paused.pending_runs[call.id] == paused.run_id
        assert refunds == []
        # The run handed to, as golem serve's events read it (the conversation's latest run):
        # its answer says it waits (inline, it waited for an answer that never came).
        target = (await conv.runs())[-1]
        waiting = await asyncio.wait_for((await conv.turn(target)).result(), DEADLINE)
        assert waiting.paused and [c.id for c in waiting.pending_approvals] == [call.id]
        done = await conv.approve({call.id: True})
        await conv.close()
        read_back = history_reader(temporal_client)
        transcript = await read_back.transcript(conv.id)
    assert refunds == [5]
    assert done.run_id == turn and done.agent == "billing"
    assert done.output == "refunded 5"
    assert await read_back.messages(transcript) == done.messages
    assert await read_back.runs(transcript) == [turn, *done.sub_runs]


async def test_a_delegates_approval_surfaces_in_the_conversation(temporal_client: Client) -> None:
    refunds: list[int] = []
    billing = refund_agent(refunds)

    def triage_model(messages: list[Message], tools: Any) -> ModelResponse:
        if messages[-1].role == "tool":
            return answer(f"billing said: {messages[-1].content}")
        return calls(("d1", "billing", {"prompt": "refund order 42"}))

    triage = Agent(FunctionModel(triage_model), name="triage", delegates=[billing])
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        paused = await conv.send("I was charged twice")
        [call] = paused.pending_approvals
        waiting = paused.pending_runs[call.id]
        assert waiting != paused.run_id  # the delegate's run waits, not the turn's
        done = await conv.approve({call.id: True})
        await conv.close()
    assert refunds == [5]
    assert done.output == "billing said: refunded 5"
    assert done.sub_runs == [waiting]


async def test_a_handed_over_turn_whose_target_fails_keeps_both_runs_evidence(
    temporal_client: Client,
) -> None:
    """The caller's messages, then the failed target's evidence, in the transcript and in
    a read-back from the history; the next turn resumes it (repaired) at the target."""

    def billing_model(messages: list[Message], tools: Any) -> ModelResponse:
        prompt = [m for m in messages if m.role == "user"][-1].content
        if prompt.endswith(": break"):  # handed over with it: the target's first request
            return calls(("x1", "explode", {}))
        return answer(f"billing, after {sum(m.role == 'tool' for m in messages)} tool results")

    billing = Agent(FunctionModel(billing_model), name=f"billing-{uuid.uuid4().hex[:6]}")

    @billing.tool
    def explode() -> str:
        """Fail for real."""
        raise RuntimeError("boom")

    triage, _ = desk(f"triage-{uuid.uuid4().hex[:6]}", billing.name, handoffs=[billing])

    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        with pytest.raises(RunError) as failed:
            await conv.send(f"{billing.name}: break")
        after = await conv.send("continue")
        transcript = await conv.messages()
        await conv.close()
        read_back = history_reader(temporal_client)
        rebuilt = await read_back.transcript(conv.id)
    assert failed.value.stage == "tool"
    assert await read_back.messages(rebuilt) == transcript == after.messages
    assert [m.role for m in transcript[:4]] == ["user", "assistant", "tool", "assistant"]
    caller, target = {m.run_id for m in transcript[:3]}, transcript[3].run_id
    assert len(caller) == 1 and target not in caller  # the caller's run, then the target's
    assert after.agent == billing.name and after.output == "billing, after 2 tool results"


async def test_a_handed_over_turn_refused_for_its_size_ends_its_stream(
    temporal_client: Client,
) -> None:
    """The run that hands over adds more than a page of messages (1.8 MB of UTF-8): the
    turn is refused, and its stream ends saying so, not waiting for the target's items."""
    billing, answered = desk(f"billing-size-{uuid.uuid4().hex[:6]}")

    def model(messages: list[Message], tools: Any) -> ModelResponse:
        if messages[-1].role == "user":
            return calls(("b1", "big", {}))
        return calls(("h1", f"transfer_to_{billing.name}", {}))

    triage = Agent(
        FunctionModel(model), name=f"triage-size-{uuid.uuid4().hex[:6]}", handoffs=[billing]
    )

    @triage.tool
    def big() -> str:
        """A big document."""
        return "字" * 600_000

    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        stream = conv.send_stream("go")
        async with asyncio.timeout(DEADLINE):
            with pytest.raises(ValueError, match="too many for the conversation"):
                async for _ in stream:
                    pass
    assert answered == []  # the target never ran


async def test_a_handed_over_turn_read_on_after_its_approval_yields_the_targets_rest(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """``stream.run.stream(from_offset=stream.offset)`` after ``conv.approve``, where the
    turn waited in the run it was handed to: the rest of the target's events (inline, the
    reader skipped them as another turn's and waited for ever; with child runs, it read
    the caller's ended stream, and nothing), then the turn's final ``Result``, as is that of
    a stream of it read again from its start (with child runs both were the run that
    handed over's own, with no output)."""
    refunds: list[int] = []
    triage, _ = desk("triage", hands_to="billing", handoffs=[refund_agent(refunds)])
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        stream = conv.send_stream("billing please")
        async with asyncio.timeout(DEADLINE):
            before = [event async for event in stream]
        assert stream.result.paused and stream.result.agent == "billing"
        [call] = stream.result.pending_approvals
        done = await conv.approve({call.id: True})
        rest = stream.run.stream(from_offset=stream.offset)
        async with asyncio.timeout(DEADLINE):
            after = [event async for event in rest]
        again, middle = stream.run.stream(), stream.run.stream(from_offset=1)
        async with asyncio.timeout(DEADLINE):
            whole = [event async for event in again]
            [_ async for _ in middle]
        await conv.close()
    assert {e.agent for e in before} == {"triage", "billing"}
    assert {e.agent for e in after} == {"billing"}
    assert [e.kind for e in after if e.kind == "tool_end"] == ["tool_end"]
    assert {e.agent for e in whole} == {"triage", "billing"}
    assert refunds == [5] and done.output == "refunded 5"
    for read in (rest.result, again.result, middle.result):
        assert not read.paused and read.output == done.output and read.agent == "billing"
        assert read.run_id == done.run_id == stream.run_id
        assert read.sub_runs == done.sub_runs and len(done.sub_runs) == 1
        assert read.messages == done.messages and done.messages[-1].content == "refunded 5"


@pytest.mark.parametrize("left", [False, True], ids=["read whole", "left early"])
async def test_a_handed_over_turns_stream_read_again_ends_with_the_turns_result(
    temporal_client: Client, left: bool
) -> None:
    """A handed-over turn that did not pause, its stream read again from its start (the
    run's ``stream()``) after the send's stream was read whole, or left at its first event
    (which stops waiting for the send's answer): it ends with the turn's ``Result`` (with
    child runs it was the run that handed over's own, with no output; inline, after the
    send's stream was left, it raised the cancelled wait's error)."""
    billing, _ = desk("billing")
    triage, _ = desk("triage", hands_to="billing", handoffs=[billing])
    async with serve(temporal_client, triage) as tq:
        conv = await DurableAgent(temporal_client, triage, task_queue=tq).conversation()
        stream = conv.send_stream("billing please")
        async with asyncio.timeout(DEADLINE):
            async for _ in stream:
                if left:
                    break
            again = stream.run.stream()
            events = [event async for event in again]
            transcript = await conv.messages()
        await conv.close()
    read = again.result
    assert read.output == "billing: billing please" and read.agent == "billing"
    assert read.run_id == stream.run_id and read.messages == transcript
    assert len(read.sub_runs) == 1 and {e.agent for e in events} == {"triage", "billing"}
    if not left:
        assert read.sub_runs == stream.result.sub_runs


async def test_a_streamed_handed_over_turn_is_held_whole_across_continue_as_new(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """The log an inline conversation carries across continue-as-new holds the latest
    streamed turn's items, the run that handed over's among them: the conversation still
    says it holds that run's items (it named only the last run before)."""
    billing, _ = desk("billing")
    triage, _ = desk("triage", hands_to="billing", handoffs=[billing])
    async with serve(temporal_client, triage) as tq:
        inline = conversation_shapes == "inline"
        conv = await budgeted(temporal_client, triage, tq, turns_per_run=1, inline_turns=inline)
        stream = conv.send_stream("billing please")
        async with asyncio.timeout(DEADLINE):
            events = [event async for event in stream]
        await eventually_continued(temporal_client, conv.id)
        held = await conv.handle.query(names.TURN_STREAM_HELD, stream.run_id, result_type=bool)
        await conv.close()
    assert {e.agent for e in events} == {"triage", "billing"}
    assert held


async def eventually_continued(client: Client, conversation_id: str) -> None:
    async def switched() -> bool:
        return await continued(client, conversation_id) >= 1

    await eventually(switched, what="the conversation to continue as new", timeout=DEADLINE)
