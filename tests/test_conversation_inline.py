"""Conversation turns run inline in the conversation's workflow (docs/adr/0050-turns-inline.md):
the same transcript, results and evidence as turns run as child runs, with no child run."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from delegation_agents import caller_agent, calls
from delegation_agents import echo_agent as echo_agent_of
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from test_conversation import _until_update_admitted, contents, echo_agent, paging_agent, serve
from test_conversation_boundaries import budgeted, continued
from test_conversation_stream import talker, texts
from test_durable_approvals import asks_two, transfer_agent
from test_durable_approvals import serve as serve_approvals
from waiting import eventually

from golem import Agent, Message, ToolCall
from golem.cli.show import inline_entry
from golem.client import PARENT_RUN_ID, ConversationClosedError, DurableAgent, DurableConversation
from golem.client import conversations as conversations_module
from golem.client.lookups import awaiting_approval
from golem.client.records import history_reader, inline_turns_of
from golem.errors import RunIdInUseError
from golem.loop import RunLoop
from golem.messages import Usage
from golem.models import FunctionModel
from golem.models.base import ModelResponse, StreamDelta
from golem.phases.batch import DENIED_RESULT, NO_DECISION_RESULT
from golem.results import RunError
from golem.usage import UsageLimits
from golem.wire import ConversationInput, Paused, StreamEvent, TurnOutput, names
from golem.wire import transcript as transcript_module
from golem.wire.converter import golem_data_converter
from golem.worker import GolemPlugin
from golem.workflows import streams as streams_module
from golem.workflows.conversation import ConversationWorkflow


async def inline(
    client: Client, agent: Agent[Any, Any], task_queue: str
) -> DurableConversation[Any]:
    """A new conversation of ``agent`` whose turns run inline."""
    return await DurableAgent(client, agent, task_queue=task_queue).conversation(inline_turns=True)


async def event_types(client: Client, workflow_id: str) -> list[int]:
    """Every event type of every run of ``workflow_id``."""
    found: list[int] = []
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        found += [e.event_type async for e in handle.fetch_history_events()]
    return found


def breaker() -> tuple[Agent[Any, str], FunctionModel]:
    """A tool call that fails for real on "break"; else how many tool results it has seen."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user" and messages[-1].content == "break":
            return Message.assistant("", [ToolCall(id="c1", name="explode", args="{}")])
        return Message.assistant(f"{sum(1 for m in messages if m.role == 'tool')} tool results")

    model = FunctionModel(answer)
    agent = Agent(model, name=f"breaker-{uuid.uuid4().hex[:6]}")

    @agent.tool
    def explode() -> str:
        """Fail for real."""
        raise RuntimeError("boom")

    return agent, model


async def test_inline_turns_build_the_transcript_a_child_run_would_with_no_child_run(
    temporal_client: Client,
) -> None:
    outcomes: dict[bool, tuple[list[Any], list[tuple[str, str]], list[list[Message]]]] = {}
    for inline in (False, True):
        agent, model = paging_agent(f"pages-{inline}")
        async with serve(temporal_client, agent) as tq:
            durable = DurableAgent(temporal_client, agent, task_queue=tq)
            conv = await durable.conversation(inline_turns=inline)
            results = [await conv.send(f"page {n}") for n in range(3)]
            transcript = await conv.messages()
            runs = await conv.runs()
        assert runs == [r.run_id for r in results]
        assert transcript == results[-1].messages
        for result in results:  # each turn's messages stamped with its run and conversation
            mine = [m for m in transcript if m.run_id == result.run_id]
            assert len(mine) == 4 and {m.conversation_id for m in mine} == {conv.id}
        unnamed = {"run_id": "", "conversation_id": ""}  # two conversations, the same requests
        requests = [[m.model_copy(update=unnamed) for m in r.messages] for r in model.requests]
        outcomes[inline] = ([r.output for r in results], contents(transcript), requests)
        types = await event_types(temporal_client, conv.id)
        started = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        if inline:
            assert started not in types
            assert types.count(scheduled) == 9  # model, tool, model per turn: here
            # The conversation's page in the UI names each activity's turn in its summary.
            summaries = [
                e.user_metadata.summary.data.decode()
                async for e in conv.handle.fetch_history_events()
                if e.event_type == scheduled
            ]
            assert f"tool: fetch · conversation turn 2, run {results[1].run_id}" in summaries[4]
            with pytest.raises(RPCError) as missing:
                await temporal_client.get_workflow_handle(results[0].run_id).describe()
            assert missing.value.status == RPCStatusCode.NOT_FOUND
        else:
            assert types.count(started) == 3 and scheduled not in types
    assert outcomes[True] == outcomes[False]


async def test_a_failed_inline_turn_leaves_its_evidence_and_the_next_turn_resumes_it(
    temporal_client: Client,
) -> None:
    seen: dict[bool, tuple[str, str, list[tuple[str, str]]]] = {}
    for inline in (False, True):
        agent, model = breaker()
        async with serve(temporal_client, agent) as tq:
            conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation(
                inline_turns=inline
            )
            with pytest.raises(RunError) as failed:
                await conv.send("break")
            after = await conv.send("continue")
            transcript = await conv.messages()
        assert failed.value.stage == "tool"
        assert failed.value.partial is not None
        assert failed.value.partial.conversation_id == conv.id
        answers = [i for i, m in enumerate(transcript) if m.role == "assistant"]
        assert [r.messages for r in model.requests] == [transcript[:end] for end in answers]
        seen[inline] = (failed.value.stage, after.output, contents(transcript))
    assert seen[True] == seen[False]
    assert seen[True][1] == "1 tool results"  # the failed turn's call closed in the transcript


async def test_inline_turns_carry_across_continue_as_new_by_reference(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)  # every transcript is long here
    agent, model = paging_agent("carried")
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=2, inline_turns=True)
        results = [await conv.send(f"page {n}") for n in range(5)]
        transcript = await conv.messages()
        runs = await conv.runs()  # read from the histories, the earlier runs' included
    assert await continued(temporal_client, conv.id) >= 2
    assert runs == [r.run_id for r in results]
    input = (
        await anext(aiter(conv.handle.fetch_history_events()))
    ).workflow_execution_started_event_attributes.input
    assert b'"earlier"' in input.payloads[0].data  # the run holds its start by reference
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED not in (
        await event_types(temporal_client, conv.id)
    )
    assert [r.output for r in results] == [f"read {n + 1:08d}" for n in range(5)]
    answers = [i for i, m in enumerate(transcript) if m.role == "assistant"]
    assert [r.messages[1:] for r in model.requests] == [transcript[:end] for end in answers]


def _whole(history: list[Message]) -> list[Message]:
    """A history processor: its agent needs the whole history in its loop."""
    return history


async def test_what_inline_turns_cannot_do_yet_is_refused_naming_it(
    temporal_client: Client,
) -> None:
    target, _ = echo_agent("target_inline")
    target.history_processor = _whole  # reached by a handoff: it would serve turns too
    handing, _ = echo_agent("hands_off")
    handing.add_handoffs(target)
    plain, _ = echo_agent("plain-inline")
    refusal = "cannot serve agent 'target_inline', which needs the whole history"
    async with serve(temporal_client, handing, plain) as tq:
        with pytest.raises(ValueError, match=refusal):
            await inline(temporal_client, handing, tq)
        # Known by name only, the worker refuses its turns, saying why; nothing is recorded.
        by_name = DurableAgent(temporal_client, "hands_off", task_queue=tq)
        refused = await by_name.conversation(inline_turns=True)
        with pytest.raises(ValueError, match=refusal):
            await refused.send("hi")
        assert await refused.messages() == []
        conv = await DurableAgent(temporal_client, plain, task_queue=tq).conversation(
            inline_turns=True, idle_timeout=timedelta(minutes=5)
        )
        with pytest.raises(ValueError, match=refusal):
            async for _ in refused.send_stream("hi"):
                pass
        assert await refused.messages() == []
        assert (await conv.send("hi")).output == "1: hi"


@pytest.mark.parametrize("inline_bytes", [64 * 1024, 1], ids=["shipped", "read-by-query"])
async def test_an_inline_conversation_reads_back_whole_from_its_history_alone(
    temporal_client: Client, inline_bytes: int
) -> None:
    """Its turns' messages are rebuilt from their activities (or, when a request was read by
    query, from the outcome that keeps them), no worker needed."""
    agent, _ = paging_agent(f"read-back-{inline_bytes}")
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent, inline_messages_bytes=inline_bytes)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        durable = DurableAgent(temporal_client, agent, task_queue=task_queue)
        conv = await durable.conversation(inline_turns=True)
        results = [await conv.send(f"page {n}") for n in range(3)]
        await conv.close()
    # The worker is gone: everything below reads histories only.
    reader = history_reader(temporal_client)
    transcript = await reader.transcript(conv.id)
    assert await reader.messages(transcript) == results[-1].messages
    assert await reader.runs(transcript) == [r.run_id for r in results]
    outcomes = [
        e.workflow_execution_update_completed_event_attributes.outcome.success
        async for e in conv.handle.fetch_history_events()
        if e.HasField("workflow_execution_update_completed_event_attributes")
    ]
    assert len(outcomes) == 4  # three turns, then the close
    kept = [b"x" * 2000 in o.payloads[0].data for o in outcomes[:3]]
    # Shipped, a turn's tool result is in its history once: the outcome leaves it out.
    assert kept == ([False] * 3 if inline_bytes > 1 else [True] * 3)


async def test_an_inline_turn_delegates_to_a_child_run_of_the_conversation(
    temporal_client: Client,
) -> None:
    billing = echo_agent_of("billing", lambda p: f"refunded ({p})", description="Refunds.")
    triage = caller_agent(
        "triage", lambda p: calls(("c1", "billing", {"prompt": "order 42"})), delegates=[billing]
    )
    async with serve(temporal_client, triage) as tq:
        conv = await inline(temporal_client, triage, tq)
        result = await conv.send("I was charged twice")
        [child] = result.sub_runs
        described = await temporal_client.get_workflow_handle(child).describe()
    assert result.output == "refunded (order 42)"
    # The delegation is a child workflow of the conversation, its caller the turn's run.
    assert described.parent_id == conv.id
    assert described.typed_search_attributes.get(PARENT_RUN_ID) == result.run_id
    # Read back from the history, the delegation is no turn of the conversation.
    reader = history_reader(temporal_client)
    transcript = await reader.transcript(conv.id)
    assert await reader.runs(transcript) == [result.run_id]
    assert await reader.messages(transcript) == result.messages


async def test_a_streamed_inline_turn_follows_its_delegations_streams(
    temporal_client: Client,
) -> None:
    """A delegation started by a streamed inline turn is named on the conversation's stream
    as the turn's: its own events reach the turn's reader, as a child turn's would."""
    billing = echo_agent_of("billing", lambda p: f"refunded ({p})", description="Refunds.")
    triage = caller_agent(
        "triage", lambda p: calls(("c1", "billing", {"prompt": "order 42"})), delegates=[billing]
    )
    async with serve(temporal_client, triage) as tq:
        conv = await inline(temporal_client, triage, tq)
        stream = conv.send_stream("I was charged twice")
        events = [event async for event in stream]
    [child] = stream.result.sub_runs
    assert stream.result.output == "refunded (order 42)"
    runs = {event.run_id for event in events}
    assert runs == {stream.result.run_id, child}
    assert [e.kind for e in events if e.run_id == child][-1] == "model_end"


async def test_an_inline_conversation_that_wants_answers_alone_reads_no_transcript(
    temporal_client: Client,
) -> None:
    agent, _ = paging_agent("answers-alone")
    async with serve(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        conv.with_messages = False
        results = [await conv.send(f"page {n}") for n in range(2)]
        transcript = await conv.messages()
    assert [r.output for r in results] == ["read 00000001", "read 00000002"]
    assert [r.messages for r in results] == [[], []]
    assert len(transcript) == 8  # the conversation holds them all the same


def gated(name: str) -> tuple[Agent[Any, str], asyncio.Event, list[str]]:
    """An agent whose model holds each turn's first request until the gate opens; what it
    was asked, in order."""
    gate, asked = asyncio.Event(), []

    async def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user":
            asked.append(messages[-1].content)
            await gate.wait()
            call = ToolCall(id=f"c{len(messages)}", name="fetch", args="{}")
            return Message.assistant("", [call])
        return Message.assistant(f"done {messages[-1].content}")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=name)

    @agent.tool
    def fetch() -> str:
        """Fetch."""
        return "fetched"

    return agent, gate, asked


async def test_sends_queued_behind_an_inline_turn_read_back_as_the_conversation_ran(
    temporal_client: Client,
) -> None:
    """A queued turn's first activity can precede the update that ends the turn before
    it in the history; a send refused at close answers amid another turn's activities."""
    agent, gate, asked = gated(f"queued-{uuid.uuid4().hex[:6]}")
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation(inline_turns=True)
        first = asyncio.ensure_future(conv.send("one"))
        await eventually(lambda: asked == ["one"], what="the first turn at the model")
        second = asyncio.ensure_future(conv.send("two"))
        await _until_update_admitted(conv.handle, 2)
        runs_in_flight = await conv.runs()  # read from the history while both wait
        gate.set()
        await asyncio.gather(first, second)
        both = await conv.messages()
        gate.clear()
        third = asyncio.ensure_future(conv.send("three"))
        await eventually(lambda: asked[-1:] == ["three"], what="the third turn at the model")
        fourth = asyncio.ensure_future(conv.send("four"))
        await _until_update_admitted(conv.handle, 4)
        closing = asyncio.ensure_future(conv.close())  # refuses the queued fourth at once
        with pytest.raises(ConversationClosedError):
            await fourth
        gate.set()
        await asyncio.gather(third, closing)
        live = await conv.messages()
    assert len(runs_in_flight) == 2  # an inline turn in flight is listed, as a child run is
    assert contents(both)[-4:] == [
        ("user", "two"),
        ("assistant", ""),
        ("tool", "fetched"),
        ("assistant", "done fetched"),
    ]
    reader = history_reader(temporal_client)
    transcript = await reader.transcript(conv.id)
    assert await reader.messages(transcript) == live
    assert len(await reader.runs(transcript)) == 3


async def test_an_agent_that_can_no_longer_run_inline_is_refused_per_turn_not_by_replay(
    temporal_client: Client,
) -> None:
    name = f"changing_{uuid.uuid4().hex[:6]}"
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    plain, _ = echo_agent(name)
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(plain)]):
        durable = DurableAgent(temporal_client, plain, task_queue=task_queue)
        conv = await durable.conversation(inline_turns=True)
        assert (await conv.send("hi")).output == "1: hi"
    # The same agent, deployed again with a per-request token limit (its loop needs the
    # whole history; it changes no command of the turn already taken, a processor would).
    asking, _ = echo_agent(name)
    asking.usage_limits = UsageLimits(request_input_tokens_limit=1_000_000)

    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(asking)]):
        again = await DurableAgent(temporal_client, name, task_queue=task_queue).conversation(
            conv.id
        )
        with pytest.raises(ValueError, match=r"serve agent .*, which needs the whole history"):
            await again.send("again")
        failed_tasks = [
            e
            async for e in conv.handle.fetch_history_events()
            if e.HasField("workflow_task_failed_event_attributes")
        ]
        assert (await again.messages())[-1].content == "1: hi"  # still serving reads
    assert failed_tasks == []


async def test_a_bug_in_an_inline_turn_fails_the_turn_naming_it_and_the_conversation_goes_on(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, _ = echo_agent(f"bug-{uuid.uuid4().hex[:6]}")

    async def broken(self: RunLoop) -> None:
        raise AssertionError("a bug in golem")

    async with serve(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        with monkeypatch.context() as patched:
            patched.setattr(RunLoop, "run", broken)
            with pytest.raises(RunError, match=r"failed in golem's workflow code.*a bug in golem"):
                await conv.send("hi")
        after = await conv.send("again")
        runs = await conv.runs()
    assert after.output == "1: again"  # the failed turn left nothing to resume
    assert len(runs) == 2


async def test_a_failed_inline_turn_sent_again_after_a_switch_fails_the_same_way(
    temporal_client: Client,
) -> None:
    agent, model = breaker()
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1, inline_turns=True)
        run_id = str(uuid.uuid4())
        with pytest.raises(RunError) as first:
            await conv.send("break", run_id=run_id)

        async def switched() -> bool:  # the failed turn sits in the previous run now
            return await continued(temporal_client, conv.id) >= 1

        await eventually(switched, what="the conversation continued as new")
        with pytest.raises(RunError) as again:
            await conv.send("break", run_id=run_id)
    assert (again.value.stage, again.value.detail) == (first.value.stage, first.value.detail)
    assert len(model.requests) == 1  # it ran once


async def read_back(client: Client, conversation_id: str) -> list[Message]:
    """The conversation as its histories alone hold it (no worker)."""
    reader = history_reader(client)
    return await reader.messages(await reader.transcript(conversation_id))


@pytest.mark.parametrize("answer", ["approved", "denied", "timed out", "closed"])
async def test_an_inline_turn_that_pauses_ends_in_the_transcript_however_it_is_answered(
    temporal_client: Client, answer: str
) -> None:
    """Its send answers the pause; its end comes with an approval, or with no update
    answering (a timeout, a close): the history records it where the reader finds it."""
    executed: list[int] = []
    timeout = timedelta(milliseconds=300) if answer == "timed out" else None
    agent = transfer_agent(executed, approval_timeout=timeout)
    agent.name = f"transfer_{answer.replace(' ', '_')}"
    async with serve_approvals(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        paused = await conv.send("pay")
        assert paused.paused and [c.id for c in paused.pending_approvals] == ["t1"]
        if answer in ("approved", "denied"):
            done = await conv.approve({"t1": answer == "approved"})
            assert not done.paused and done.run_id == paused.run_id
        elif answer == "timed out":

            async def settled() -> bool:
                return len(await conv.messages()) > 2

            await eventually(settled, what="the timeout to end the turn")
        else:
            await conv.close()
        live = await conv.messages()
        listed = await conv.runs()
    assert executed == ([5] if answer == "approved" else [])
    assert await read_back(temporal_client, conv.id) == live
    assert listed == [paused.run_id]
    results = {"approved": "moved 5", "denied": DENIED_RESULT, "timed out": NO_DECISION_RESULT}
    assert live[-1].content == f"{results.get(answer, DENIED_RESULT)} | balance 100"


async def test_an_inline_turn_waits_for_what_its_delegation_asks_and_the_conversation_answers(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    bank = transfer_agent(executed)
    bank.name = "bank_below"
    front = caller_agent(
        "front_desk", lambda p: calls(("d1", "bank_below", {"prompt": "pay"})), delegates=[bank]
    )
    async with serve_approvals(temporal_client, front) as tq:
        conv = await inline(temporal_client, front, tq)
        paused = await conv.send("settle my bill")
        [child] = paused.pending_runs.values()
        done = await conv.approve({"t1": True})
        live = await conv.messages()
    assert paused.paused and [c.id for c in paused.pending_approvals] == ["t1"]
    assert child != paused.run_id  # the call waits in the delegated run
    assert executed == [5] and not done.paused
    assert done.output == "moved 5 | balance 100"
    assert await read_back(temporal_client, conv.id) == live


async def test_what_an_inline_turn_waits_for_is_read_as_a_child_turns_is(
    temporal_client: Client,
) -> None:
    """The lookups behind `golem approve CONV`, `golem show` and golem serve read the turn's
    waiting calls from the conversation; `golem conversation` lists the turn as waiting,
    then (after a partial approval) with what still waits."""
    executed: list[int] = []
    agent = asks_two(executed)
    agent.name = f"asks_two_{uuid.uuid4().hex[:6]}"
    async with serve_approvals(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        paused = await conv.send("pay")
        waiting = await awaiting_approval(temporal_client, conv.id)
        partly = await conv.approve({"t1": True})
        turned = await inline_turns_of(temporal_client, conv.id)
        done = await conv.approve({"t2": False})
    assert (waiting.run_id, waiting.conversation_id) == (paused.run_id, conv.id)
    assert waiting.answers == conv.id  # `golem approve` reaches the calls through it
    assert [c.id for c in waiting.calls] == ["t1", "t2"]
    assert [c.id for c in partly.pending_approvals] == ["t2"]
    [record] = turned
    assert isinstance(record.outcome, TurnOutput) and isinstance(record.outcome.run, Paused)
    assert [c.id for c in record.outcome.run.pending_approvals] == ["t2"]  # its latest answer
    entry = inline_entry(record, "")
    assert (entry["status"], entry["outcome"]) == ("running", "waiting for approval: t2")
    assert not done.paused and executed == [1]


async def test_a_recorded_turn_end_stays_with_its_run_across_continue_as_new(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed, approval_timeout=timedelta(milliseconds=300))
    agent.name = f"timing_out_{uuid.uuid4().hex[:6]}"
    async with serve_approvals(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1, inline_turns=True)
        assert (await conv.send("pay")).paused

        async def switched() -> bool:  # the timeout ended the turn: the budget moves it on
            return await continued(temporal_client, conv.id) >= 1

        await eventually(switched, what="the conversation continued as new")
        following = await conv.send("next")
        memo = (await conv.handle.describe()).memo
        live = await conv.messages()
    assert "golemTurnEnded" not in await memo()
    assert following.output.startswith(NO_DECISION_RESULT)
    assert await read_back(temporal_client, conv.id) == live


@pytest.mark.parametrize("when", ["waiting", "running"])
async def test_a_cancelled_inline_conversation_keeps_its_turns_evidence(
    temporal_client: Client, when: str
) -> None:
    """A workflow cancel (not ``close()``) stops the turn in flight as a child run's
    parent-close policy would: the turn ends at stage ``canceled`` and its evidence stays
    in the conversation's history, read back with no worker."""
    executed: list[int] = []
    started, release = asyncio.Event(), asyncio.Event()
    if when == "waiting":
        agent = transfer_agent(executed)
    else:
        audits = ToolCall(id="a1", name="audit", args="{}")
        agent = Agent(FunctionModel(lambda messages, tools: Message.assistant("", [audits])))

        @agent.tool
        async def audit() -> str:
            """Blocks until the test lets it go (the turn is in flight meanwhile)."""
            started.set()
            await release.wait()
            return "audited"

    agent.name = f"cancelled_{when}_{uuid.uuid4().hex[:6]}"
    try:
        async with serve_approvals(temporal_client, agent) as tq:
            conv = await inline(temporal_client, agent, tq)
            sending = asyncio.ensure_future(conv.send("pay"))
            if when == "waiting":
                assert (await sending).paused
            else:
                await started.wait()
            await conv.handle.cancel()
            if when == "running":
                with pytest.raises(RunError) as raised:
                    await sending
                assert raised.value.stage == "canceled"
            with pytest.raises(WorkflowFailureError) as ended:
                await conv.handle.result()
            assert isinstance(ended.value.cause, CancelledError)
            release.set()
    finally:
        release.set()
    reader = history_reader(temporal_client)
    evidence = await reader.messages(await reader.transcript(conv.id))
    assert [m.role for m in evidence[:2]] == ["user", "assistant"]
    called = [c.id for c in evidence[1].tool_calls]
    assert called == (["t1", "b1"] if when == "waiting" else ["a1"])
    [record] = await inline_turns_of(temporal_client, conv.id)
    assert isinstance(record.outcome, Exception) and "cancel" in str(record.outcome)
    assert executed == []


def named_talker(gate: asyncio.Event | None = None) -> Agent[Any, Any]:
    """The streaming ``talker`` under a name of its own (each test's worker serves its own)."""
    agent = talker(gate)
    agent.name = f"talker_{uuid.uuid4().hex[:6]}"
    return agent


async def test_streamed_inline_turns_go_on_across_continue_as_new_and_from_any_client(
    temporal_client: Client,
) -> None:
    """The conversation's stream keeps its offsets across continue-as-new (a reader's stay
    valid) and only the latest two streamed turns' items; a client attached by id learns
    from the conversation's memo where its turns stream."""
    agent = named_talker()
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=2, inline_turns=True)
        said: list[str] = []
        runs: list[str] = []
        ends: list[int] = []
        attached = DurableConversation(
            DurableAgent(temporal_client, agent, task_queue=tq), conv.handle
        )
        for n in range(5):
            sender = conv if n < 4 else attached
            assert n < 4 or sender.inline is None  # attached: not known yet
            stream = sender.send_stream(f"turn {n}")
            said.append(texts([e async for e in stream]))
            runs.append(stream.result.run_id)
            ends.append(await WorkflowStreamClient(conv.handle).get_offset())
        assert attached.inline is True
        retained = await _retained(conv.handle, ends[-1])
        switched = await continued(temporal_client, conv.id)
    assert said == [f"{n + 1}: turn {n}" for n in range(5)]
    assert switched == 2  # after turns 2 and 4: the last turn ran alone in the third run
    assert ends == sorted(set(ends))  # offsets only grow, across both switches
    # The third run holds the turn before its own too: the switch carried its items.
    assert retained == runs[-2:]


async def _retained(handle: Any, end: int) -> list[str]:
    """The turns whose items a conversation's stream still holds, in order."""
    seen: list[str] = []
    items = WorkflowStreamClient(handle).subscribe([names.TOPIC], 0, result_type=RawValue)
    async for item in items:
        wire = golem_data_converter.payload_converter.from_payload(item.data.payload, StreamEvent)
        if wire.of_run not in seen:
            seen.append(wire.of_run)
        if item.offset + 1 >= end:
            break
    return seen


async def test_a_streamed_inline_turn_read_after_its_items_were_dropped_ends_with_its_result(
    temporal_client: Client,
) -> None:
    """The conversation's stream keeps only the latest two streamed turns' items: a reader of
    an older one (attached late, or resumed from a saved offset) misses its events but stops
    with its ``Result``, where it would wait among later turns' items for ever."""
    agent = named_talker()
    async with serve(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        first = conv.send_stream("one")
        async with asyncio.timeout(60):
            said = texts([e async for e in first])
            for n in range(2):
                _ = [e async for e in conv.send_stream(f"turn {n}")]
        saved = first.offset
        late, resumed = first.run.stream(), first.run.stream(from_offset=saved - 1)
        async with asyncio.timeout(60):
            missed = [e async for e in late] + [e async for e in resumed]
        retained = await _retained(conv.handle, await first.run.stream_end())
    assert said == "1: one" and first.run.run_id not in retained
    assert missed == []
    assert late.result.output == resumed.result.output == "1: one"


async def _sends_admitted(handle: Any, count: int) -> None:
    """Until ``count`` sends (not stream polls, also updates) reached the conversation."""

    async def admitted() -> bool:
        accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        events = [e async for e in handle.fetch_history_events() if e.event_type == accepted]
        updates = [
            e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            for e in events
        ]
        return updates.count(names.SEND) >= count

    await eventually(admitted, what=f"{count} sends accepted by the conversation")


async def test_a_conversation_cancelled_mid_stream_ends_every_turns_reader(
    temporal_client: Client,
) -> None:
    """A workflow cancel while a streamed turn runs, another queued behind it: the running
    turn's reader ends with its send's ``RunError`` (stage ``canceled``), the queued one's
    with its refusal; neither waits for ever."""
    gate = asyncio.Event()
    agent = named_talker(gate)
    async with serve(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        running, queued = conv.send_stream("one"), conv.send_stream("two")
        seen: list[Any] = []

        async def read(stream: Any, into: list[Any]) -> None:
            async for event in stream:
                into.append(event)

        first = asyncio.ensure_future(read(running, seen))
        await eventually(lambda: bool(texts(seen)), what="the first turn's first piece")
        second = asyncio.ensure_future(read(queued, []))
        await _sends_admitted(conv.handle, 2)
        await conv.handle.cancel()
        try:
            async with asyncio.timeout(60):
                with pytest.raises(RunError) as cancelled:
                    await first
                with pytest.raises(ConversationClosedError):
                    await second
        finally:
            gate.set()
    assert cancelled.value.stage == "canceled"
    assert texts(seen) == "1: "


async def test_a_rested_inline_conversation_streams_on_when_a_streamed_send_reopens_it(
    temporal_client: Client,
) -> None:
    """A streamed turn read back after its conversation rested, then an attached client's
    streamed send reopening it: the reopened run says in its memo that its turns run inline."""
    agent = named_talker()
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation(inline_turns=True, idle_timeout=timedelta(seconds=1))
        first = conv.send_stream("one")
        async with asyncio.timeout(60):
            said = texts([e async for e in first])

        async def rested() -> bool:
            return (await conv.handle.describe()).status != WorkflowExecutionStatus.RUNNING

        await eventually(rested, what="the conversation to rest", timeout=30)
        late = first.run.stream()
        attached = DurableConversation(durable, conv.handle)
        second = attached.send_stream("two")
        async with asyncio.timeout(60):
            again = texts([e async for e in late])
            then = texts([e async for e in second])
        memo = await (await conv.handle.describe()).memo()
    assert said == again == "1: one" and late.result.output == "1: one"
    assert then == "2: two" and attached.inline is True
    assert memo.get(names.INLINE_MEMO) is True


async def test_a_streamed_inline_turn_read_on_after_a_close_denied_its_calls_ends_with_its_end(
    temporal_client: Client,
) -> None:
    """A streamed turn that waits, ended by ``close()`` (its calls denied, no update of it
    answering its end): the rest of its events read after, then the end its conversation
    recorded, not the pause."""
    executed: list[int] = []
    agent = transfer_agent(executed)
    agent.name = f"bank_{uuid.uuid4().hex[:6]}"
    async with serve_approvals(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        stream = conv.send_stream("move 5")
        async with asyncio.timeout(60):
            _ = [e async for e in stream]
            assert stream.result.paused
            await conv.close()
            rest = stream.run.stream(from_offset=stream.offset)
            after = [e.kind async for e in rest]
    kinds = [kind for kind in after if not kind.endswith("_delta")]
    assert kinds[-2:] == ["model_start", "model_end"] and executed == []
    assert not rest.result.paused and DENIED_RESULT in str(rest.result.output)


async def test_an_inline_turns_run_says_what_stops_it(temporal_client: Client) -> None:
    """``stream.run.cancel()`` of an inline turn cannot stop it alone: its error names what
    does (a cancel of the conversation's workflow), not ``close()``, which lets a turn in
    flight run to its end."""
    agent = named_talker()
    async with serve(temporal_client, agent) as tq:
        conv = await inline(temporal_client, agent, tq)
        stream = conv.send_stream("one")
        async with asyncio.timeout(60):
            _ = [e async for e in stream]
        with pytest.raises(TypeError) as refused:
            await stream.run.cancel()
    message = str(refused.value)
    assert "close the conversation" not in message
    assert "conv.handle.cancel()" in message and "close()" in message


async def test_a_streamed_inline_turn_too_big_to_carry_still_ends_its_readers_after_a_switch(
    temporal_client: Client,
) -> None:
    """A streamed turn whose one text item exceeds CARRY_BYTES, the conversation continuing
    as new right after it: only the items after it cross, so a reader resumed before it
    misses its text but stops with its Result, and the next streamed turn reads whole."""
    piece = "x" * 4_000

    async def stream(messages: list[Message], tools: Any) -> Any:
        users = [m for m in messages if m.role == "user"]
        if len(users) == 1:
            for _ in range(100):  # 400 kB of text, past CARRY_BYTES
                yield StreamDelta(kind="text", text=piece)
            yield ModelResponse(message=Message.assistant("big"), usage=Usage())
            return
        yield StreamDelta(kind="text", text="small")
        yield ModelResponse(message=Message.assistant("small"), usage=Usage())

    agent: Agent[Any, str] = Agent(
        FunctionModel(lambda m, t: Message.assistant("unused"), stream_fn=stream),
        name=f"big_{uuid.uuid4().hex[:6]}",
    )
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1, inline_turns=True)
        first = conv.send_stream("big")
        async with asyncio.timeout(60):
            whole = texts([e async for e in first])
        await eventually(lambda: _switched(temporal_client, conv.id), what="the switch")
        resumed = first.run.stream(from_offset=1)
        second = conv.send_stream("small")
        async with asyncio.timeout(60):
            missed = [e async for e in resumed]
            then = texts([e async for e in second])
    # Its live reader may have missed the text too, when the switch came before its next
    # poll (the items after it cross): it ends all the same.
    assert len(whole) in (0, 400_000) and first.result.output == "big"
    assert [e.kind for e in missed] == ["model_end"] and resumed.result.output == "big"
    assert then == "small"


async def test_a_streamed_inline_turn_too_big_to_carry_carries_its_latest_items(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past CARRY_BYTES, the turn's latest items that fit cross the switch, not its end alone:
    a reader near the end (a live one between two polls) reads on with no loss, and one
    further behind reads on from the first carried item (it got nothing but the end before)."""
    monkeypatch.setattr(streams_module, "CARRY_BYTES", 30_000)  # the first text's item is over

    async def stream(messages: list[Message], tools: Any) -> Any:
        if messages[-1].role == "user":
            yield StreamDelta(kind="text", text="a" * 40_000)
            call = ToolCall(id="c1", name="note", args="{}")
            yield ModelResponse(message=Message.assistant("", [call]), usage=Usage())
            return
        yield StreamDelta(kind="text", text="b" * 4_000)
        yield ModelResponse(message=Message.assistant("done"), usage=Usage())

    agent: Agent[Any, str] = Agent(
        FunctionModel(lambda m, t: Message.assistant("unused"), stream_fn=stream),
        name=f"tail_{uuid.uuid4().hex[:6]}",
    )
    agent.tool(name="note")(lambda: "noted")
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1, inline_turns=True)
        first = conv.send_stream("go")
        async with asyncio.timeout(60):
            [e async for e in first]
        await eventually(lambda: _switched(temporal_client, conv.id), what="the switch")
        behind = first.run.stream(from_offset=1)  # read only the turn's model_start
        async with asyncio.timeout(60):
            read = [e async for e in behind]
    assert texts(read) == "b" * 4_000
    assert [e.kind for e in read][:3] == ["model_end", "tool_start", "tool_end"]
    assert behind.result.output == "done"


async def _switched(client: Client, conversation_id: str) -> bool:
    return await continued(client, conversation_id) >= 1


async def test_an_inline_conversation_started_without_its_memo_streams_to_an_attached_client(
    temporal_client: Client,
) -> None:
    """A conversation whose turns run inline started with no ``golemInlineTurns`` memo (by a
    golem before it set one, or by hand): a client attached by id still reads its streamed
    turn's events, once the turn has ended with no child run (the memo would have said)."""
    agent = named_talker()
    async with serve(temporal_client, agent) as tq:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(agent=agent.name, inline_turns=True),
            id=f"conv-{uuid.uuid4()}",
            task_queue=tq,
        )
        conv = DurableConversation(DurableAgent(temporal_client, agent, task_queue=tq), handle)
        stream = conv.send_stream("one")
        async with asyncio.timeout(60):
            said = texts([e async for e in stream])
    assert said == "1: one" and stream.result.output == "1: one"


async def test_an_inline_turn_cannot_take_the_run_id_of_a_workflow(temporal_client: Client) -> None:
    """A run id names one run, ever: Temporal refuses a child turn's start an id a workflow
    holds; an inline turn is no workflow, so its send asks, for an id its caller chose.
    (Another inline conversation's turn is no workflow either: its id is not caught.)"""
    agent, _ = echo_agent()
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        standalone = await durable.run("alone")
        other = await durable.conversation()  # its turns are child runs
        theirs = await other.send("theirs")
        conv = await inline(temporal_client, agent, tq)
        for taken in (standalone.run_id, theirs.run_id, other.id):
            with pytest.raises(RunIdInUseError, match=rf"run id '{taken}' is taken"):
                await conv.send("mine", run_id=taken)
            with pytest.raises(RunIdInUseError, match=rf"run id '{taken}' is taken"):
                async for _ in conv.send_stream("mine", run_id=taken):
                    pass
        mine = await conv.send("mine", run_id=f"mine-{uuid.uuid4().hex[:8]}")
        again = await conv.send("mine", run_id=mine.run_id)  # a retried send is the same turn
        runs = await conv.runs()
    assert runs == [mine.run_id] and mine.output == again.output == "1: mine"


async def test_a_reader_of_a_running_inline_turn_asks_its_conversation_not_its_history(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``conv.turn(run_id).result()`` while the turn runs (golem serve's events and
    reconnects): it asks the conversation whether the turn is still in flight, and reads the
    histories only once it is not (it read them all about once a second before)."""
    started, gate = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message], tools: Any) -> Message:
        started.set()
        await gate.wait()
        return Message.assistant("done")

    agent: Agent[Any, str] = Agent(FunctionModel(slow), name=f"slow-{uuid.uuid4().hex[:6]}")
    reads: list[str] = []

    async def counted(client: Client, conversation_id: str) -> Any:
        reads.append(conversation_id)
        return await inline_turns_of(client, conversation_id)

    monkeypatch.setattr(conversations_module, "inline_turns_of", counted)
    asked: list[str] = []
    original = DurableConversation._in_flight

    async def counting(self: DurableConversation[Any], run_id: str) -> bool:
        asked.append(run_id)
        return await original(self, run_id)

    monkeypatch.setattr(DurableConversation, "_in_flight", counting)
    turn = f"slow-turn-{uuid.uuid4().hex[:6]}"
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation(
            inline_turns=True
        )
        sent = asyncio.ensure_future(conv.send("go", run_id=turn))
        await asyncio.wait_for(started.wait(), 30)
        waiting = asyncio.ensure_future((await conv.turn(turn)).result())
        await eventually(lambda: len(asked) >= 3, what="the reader to ask three times")
        assert reads == []  # no history read while the turn runs
        gate.set()
        result = await asyncio.wait_for(waiting, 30)
        assert (await sent).output == result.output == "done"
        await conv.close()
    assert reads  # once it ended, its answer is read from the history
