"""The client's one recovery path for a conversation's turn (golem.client.recovery), with a
deadline the caller sets: a turn the conversation does not take in time (no worker, or a
conversation that drains to continue as new) fails naming the conversation and the turn,
and the same send, later, is that turn; the turn's own run is not bounded; an update whose
answer is lost is asked for again."""

from __future__ import annotations

import asyncio
import gc
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from test_conversation import echo_agent, serve
from test_conversation_boundaries import budgeted, continued
from test_pinned_iii_conversations import gated_echo
from waiting import eventually, within

from golem import Agent, Message
from golem.client import DurableAgent, DurableConversation, TurnNotTaken
from golem.client.recovery import TurnRecovery, take_turn
from golem.models import FunctionModel
from golem.wire import TurnInput, names
from golem.worker import GolemPlugin


async def test_a_turn_no_worker_takes_fails_at_the_deadline_naming_it_and_a_resend_is_that_turn(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(temporal_client, agent, task_queue=task_queue)
    conv = await durable.conversation(recovery_timeout=timedelta(seconds=1.5))
    run_id = str(uuid.uuid4())
    with pytest.raises(TurnNotTaken) as expired:  # no worker serves the task queue yet
        await within(conv.send("hello", run_id=run_id), what="the deadline", timeout=30)
    assert str(expired.value) == (
        f"conversation {conv.id} did not take turn {run_id} within 1.5 s (no worker accepted "
        f"it); it may still run: send it again with run_id={run_id!r} to get its result"
    )
    assert (expired.value.conversation_id, expired.value.run_id) == (conv.id, run_id)
    assert isinstance(expired.value, TimeoutError)
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        again = await durable.conversation(conv.id)  # a new handle, as after a restart
        result = await within(again.send("hello", run_id=run_id), what="the resent turn")
        runs = await again.runs()
    assert result.run_id == run_id and result.output == "1: hello"
    assert runs == [run_id]  # the first send and the resend are one turn


async def test_the_deadline_bounds_taking_the_turn_not_the_turns_own_run(
    temporal_client: Client,
) -> None:
    release = asyncio.Event()

    async def slow(messages: list[Message], tools: Any) -> Message:
        await release.wait()  # the turn runs past the recovery deadline
        return Message.assistant("done at last")

    agent: Agent[Any, str] = Agent(FunctionModel(slow), name="slow")
    async with serve(temporal_client, agent) as tq:
        durable: DurableAgent[str] = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation(recovery_timeout=timedelta(seconds=1))
        run_id = str(uuid.uuid4())
        turn = asyncio.ensure_future(conv.send("take your time", run_id=run_id))
        child = temporal_client.get_workflow_handle(run_id)

        async def started() -> bool:
            try:
                return (await child.describe()).parent_id == conv.id
            except Exception:
                return False

        loop = asyncio.get_running_loop()
        await eventually(started, what="the turn's run to start", timeout=30)
        past = loop.time() + 2
        await eventually(lambda: loop.time() > past, what="the deadline to pass", timeout=5)
        assert not turn.done()
        release.set()
        result = await within(turn, what="the slow turn")
    assert result.output == "done at last" and result.run_id == run_id


async def test_a_send_whose_update_answer_is_lost_is_sent_again_and_answered_by_its_turn(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, model = echo_agent("echo-lost-answer")
    polls: list[str] = []
    poll = WorkflowUpdateHandle._poll_until_outcome

    async def lose_the_first(self: WorkflowUpdateHandle[Any], *args: Any, **kwargs: Any) -> None:
        polls.append(self.id)
        if len(polls) == 1:  # the connection drops as the answer would arrive
            raise RPCError("connection lost", RPCStatusCode.UNAVAILABLE, b"")
        await poll(self, *args, **kwargs)

    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        monkeypatch.setattr(WorkflowUpdateHandle, "_poll_until_outcome", lose_the_first)
        result = await within(conv.send("hello"), what="the send after a lost answer")
        monkeypatch.undo()
        runs = await conv.runs()
    assert result.output == "1: hello" and runs == [result.run_id]
    assert len(polls) >= 2 and len(set(polls)) == 1  # the same update, asked again
    assert len(model.requests) == 1  # the turn ran once


async def test_a_send_refused_until_past_the_deadline_while_the_conversation_drains_names_why(
    temporal_client: Client,
) -> None:
    agent, model, gate = gated_echo("echo-draining")
    async with serve(temporal_client, agent) as tq:
        budget = await budgeted(temporal_client, agent, tq, turns_per_run=1)
        durable: DurableAgent[str] = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = DurableConversation(durable, budget.handle, timedelta(seconds=1))
        first = asyncio.ensure_future(conv.send("two"))  # held at its model: it drains
        await eventually(lambda: len(model.requests) == 1, what="the first turn at its model")
        run_id = str(uuid.uuid4())
        with pytest.raises(TurnNotTaken) as expired:
            await within(conv.send("next", run_id=run_id), what="the deadline", timeout=30)
        gate.set()
        one = await within(first, what="the first turn")
        two = await within(conv.send("next", run_id=run_id), what="the send, once switched")
        runs = await conv.runs()
        switches = await continued(temporal_client, conv.id)
    assert str(expired.value) == (
        f"conversation {conv.id} did not take turn {run_id} within 1 s (it was continuing "
        f"as new); it may still run: send it again with run_id={run_id!r} to get its result"
    )
    assert isinstance(expired.value.__cause__, WorkflowUpdateFailedError)  # the last refusal
    assert (one.output, two.output) == ("1: two", "2: next")
    assert runs == [one.run_id, run_id] and switches >= 1


async def test_a_streamed_turn_no_worker_takes_fails_at_the_deadline_too(
    temporal_client: Client,
) -> None:
    agent, _ = echo_agent()
    task_queue = f"conv-{uuid.uuid4().hex[:12]}"
    durable: DurableAgent[str] = DurableAgent(temporal_client, agent, task_queue=task_queue)
    conv = await durable.conversation(recovery_timeout=timedelta(seconds=1))
    run_id = str(uuid.uuid4())

    async def read() -> list[object]:
        return [event async for event in conv.send_stream("hello", run_id=run_id)]

    with pytest.raises(TurnNotTaken) as expired:
        await within(read(), what="the deadline", timeout=30)
    assert (expired.value.conversation_id, expired.value.run_id) == (conv.id, run_id)
    assert "(no worker accepted it)" in str(expired.value)


class _Closed:
    """A conversation's handle whose run has closed (it rests) until a start of its own."""

    def __init__(self) -> None:
        self.started = False

    async def start_update(self, *args: Any, **kwargs: Any) -> Any:
        if not self.started:
            raise RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b"")
        return _Answered()


class _Answered:
    async def result(self) -> str:
        return "the turn's answer"


class _NoMultiOperation:
    """A server with update-with-start switched off: the SDK settles the start with the
    error it raises."""

    def __init__(self) -> None:
        self.carried: list[WithStartWorkflowOperation[Any, Any]] = []

    async def start_update_with_start_workflow(
        self, *args: Any, start_workflow_operation: Any, **kwargs: Any
    ) -> Any:
        self.carried.append(start_workflow_operation)
        refused = RPCError(
            "ExecuteMultiOperation is disabled", RPCStatusCode.PERMISSION_DENIED, b""
        )
        start_workflow_operation._workflow_handle.set_exception(refused)
        raise refused


async def test_a_server_that_refuses_the_carried_start_gets_a_start_of_its_own_at_once() -> None:
    """Not a try a second for the whole deadline: the refusal is the server's word. The
    start's own copy of the error is read, so asyncio reports nothing as never retrieved."""
    handle, server, asked = _Closed(), _NoMultiOperation(), []

    async def reopen(carry: bool) -> WithStartWorkflowOperation[Any, Any] | bool:
        asked.append(carry)
        if carry:
            return WithStartWorkflowOperation(
                names.CONVERSATION_WORKFLOW,
                None,
                id="c1",
                task_queue="q",
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        handle.started = True
        return True

    async def take() -> Any:  # its tries and their errors go when it returns
        recovery = TurnRecovery("c1", "r1", timedelta(seconds=30))
        turn = TurnInput(run_id="r1", prompt="hi")
        return await take_turn(server, handle, turn, recovery, reopen)  # type: ignore[arg-type]

    unhandled: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    try:
        answer = await asyncio.wait_for(take(), 10)
        server.carried.clear()
        gc.collect()
    finally:
        loop.set_exception_handler(handler)  # the session's loop serves every later test
    assert answer == "the turn's answer" and asked == [True, False]
    assert [context["message"] for context in unhandled] == []
