"""A conversation rests after its idle timeout (its workflow closes, the transcript readable)
and its next send reopens it; ``close()`` stays final (docs/adr/0021)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker
from test_replay import history
from waiting import eventually, within

from golem import Message
from golem.agent import Agent
from golem.client import (
    ConversationClosedError,
    DurableAgent,
    DurableConversation,
    TurnNotTaken,
    recovery,
)
from golem.client.conversations import rested
from golem.events import RunEvent
from golem.models import FunctionModel
from golem.wire import ConversationSummary
from golem.worker import GolemPlugin
from golem.workflows.turns import Answer, Closed, Refusal, StartChild, Turns


def _count(messages: list[Message], tools: Any) -> Message:
    users = [m for m in messages if m.role == "user"]
    return Message.assistant(f"{len(users)}: {users[-1].content}")


counter: Agent[Any, Any] = Agent(FunctionModel(_count, model_name="count"), name="idle_counter")


def closed(client: Client, workflow_id: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        status = (await client.get_workflow_handle(workflow_id).describe()).status
        return status != WorkflowExecutionStatus.RUNNING

    return check


async def rested_after_one_turn(durable: DurableAgent[Any]) -> DurableConversation[Any]:
    """A conversation that took one turn ("one") and then rested (its idle timeout: 1 s)."""
    conv = await durable.conversation(idle_timeout=timedelta(seconds=1))
    await conv.send("one")
    client = durable.client
    await eventually(closed(client, conv.id), what="the conversation to rest", timeout=30)
    return conv


# -- the state machine -----------------------------------------------------------------------


def test_only_an_idle_conversation_rests_and_a_send_meanwhile_is_sent_again() -> None:
    turns = Turns()
    assert turns.send(1, "r1", "f1") == [StartChild("r1")]
    assert turns.rest() == [] and turns.phase == "running"  # a turn in flight: no rest
    turns.ended("r1")
    assert turns.rest() == [] and turns.phase == "resting" and turns.over
    refusal = turns.check_send("r2", "f2")
    assert refusal == Refusal(
        "continuing", "the conversation rests; send the turn again to reopen it"
    )
    assert turns.send(2, "r1", "f1") == [
        Answer(2, Refusal("recorded", "run r1 is already a turn of this conversation"))
    ]


def test_close_while_it_rests_closes_it_for_good() -> None:
    turns = Turns()
    turns.rest()
    assert turns.close(1) == [Answer(1, Closed())] and turns.phase == "closed"


# -- durably ---------------------------------------------------------------------------------


async def test_an_idle_conversation_rests_and_its_next_send_reopens_it_with_its_transcript(
    temporal_client: Client,
) -> None:
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        durable = DurableAgent(temporal_client, counter, task_queue=tq)
        conv = await durable.conversation(idle_timeout=timedelta(seconds=1))
        first = await conv.send("one")
        # It closed itself.
        await eventually(
            closed(temporal_client, conv.id), what="the conversation to rest", timeout=30
        )
        rested = temporal_client.get_workflow_handle(conv.id, result_type=ConversationSummary)
        summary = await rested.result()
        assert (summary.turns, summary.last_run) == (1, first.run_id)
        assert summary.reopen is not None and summary.reopen.idle_timeout == 1.0
        metadata = await rested.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert metadata.current_details.startswith(
            "**resting** after 1 s without a turn: its next turn reopens it"
        )
        # The UI names its idle timer, not "1 (1s)".
        timers = [
            json.loads(e.user_metadata.summary.data)
            async for e in rested.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        ]
        assert timers and set(timers) == {"idle: rests after 1 s without a turn"}
        second = await conv.send("two")  # reopens it, from where it rested
        assert second.output == "2: two"
        assert [m.content for m in second.messages if m.role == "user"] == ["one", "two"]
        assert await conv.runs() == [first.run_id, second.run_id]
        attached = await durable.conversation(conv.id)  # by id, from anywhere
        assert [m.content for m in await attached.messages()][-1] == "2: two"
        await conv.close()  # final: no send reopens a closed conversation
        with pytest.raises(ConversationClosedError, match="fork it to go on"):
            await conv.send("three")
    executions = [e async for e in temporal_client.list_workflows(f'WorkflowId = "{conv.id}"')]
    assert len(executions) == 2  # the rested run and the reopened one


class _Pauses:
    """``golem.client.recovery``'s asyncio, recording each pause between two tries."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.seconds.append(seconds)
        await asyncio.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)


async def test_a_send_to_a_resting_conversation_reopens_it_carrying_the_turn_at_once(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reopen is the progress: no pause before the turn goes again (it was 20 ms of a
    90 ms resting turn), and the reopened run starts with the turn (update-with-start), so
    its first workflow task takes it: no task of its own, no separate start call."""
    pauses = _Pauses()
    monkeypatch.setattr(recovery, "asyncio", pauses)
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        conv = await rested_after_one_turn(DurableAgent(temporal_client, counter, task_queue=tq))
        starts: list[Any] = []
        start_workflow = temporal_client.start_workflow

        def counted(*args: Any, **kwargs: Any) -> Any:
            starts.append(kwargs.get("id"))
            return start_workflow(*args, **kwargs)

        monkeypatch.setattr(temporal_client, "start_workflow", counted)
        second = await conv.send("two")
        assert second.output == "2: two"
        assert pauses.seconds == [] and starts == []
        reopened = await temporal_client.get_workflow_handle(conv.id).fetch_history()
        kinds = [EventType.Name(e.event_type) for e in reopened.events]
        first_task = kinds.index("EVENT_TYPE_WORKFLOW_TASK_COMPLETED")
        its_commands = kinds[
            first_task : kinds.index("EVENT_TYPE_WORKFLOW_TASK_SCHEDULED", first_task)
        ]
        assert "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED" in its_commands, kinds


async def test_the_rested_input_is_the_runs_that_rested_not_a_later_ones(
    temporal_client: Client,
) -> None:
    """Read by run id, without following: a client that read a rested run's status while
    another reopened the conversation gets that run's input at once, not (after waiting for
    it to rest too) the reopened run's."""
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        conv = await rested_after_one_turn(DurableAgent(temporal_client, counter, task_queue=tq))
        handle = temporal_client.get_workflow_handle(conv.id)
        first = await handle.describe()
        await conv.send("two")  # reopened by "another client"
        completed = WorkflowExecutionStatus.COMPLETED
        following = await rested(temporal_client, conv.id, completed, first.run_id)
    assert following is not None and [m.content for m in following.messages] == ["one", "1: one"]


async def test_closing_a_resting_conversation_closes_it_for_good(temporal_client: Client) -> None:
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        conv = await rested_after_one_turn(DurableAgent(temporal_client, counter, task_queue=tq))
        await conv.close()
        summary = await temporal_client.get_workflow_handle(
            conv.id, result_type=ConversationSummary
        ).result()
        assert summary.reopen is None and summary.turns == 1
        with pytest.raises(ConversationClosedError, match="fork it to go on"):
            await conv.send("two")


async def test_an_idle_timeout_must_be_positive(temporal_client: Client) -> None:
    durable = DurableAgent(temporal_client, counter, task_queue="never-polled")
    with pytest.raises(ValueError, match="idle_timeout must be positive"):
        await durable.conversation(idle_timeout=timedelta(0))


def test_the_recorded_rest_and_reopen_hold_what_they_were_recorded_for() -> None:
    """tests/histories/conversation_rested|reopened (tests/record_histories.py); both replay
    in tests/test_replay.py."""
    rested = history("conversation_rested")
    kinds = [e.event_type for e in rested.events]
    assert EventType.EVENT_TYPE_TIMER_FIRED in kinds  # the idle timeout, once no turn waited
    signals = [
        e for e in rested.events if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert len(signals) == 1  # the turn waited for an approval meanwhile: no rest then
    done = rested.events[-1].workflow_execution_completed_event_attributes
    assert b'"reopen":{"agent":"replay_approval"' in done.result.payloads[0].data
    reopened = history("conversation_reopened")
    started = reopened.events[0].workflow_execution_started_event_attributes
    assert not started.continued_execution_run_id  # a new run of the id, not continue-as-new
    assert b'"idleTimeout":1.0' in started.input.payloads[0].data
    closed = reopened.events[-1].workflow_execution_completed_event_attributes
    assert b'"reopen"' not in closed.result.payloads[0].data  # close() is final
    carried = [
        EventType.Name(e.event_type) for e in history("conversation_reopened_with_turn").events
    ]
    first_task = carried.index("EVENT_TYPE_WORKFLOW_TASK_COMPLETED")
    its_commands = carried[
        first_task : carried.index("EVENT_TYPE_WORKFLOW_TASK_SCHEDULED", first_task)
    ]
    assert {  # the turn taken and its run started in the reopened run's first task
        "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
        "EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED",
    } <= set(its_commands)


def _resting_again_after(
    client: Client, conversation_id: str, reopens: int
) -> tuple[list[str], Callable[..., Awaitable[Any]]]:
    """``client.start_workflow`` that, for the first ``reopens`` starts, returns only once
    the run it started rested again (its idle timeout ran out before the next call came):
    the run ids it started, and the stand-in."""
    started: list[str] = []
    start_workflow = client.start_workflow

    async def rests_again(*args: Any, **kwargs: Any) -> Any:
        handle = await start_workflow(*args, **kwargs)
        started.append(handle.result_run_id or "")
        if len(started) <= reopens:
            await eventually(
                closed(client, conversation_id), what="the reopened run to rest", timeout=30
            )
        return handle

    return started, rests_again


async def test_a_close_whose_reopened_run_rests_again_before_it_comes_reopens_it_again(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() on a resting conversation reopens it to close it; when the reopened run
    rests again before the close reaches it, close() goes on as a send would (it raised
    the server's RPCError)."""
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        conv = await rested_after_one_turn(DurableAgent(temporal_client, counter, task_queue=tq))
        started, rests_again = _resting_again_after(temporal_client, conv.id, reopens=1)
        monkeypatch.setattr(temporal_client, "start_workflow", rests_again)
        await within(conv.close(), what="the close")
        monkeypatch.undo()
        summary = await temporal_client.get_workflow_handle(
            conv.id, result_type=ConversationSummary
        ).result()
        with pytest.raises(ConversationClosedError, match="fork it to go on"):
            await conv.send("two")
    assert len(started) == 2  # reopened, rested again, reopened once more
    assert summary.reopen is None and summary.turns == 1  # closed for good


async def test_a_close_that_cannot_reach_a_run_before_it_rests_fails_at_the_deadline_naming_it(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        durable = DurableAgent(temporal_client, counter, task_queue=tq)
        rested_conv = await rested_after_one_turn(durable)
        conv = DurableConversation(durable, rested_conv.handle, timedelta(seconds=2))
        _, rests_again = _resting_again_after(temporal_client, conv.id, reopens=1_000)
        monkeypatch.setattr(temporal_client, "start_workflow", rests_again)
        with pytest.raises(TurnNotTaken) as expired:
            await within(conv.close(), what="the close's deadline", timeout=30)
        monkeypatch.undo()
        after = await within(conv.send("two"), what="a turn after the close that was not taken")
        await within(conv.close(), what="a close with nothing in its way")
    assert str(expired.value) == (
        f"conversation {conv.id} did not take its close within 2 s (it rested, and was being "
        "reopened); it may still close: call close() again"
    )
    assert expired.value.conversation_id == conv.id
    assert after.output == "2: two"  # the close never reached a run: it was not closed


async def test_a_send_retried_after_its_turn_rested_is_answered_from_the_record_unreopened(
    temporal_client: Client,
) -> None:
    """A turn recorded by an earlier workflow run than the one that rested (which answers
    no update of it, so the send reopens): the rested run's input lists the turn among its
    recorded runs, so its next run would refuse it as recorded; the client answers from
    the record and starts no run (it started one, which rested again for nothing)."""
    tq = f"idle-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=tq, plugins=[GolemPlugin(counter)]):
        durable = DurableAgent(temporal_client, counter, task_queue=tq)
        conv = await durable.conversation(idle_timeout=timedelta(seconds=1))
        first = await conv.send("one")
        await eventually(closed(temporal_client, conv.id), what="the conversation to rest")
        await conv.send("two")  # the next workflow run
        await eventually(closed(temporal_client, conv.id), what="it to rest again")
        rested_run = (await conv.handle.describe()).run_id
        before = await _runs_of(temporal_client, conv.id)
        again = await within(conv.send("one", run_id=first.run_id), what="the retried send")
        latest = await conv.handle.describe()
        after = await _runs_of(temporal_client, conv.id)
        streamed = conv.send_stream("one", run_id=first.run_id)
        events = await within(_read(streamed), what="the retried streamed send")
        after_stream = await _runs_of(temporal_client, conv.id)
    assert (again.run_id, again.output) == (first.run_id, "1: one")
    assert [m.content for m in again.messages] == ["one", "1: one"]  # through that turn
    assert (streamed.result.run_id, streamed.result.output) == (first.run_id, "1: one")
    assert {e.run_id for e in events} == {first.run_id}
    assert before == after == after_stream == 2
    assert latest.run_id == rested_run  # no run started: the rested one is the latest


async def _runs_of(client: Client, conversation_id: str) -> int:
    """How many workflow runs conversation ``conversation_id`` has had."""
    return len([e async for e in client.list_workflows(f'WorkflowId = "{conversation_id}"')])


async def _read(stream: AsyncIterable[RunEvent]) -> list[RunEvent]:
    return [event async for event in stream]
