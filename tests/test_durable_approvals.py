"""Approvals by update: a durable run waits in its own workflow for a person's decisions,
and the same run goes on when they arrive (standalone or as a conversation's turn)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.worker import Worker
from waiting import eventually

from golem import Agent, ApprovalPolicy, Approve, Ask, Deny, Message, ToolCall, ToolFailed
from golem.client import DurableAgent
from golem.messages import Decision
from golem.messages import ToolCall as Call
from golem.models import FunctionModel
from golem.phases.batch import DENIED_RESULT, NO_DECISION_RESULT
from golem.wire import names
from golem.worker import GolemPlugin


def transfer_agent(
    executed: list[int], approval_timeout: timedelta | None = None
) -> Agent[Any, str]:
    """Asks for a transfer (which needs approval) and a balance lookup (which does not)."""

    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant(
                "",
                [
                    ToolCall(id="t1", name="transfer", args='{"amount": 5}'),
                    ToolCall(id="b1", name="balance", args="{}"),
                ],
            )
        return Message.assistant(" | ".join(m.content for m in results))

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer), name="bank", approval_timeout=approval_timeout
    )

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        executed.append(amount)
        return f"moved {amount}"

    @agent.tool
    def balance() -> str:
        """The balance."""
        return "balance 100"

    return agent


def held_agent(
    executed: list[int], release: asyncio.Event, approval_timeout: timedelta | None
) -> Agent[Any, str]:
    """``transfer_agent`` whose answer after the calls waits for ``release``: the run is
    still going when a late approval arrives."""

    async def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant("", [ToolCall(id="t1", name="transfer", args='{"amount": 5}')])
        await release.wait()
        return Message.assistant(" | ".join(m.content for m in results))

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer), name="held", approval_timeout=approval_timeout
    )

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        executed.append(amount)
        return f"moved {amount}"

    return agent


async def timer_fired(client: Client, workflow_id: str) -> None:
    """Until the workflow's history records a fired timer (the server fires it, worker
    or not)."""
    handle = client.get_workflow_handle(workflow_id)
    kind = EventType.EVENT_TYPE_TIMER_FIRED

    async def fired() -> bool:
        return any([e async for e in handle.fetch_history_events() if e.event_type == kind])

    await eventually(fired, what=f"a fired timer in {workflow_id}", timeout=30)


@asynccontextmanager
async def serve(client: Client, agent: Agent[Any, Any]) -> AsyncIterator[str]:
    task_queue = f"approve-{uuid.uuid4().hex[:12]}"
    plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
    async with Worker(client, task_queue=task_queue, plugins=[plugin]):
        yield task_queue


async def workflow_starts(client: Client, run_id: str) -> int:
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    return sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)


async def test_a_paused_run_waits_in_its_workflow_and_goes_on_when_approved(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        paused = await run.result()
        pending = await run.handle.query("golem.pending", result_type=list[Call])
        metadata = await run.handle.query(
            "__temporal_workflow_metadata", result_type=WorkflowMetadata
        )
        details = metadata.current_details
        status = (await run.handle.describe()).status
        before = list(executed)
        done = await run.approve({"t1": True})
    assert paused.pending_approvals == [ToolCall(id="t1", name="transfer", args='{"amount": 5}')]
    assert paused.run_id == run.run_id and before == []
    assert status == WorkflowExecutionStatus.RUNNING  # waiting, not ended
    assert [c.id for c in pending] == ["t1"]
    assert "waiting for approval" in details and "transfer (t1)" in details
    assert done.run_id == run.run_id
    assert done.output == "moved 5 | balance 100"
    assert executed == [5]
    assert done.pending_approvals == []
    assert await workflow_starts(temporal_client, run.run_id) == 1  # the same run, no new one


async def test_a_denied_call_is_closed_with_the_denied_result_and_never_runs(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        done = await run.approve({"t1": False})
    assert executed == []
    denied = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "t1")
    assert denied.failed and denied.content == DENIED_RESULT
    assert done.output == f"{DENIED_RESULT} | balance 100"


async def test_the_approval_timeout_answers_what_is_still_pending_with_no_decision(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed, approval_timeout=timedelta(milliseconds=300))
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        paused = await run.result()
        done = await run.result(final=True)  # nobody answers: the timeout decides
    assert paused.paused and not done.paused
    assert executed == []
    assert done.output == f"{NO_DECISION_RESULT} | balance 100"  # not read as a denial
    late = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "t1")
    assert late.failed and late.content == NO_DECISION_RESULT


async def test_approving_a_call_that_is_not_pending_is_refused_and_nothing_changes(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        with pytest.raises(ValueError, match=r"not pending: \['nope'\]"):
            await run.approve({"nope": True})
        done = await run.approve({"t1": True})
        with pytest.raises(ValueError, match=r"has ended|not waiting"):
            await run.approve({"t1": True})
    assert executed == [5] and done.output == "moved 5 | balance 100"


async def test_a_conversation_turn_waits_for_approvals_and_approve_finishes_it(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")
        with pytest.raises(ValueError, match="waits for approvals"):
            await conv.send("and another thing")
        done = await conv.approve({"t1": True})
        transcript = await conv.messages()
        runs = await conv.runs()
    assert paused.paused and paused.run_id == done.run_id
    assert runs == [done.run_id]
    assert done.output == "moved 5 | balance 100" and executed == [5]
    assert transcript == done.messages
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "tool", "assistant"]


async def updates_accepted(client: Client, run_id: str) -> int:
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    kind = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for e in events if e.event_type == kind)


async def test_an_agent_known_by_name_records_no_outcome_update_unless_it_can_pause(
    temporal_client: Client,
) -> None:
    """A client that has only the agent's name cannot tell whether a run may wait for an
    approval; the worker can, and refuses the outcome update (nothing recorded) when not."""
    plain = Agent(FunctionModel(lambda m, t: Message.assistant("hello")), name="plain")
    payer = transfer_agent([])
    task_queue = f"approve-{uuid.uuid4().hex[:12]}"
    async with Worker(temporal_client, task_queue=task_queue, plugins=[GolemPlugin(plain, payer)]):
        by_name = DurableAgent(temporal_client, "plain", task_queue=task_queue)
        first = await by_name.run("hi")
        second = await by_name.run("again")
        paused = await DurableAgent(temporal_client, payer.name, task_queue=task_queue).run("pay")
    assert first.output == second.output == "hello"
    assert await updates_accepted(temporal_client, first.run_id) == 0
    assert await updates_accepted(temporal_client, second.run_id) == 0
    assert by_name.may_pause is False  # learnt from the first run: the second asked nothing
    assert paused.pending_approvals and paused.pending_approvals[0].name == "transfer"


async def test_a_partial_approval_returns_with_the_rest_pending_and_an_empty_one_is_refused(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        paused = await run.result()
        with pytest.raises(ValueError, match=r"approvals name no call; pending: \['t1', 't2'\]"):
            await run.approve({})
        partial = await run.approve({"t1": True})
        before = list(executed)  # a partial approval runs nothing yet
        with pytest.raises(ValueError, match=r"calls \['t1'\] are decided already"):
            await run.approve({"t1": False})
        done = await run.approve({"t2": False})
    assert [c.id for c in paused.pending_approvals] == ["t1", "t2"]
    assert [c.id for c in partial.pending_approvals] == ["t2"] and before == []
    assert done.output == f"moved 1 | {DENIED_RESULT}" and executed == [1]


def asks_two(executed: list[int]) -> Agent[Any, str]:
    """Asks to approve two transfers at once."""

    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return Message.assistant(" | ".join(m.content for m in results))
        calls = [ToolCall(id=f"t{n}", name="transfer", args=f'{{"amount": {n}}}') for n in (1, 2)]
        return Message.assistant("", calls)

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="two")

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        executed.append(amount)
        return f"moved {amount}"

    return agent


async def test_an_approval_after_the_timeout_is_refused_naming_it_and_the_call_never_runs(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    release = asyncio.Event()
    agent = held_agent(executed, release, timedelta(milliseconds=300))
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        await timer_fired(temporal_client, run.run_id)
        with pytest.raises(ValueError, match=r"approval timeout \(0.3 s\) ran out.*\['t1'\]"):
            await run.approve({"t1": True})
        release.set()
        done = await run.result(final=True)
    assert executed == []
    assert done.output == NO_DECISION_RESULT


async def test_an_approval_sent_while_no_worker_ran_past_the_timeout_loses_to_it(
    temporal_client: Client,
) -> None:
    """The timeout elapsed while no worker ran; the approval arrives with the restarted
    worker: the workflow's clock has passed the deadline, so the timeout wins."""
    executed: list[int] = []
    release = asyncio.Event()
    agent = held_agent(executed, release, timedelta(seconds=1))
    task_queue = f"approve-{uuid.uuid4().hex[:12]}"
    durable = DurableAgent(temporal_client, agent, task_queue=task_queue)

    def worker() -> Worker:
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
        return Worker(temporal_client, task_queue=task_queue, plugins=[plugin])

    async with worker():
        run = await durable.start("pay")
        await run.result()
    await timer_fired(temporal_client, run.run_id)  # no worker: the server fired it
    late = asyncio.ensure_future(run.approve({"t1": True}))
    async with worker():
        with pytest.raises(ValueError, match=r"approval timeout \(1 s\) ran out"):
            await late
        release.set()
        done = await run.result(final=True)
    assert executed == []
    assert done.output == NO_DECISION_RESULT


async def test_an_edited_approval_runs_the_approved_arguments_and_records_who_decided(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        done = await run.approve({"t1": Approve(args={"amount": 3})}, by="alice")
    assert executed == [3]
    assert done.messages[1].tool_calls[0] == ToolCall(
        id="t1", name="transfer", args='{"amount": 5}'
    )  # what the model asked for stays on its call
    tool = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "t1")
    assert tool.decision is not None
    assert (tool.decision.approved, tool.decision.args, tool.decision.by) == (
        True,
        '{"amount":3}',
        "alice",
    )
    assert tool.decision.at  # when, stamped by the client that decided
    assert tool.content == (
        "[a person (alice) changed this call's arguments before it ran; it ran with "
        '{"amount":3}]\nmoved 3'
    )


async def test_a_denial_with_a_reason_is_what_the_model_reads_durably(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        done = await run.approve({"t1": Deny(reason="over the limit")}, by="bob")
    assert executed == []
    assert done.output == "over the limit | balance 100"
    tool = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "t1")
    assert tool.failed and tool.decision is not None
    assert (tool.decision.approved, tool.decision.reason, tool.decision.by) == (
        False,
        "over the limit",
        "bob",
    )


async def test_bad_decisions_are_refused_before_anything_is_sent_and_the_run_still_waits(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        with pytest.raises(ValueError) as wrong_type:
            await run.approve({"t1": "yes"})  # type: ignore[dict-item]
        with pytest.raises(ValueError) as bad_args:
            await run.approve({"t1": Approve(args={"amount": "lots"})})
        by_name = await DurableAgent(temporal_client, "bank", task_queue=tq).attach(run.run_id)
        with pytest.raises(ValueError) as refused_by_run:
            await by_name.approve({"t1": Approve(args={"sum": 1})})
        pending = await run.handle.query("golem.pending", result_type=list[Call])
        done = await run.approve({"t1": True})
    assert str(wrong_type.value) == (
        "the decision for call 't1' is 'yes' (str): give True, False, "
        "Approve(args=..., always=...) or Deny(reason=...)"
    )
    assert str(bad_args.value) == (
        "the edited arguments are invalid: call 't1' (transfer): invalid arguments: amount: "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    assert str(refused_by_run.value).startswith(
        f"run {run.run_id}: the edited arguments are invalid: call 't1' (transfer): "
    )
    assert [c.id for c in pending] == ["t1"]
    assert executed == [5] and done.output == "moved 5 | balance 100"


async def test_deciding_twice_names_who_decided_and_a_run_waiting_for_nothing_says_its_state(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await run.result()
        still = await run.approve({"t1": True}, by="alice")
        with pytest.raises(ValueError) as twice:
            await run.approve({"t1": False}, by="bob")
        await run.approve({"t2": True}, by="bob")
        with pytest.raises(ValueError) as ended:
            await run.approve({"t2": True})
    assert [c.id for c in still.pending_approvals] == ["t2"]
    assert str(twice.value) == (
        f"run {run.run_id}: calls ['t1'] are decided already (t1 by alice); pending: ['t2']"
    )
    assert str(ended.value) == f"run {run.run_id} has ended (completed): nothing to approve"
    assert executed == [1, 2]


async def test_a_conversation_turn_takes_edits_and_reasons_and_records_the_decider(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        await conv.send("pay")
        with pytest.raises(ValueError) as bad_args:
            await conv.approve({"t1": Approve(args={"amount": "lots"})})
        done = await conv.approve(
            {"t1": Approve(args={"amount": 9}), "t2": Deny(reason="not today")}, by="carol"
        )
        transcript = await conv.messages()
    assert str(bad_args.value).startswith("the edited arguments are invalid: call 't1'")
    assert executed == [9]
    tools = {m.tool_call_id: m for m in transcript if m.role == "tool"}
    assert tools["t1"].decision is not None and tools["t1"].decision.by == "carol"
    assert tools["t1"].decision.args == '{"amount":9}'
    assert tools["t2"].content == "not today" and tools["t2"].failed
    assert done.output.endswith("not today")


async def test_an_evaluator_runs_as_an_activity_and_a_person_decides_what_it_leaves(
    temporal_client: Client,
) -> None:
    executed: list[int] = []

    async def reviewer(ctx: Any, call: Call) -> Approve | Ask:
        return Approve() if call.id == "t1" else Ask()

    agent = asks_two(executed)
    agent.approval_policy = ApprovalPolicy(evaluator=reviewer)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        paused = await run.result()
        done = await run.approve({"t2": Deny(reason="no")}, by="dana")
        events = [e async for e in run.handle.fetch_history_events()]
    assert [c.id for c in paused.pending_approvals] == ["t2"]
    assert executed == [1]
    tools = {m.tool_call_id: m for m in done.messages if m.role == "tool"}
    assert tools["t1"].decision is not None and tools["t1"].decision.by == "evaluator:reviewer"
    assert tools["t2"].decision is not None and tools["t2"].decision.by == "dana"
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled.count("golem.evaluate_approval") == 2  # once per call, recorded


def slow_reviewer(thinking: asyncio.Event, cancelled: asyncio.Event, approves: str = "") -> Any:
    """An evaluator that approves call ``approves`` at once and thinks about any other until
    cancelled (it never answers by itself): ``thinking`` once it does, ``cancelled`` after."""

    async def reviewer(ctx: Any, call: Call) -> Approve | Ask:
        if call.id == approves:
            return Approve()
        thinking.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Ask()

    return reviewer


async def test_a_person_who_answers_first_cancels_the_evaluation(
    temporal_client: Client,
) -> None:
    """The evaluator of t2 is still thinking when a person answers t2: that answer decides,
    the evaluation is cancelled (its activity told so through its heartbeat), and nothing
    is decided twice; t1's evaluation, done first, stands."""
    executed: list[int] = []
    thinking, cancelled = asyncio.Event(), asyncio.Event()
    agent = asks_two(executed)
    agent.approval_policy = ApprovalPolicy(evaluator=slow_reviewer(thinking, cancelled, "t1"))
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await asyncio.wait_for(thinking.wait(), 30)
        done = await run.approve({"t2": Deny(reason="not today")}, by="dana")
        with pytest.raises(ValueError, match=r"has ended \(completed\): nothing to approve"):
            await run.approve({"t2": True}, by="erin")
        await asyncio.wait_for(cancelled.wait(), 30)  # the evaluation did not run on
        events = [e async for e in run.handle.fetch_history_events()]
    assert executed == [1]
    tools = {m.tool_call_id: m for m in done.messages if m.role == "tool"}
    assert tools["t1"].decision is not None and tools["t1"].decision.by == "evaluator:reviewer"
    assert tools["t2"].decision is not None and tools["t2"].decision.by == "dana"
    assert tools["t2"].content.endswith("not today")
    kinds = [e.event_type for e in events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds


def delivery_agent(executed: list[int]) -> Agent[Any, str]:
    """Asks the application for a date (a client-run tool) and a person for a transfer."""

    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return Message.assistant(" | ".join(m.content for m in results))
        calls = [
            ToolCall(id="d1", name="pick_date", args="{}"),
            ToolCall(id="t1", name="transfer", args='{"amount": 5}'),
        ]
        return Message.assistant("", calls)

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="delivery")
    agent.external_tool(
        "pick_date", "Ask the user for a date", {"type": "object"}, result_schema={"type": "string"}
    )

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        executed.append(amount)
        return f"moved {amount}"

    return agent


async def test_a_run_waits_in_its_workflow_for_a_client_run_tools_result_and_an_approval(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = delivery_agent(executed)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("deliver")
        paused = await run.result()
        with pytest.raises(ValueError) as bad:
            await run.complete({"d1": 42})
        still = await run.complete({"d1": "2026-12-24"}, by="app")
        done = await run.approve({"t1": True}, by="erin")
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        turn = await conv.send("deliver")
        failed = await conv.approve({"t1": False})
        ended = await conv.complete({"d1": ToolFailed("user closed the dialog")})
    assert [c.id for c in paused.pending_calls] == ["d1"]
    assert [c.id for c in paused.pending_approvals] == ["t1"]
    assert (
        str(bad.value)
        == "the result for call 'd1' does not match its schema: 42 is not of type 'string'"
    )
    assert [c.id for c in still.pending_approvals] == ["t1"] and still.pending_calls == []
    assert done.output == "2026-12-24 | moved 5" and executed == [5]
    assert [c.id for c in turn.pending_calls] == ["d1"]
    assert [c.id for c in failed.pending_calls] == ["d1"]
    assert ended.output == f"user closed the dialog | {DENIED_RESULT}"


async def test_a_persons_answer_cancels_that_calls_evaluation_at_once(
    temporal_client: Client,
) -> None:
    """Both calls are being evaluated; a person answers t2: t2's evaluation is cancelled
    then (not once t1's ends), and t1's evaluator still decides t1."""
    executed: list[int] = []
    thinking = {c: asyncio.Event() for c in ("t1", "t2")}
    cancelled = {c: asyncio.Event() for c in ("t1", "t2")}
    release = asyncio.Event()

    async def reviewer(ctx: Any, call: Call) -> Approve | Ask:
        thinking[call.id].set()
        try:
            if call.id == "t1":
                await release.wait()
                return Approve()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled[call.id].set()
            raise
        return Ask()

    agent = asks_two(executed)
    agent.approval_policy = ApprovalPolicy(evaluator=reviewer)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("pay")
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in thinking.values())), 30)
        answered = asyncio.ensure_future(run.approve({"t2": Deny(reason="no")}, by="dana"))
        await asyncio.wait_for(cancelled["t2"].wait(), 30)
        t1_still_thinking = not cancelled["t1"].is_set()
        release.set()
        done = await asyncio.wait_for(answered, 30)
    assert t1_still_thinking
    assert executed == [1] and not done.paused
    tools = {m.tool_call_id: m for m in done.messages if m.role == "tool"}
    assert tools["t1"].decision is not None and tools["t1"].decision.by == "evaluator:reviewer"
    assert tools["t2"].decision is not None and tools["t2"].decision.by == "dana"


def note_agent() -> Agent[Any, str]:
    """Asks to write a note (which needs approval): its one argument is any text."""

    def answer(messages: list[Message], tools: Any) -> Message:
        last = messages[-1]
        if last.role == "user":
            return Message.assistant("", [ToolCall(id="n1", name="note", args='{"text": "hi"}')])
        return Message.assistant(f"noted {len(last.content)} characters")

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name=f"notes_{uuid.uuid4().hex[:6]}")

    @agent.tool(requires_approval=True)
    def note(text: str) -> str:
        """Write a note."""
        return text

    return agent


async def test_edited_arguments_too_large_to_carry_are_refused_and_the_turn_waits_on(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """Arguments the tool takes but no activity could carry (3 MB): refused, by the client
    that holds the agent and by one that knows it by name (the worker's validator), with
    nothing recorded; before, they were taken and the workflow's task failed for ever."""
    agent = note_agent()
    huge = Approve(args={"text": "a" * 3_000_000})
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        assert [c.id for c in (await conv.send("go")).pending_approvals] == ["n1"]
        with pytest.raises(ValueError, match=r"call 'n1': 3000011 bytes, over the limit"):
            await conv.approve({"n1": huge})
        by_name = await DurableAgent(temporal_client, agent.name, task_queue=tq).conversation(
            conv.id
        )
        with pytest.raises(ValueError, match=r"call 'n1': 3000011 bytes, over the limit"):
            await by_name.approve({"n1": huge})
        # Sent raw, as another SDK would: the worker's validator refuses it (1 MB: an update
        # past Temporal's 2 MB payload limit wedges the workflow whatever its validator says,
        # since the task that rejects it carries it back).
        raw = {"n1": Decision(approved=True, args=json.dumps({"text": "a" * 1_000_000}))}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await conv.handle.execute_update(names.APPROVE, raw)
        done = await conv.approve({"n1": Approve(args={"text": "short"})})
    assert "1000012 bytes, over the limit" in str(refused.value.cause)
    [result] = [m for m in done.messages if m.role == "tool" and m.tool_call_id == "n1"]
    assert "short" in result.content and done.output.startswith("noted")


async def test_a_client_run_tools_result_too_large_to_carry_is_refused_and_the_turn_waits_on(
    temporal_client: Client, conversation_shapes: str
) -> None:
    """A result no activity could carry on to the model (3 MB): refused by the client, with
    nothing recorded; before, it was taken and the workflow's task failed for ever."""
    agent = delivery_agent([])
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        assert [c.id for c in (await conv.send("deliver")).pending_calls] == ["d1"]
        with pytest.raises(ValueError, match=r"call 'd1': 3000000 bytes, over the limit"):
            await conv.complete({"d1": "a" * 3_000_000})
        still = await conv.complete({"d1": "2026-12-24"})
        done = await conv.approve({"t1": False})
    assert [c.id for c in still.pending_approvals] == ["t1"]
    assert done.output.startswith("2026-12-24 | ")
