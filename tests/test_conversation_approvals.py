"""Approvals in a durable conversation: deny, partial and empty approvals, the approval
timeout and late approvals, close while a turn waits, a send while it waits, what the UI
shows, and no continue-as-new while a turn waits."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import (
    HandleSignalInput,
    Interceptor,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)
from test_conversation_boundaries import budgeted, continued
from test_durable_approvals import (
    asks_two,
    held_agent,
    serve,
    slow_reviewer,
    timer_fired,
    transfer_agent,
)
from waiting import eventually

from golem import Agent, ApprovalPolicy, Approve, Ask, Deny, Message, Rule, ToolCall
from golem.client import ConversationClosedError, DurableAgent, pending
from golem.models import FunctionModel
from golem.phases.batch import DENIED_RESULT, NO_DECISION_RESULT
from golem.wire import Paused, names
from golem.worker import GolemPlugin


async def details(conv: object) -> str:
    metadata = await conv.handle.query(  # type: ignore[attr-defined]
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    return str(metadata.current_details)


async def test_a_denied_call_in_a_conversation_never_runs_and_the_turn_ends(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")
        waiting = await details(conv)
        with pytest.raises(ValueError, match=r"waits for approvals of \['t1'\]"):
            await conv.send("and another thing")
        done = await conv.approve({"t1": False})
        after = await details(conv)
        following = await conv.send("next")
        runs = await conv.runs()
    assert paused.paused and executed == []
    assert "waiting for approval** transfer (t1)" in waiting  # the UI shows what waits
    assert "waiting for approval** none" in after
    assert done.run_id == paused.run_id and not done.paused
    assert done.output == f"{DENIED_RESULT} | balance 100"
    denied = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "t1")
    assert denied.failed and denied.content == DENIED_RESULT
    assert runs == [done.run_id, following.run_id]
    assert following.messages[: len(done.messages)] == done.messages


async def test_the_approval_timeout_answers_no_decision_and_the_conversation_takes_turns_again(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed, approval_timeout=timedelta(milliseconds=300))
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")
        run = await DurableAgent(temporal_client, agent, task_queue=tq).attach(paused.run_id)
        timed_out = await run.result(final=True)  # nobody answers: the timeout decides

        async def settled() -> bool:  # the conversation learns of it without a message
            return "waiting for approval** none" in await details(conv)

        await eventually(settled, what="the conversation to show no turn waiting")
        following = await conv.send("next")
        transcript = await conv.messages()
        timers = [  # the conversation's own timer, named in the UI (not "2 (300ms)")
            json.loads(e.user_metadata.summary.data)
            async for e in conv.handle.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        ]
    assert f"approvals due: run {paused.run_id}'s waiting calls time out" in timers
    assert executed == []
    assert timed_out.output == f"{NO_DECISION_RESULT} | balance 100"
    assert transcript == following.messages
    assert transcript[: len(timed_out.messages)] == timed_out.messages  # the turn joined it
    assert [m.role for m in transcript][-2:] == ["user", "assistant"]


async def test_close_while_a_turn_waits_denies_it_and_the_turn_ends_in_the_transcript(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        paused = await conv.send("pay")
        await conv.close()
        status = (await conv.handle.describe()).status
        run = await durable.attach(paused.run_id)
        child = await run.result(final=True)
        with pytest.raises(ConversationClosedError):
            await conv.approve({"t1": True})
        transcript = await conv.messages()
    assert status == WorkflowExecutionStatus.COMPLETED
    assert executed == []
    assert child.output == f"{DENIED_RESULT} | balance 100"  # denied, not cancelled mid-run
    assert transcript == child.messages


async def test_no_continue_as_new_while_a_turn_waits_for_approvals(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = transfer_agent(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1)
        paused = await conv.send("pay")
        switches = await continued(temporal_client, conv.id)
        done = await conv.approve({"t1": True})
        following = await conv.send("next")
        runs = await conv.runs()
        transcript = await conv.messages()
    assert paused.paused and switches == 0
    assert done.output == "moved 5 | balance 100" and executed == [5]
    assert runs == [paused.run_id, following.run_id]
    assert transcript == following.messages
    assert transcript[: len(done.messages)] == done.messages


def asks_twice() -> Agent[Any, str]:
    """Asks to approve one transfer, then (whatever the answer) a second one."""

    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if len(results) < 2:
            n = len(results) + 1
            return Message.assistant("", [ToolCall(id=f"t{n}", name="transfer", args="{}")])
        return Message.assistant(" | ".join(m.content for m in results))

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer), name="twice", approval_timeout=timedelta(milliseconds=300)
    )

    @agent.tool(requires_approval=True)
    def transfer() -> str:
        """Move money."""
        return "moved"

    return agent


async def test_a_run_that_asks_again_after_the_timeout_waits_for_the_new_calls(
    temporal_client: Client,
) -> None:
    agent = asks_twice()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")

        async def asks_for_t2() -> bool:  # t1 times out, then the run asks for t2
            return "transfer (t2)" in await details(conv)

        await eventually(asks_for_t2, what="the run to wait for t2")
        done = await conv.approve({"t2": True})
    assert paused.pending_approvals[0].id == "t1"
    assert done.output == f"{NO_DECISION_RESULT} | moved"


async def test_close_denies_every_call_a_waiting_run_asks_for_until_it_ends(
    temporal_client: Client,
) -> None:
    agent = asks_twice()
    agent.approval_timeout = None
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        paused = await conv.send("pay")
        async with asyncio.timeout(20):
            await conv.close()  # returns: the run's second request is denied as well
        child = await (await durable.attach(paused.run_id)).result(final=True)
        transcript = await conv.messages()
    assert child.output == f"{DENIED_RESULT} | {DENIED_RESULT}"
    assert transcript == child.messages


async def test_a_partial_approval_returns_with_the_rest_pending_and_the_conversation_goes_on(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")
        async with asyncio.timeout(20):  # it used to freeze the conversation for good
            partial = await conv.approve({"t1": True})
            waiting = await details(conv)
            before = list(executed)
            done = await conv.approve({"t2": False})
            following = await conv.send("next")
            await conv.close()
    assert [c.id for c in paused.pending_approvals] == ["t1", "t2"]
    assert partial.paused and [c.id for c in partial.pending_approvals] == ["t2"]
    assert partial.run_id == paused.run_id and before == []
    assert "waiting for approval** transfer (t2)" in waiting
    assert done.output == f"moved 1 | {DENIED_RESULT}" and executed == [1]
    assert following.messages[: len(done.messages)] == done.messages


async def test_an_empty_or_unknown_approval_is_refused_and_the_turn_still_waits(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        await conv.send("pay")
        async with asyncio.timeout(20):
            with pytest.raises(
                ValueError, match=r"approvals name no call; pending: \['t1', 't2'\]"
            ):
                await conv.approve({})
            with pytest.raises(ValueError, match=r"not pending: \['nope'\]"):
                await conv.approve({"nope": True})
            waiting = await details(conv)
            done = await conv.approve({"t1": True, "t2": True})
            await conv.close()
    assert "transfer (t1), transfer (t2)" in waiting
    assert done.output == "moved 1 | moved 2" and executed == [1, 2]


async def test_a_late_approval_in_a_conversation_is_refused_naming_the_timeout(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    release = asyncio.Event()
    agent = held_agent(executed, release, timedelta(milliseconds=300))
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")
        await timer_fired(temporal_client, conv.id)  # the conversation keeps its turn's timeout
        with pytest.raises(ValueError, match=r"approval timeout \(0.3 s\) ran out.*\['t1'\]"):
            await conv.approve({"t1": True})
        release.set()
        await conv.close()  # once the turn ends
        transcript = await conv.messages()
    assert executed == []
    late = next(m for m in transcript if m.role == "tool")
    assert late.failed and late.content == NO_DECISION_RESULT
    assert transcript[-1].content == NO_DECISION_RESULT and paused.pending_approvals


async def test_a_conversations_approval_sent_while_no_worker_ran_past_the_timeout_loses(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    release = asyncio.Event()
    agent = held_agent(executed, release, timedelta(seconds=1))
    task_queue = f"approve-{uuid.uuid4().hex[:12]}"
    durable = DurableAgent(temporal_client, agent, task_queue=task_queue)

    def worker() -> Worker:
        plugin = GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))
        return Worker(temporal_client, task_queue=task_queue, plugins=[plugin])

    async with worker():
        conv = await durable.conversation()
        await conv.send("pay")
    await timer_fired(temporal_client, conv.id)  # no worker: the server fired it
    late = asyncio.ensure_future(conv.approve({"t1": True}))
    async with worker():
        with pytest.raises(ValueError, match=r"approval timeout \(1 s\) ran out"):
            await late
        release.set()
        await conv.close()
        transcript = await conv.messages()
    assert executed == []
    assert [m.content for m in transcript if m.role == "tool"] == [NO_DECISION_RESULT]


def asks_each_turn(executed: list[int]) -> Agent[Any, str]:
    """Asks for a transfer (which needs approval) on every user message."""

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user":
            call = ToolCall(id=f"t{len(messages)}", name="transfer", args='{"amount": 1}')
            return Message.assistant("", [call])
        return Message.assistant(messages[-1].content)

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="each")

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        executed.append(amount)
        return f"moved {amount}"

    return agent


async def test_approve_always_holds_across_turns_and_continue_as_new_until_revoked(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_each_turn(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1)
        paused = await conv.send("pay")
        call_id = paused.pending_approvals[0].id
        await conv.approve({call_id: Approve(always=True)}, by="alice")
        policy = await conv.approvals_policy()
        second = await conv.send("pay again")  # after continue-as-new: asks nobody
        switches = await continued(temporal_client, conv.id)
        with pytest.raises(ValueError) as unknown:
            await conv.revoke("refund")
        left = await conv.revoke("transfer")
        third = await conv.send("and again")
    assert set(policy) == {"transfer"}
    assert (policy["transfer"].by, policy["transfer"].always) == ("alice", True)
    assert not second.paused and second.output == "moved 1" and switches >= 1
    assert str(unknown.value) == (
        "tool 'refund' has no standing approval in this conversation; standing: ['transfer']"
    )
    assert left == {}
    assert third.paused  # revoked: it asks again
    assert executed == [1, 1]


async def test_a_policy_set_on_a_running_conversation_holds_from_its_next_turn_on(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_each_turn(executed)
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1)
        first = await conv.send("pay")
        await conv.approve({first.pending_approvals[0].id: True})
        with pytest.raises(ValueError) as predicate:
            await conv.set_approval_policy(
                ApprovalPolicy(rules=[Rule(tool="transfer", when=lambda ctx, args: True)])
            )
        await conv.set_approval_policy(
            ApprovalPolicy(rules=[Rule(tool="trans*", decide="deny", reason="frozen")])
        )
        second = await conv.send("pay again")  # after continue-as-new: the rule denies
        switches = await continued(temporal_client, conv.id)
        await conv.set_approval_policy(
            ApprovalPolicy(rules=[Rule(tool="transfer", decide="allow")])
        )
        third = await conv.send("and again")
    assert str(predicate.value) == (
        "the rule for tool 'transfer' has a when= predicate: a policy set on a running "
        "conversation keeps rules by tool name or glob only"
    )
    assert not second.paused and second.output == "frozen" and switches >= 1
    denied = second.messages[-2]
    assert denied.decision is not None and denied.decision.by == "policy:trans*"
    assert not third.paused and third.output == "moved 1"
    assert executed == [1, 1]


async def test_a_person_who_answers_a_conversation_turn_first_cancels_the_evaluation(
    temporal_client: Client,
) -> None:
    """As for a run on its own: while the evaluator thinks about t2 the call already waits
    in the conversation, a person's answer decides it and cancels the evaluation, and the
    turn's send is answered once the turn goes on (here: to its end)."""
    executed: list[int] = []
    thinking, cancelled = asyncio.Event(), asyncio.Event()
    agent = asks_two(executed)
    agent.approval_policy = ApprovalPolicy(evaluator=slow_reviewer(thinking, cancelled, "t1"))
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        sent = asyncio.ensure_future(conv.send("pay"))
        await asyncio.wait_for(thinking.wait(), 30)
        await conv.approve({"t2": Deny(reason="not today")}, by="dana")
        done = await asyncio.wait_for(sent, 30)
        with pytest.raises(ValueError, match="no turn of this conversation waits"):
            await conv.approve({"t2": True}, by="erin")
        await asyncio.wait_for(cancelled.wait(), 30)  # the evaluation did not run on
        transcript = await conv.messages()
    assert not done.paused and executed == [1]
    tools = {m.tool_call_id: m for m in transcript if m.role == "tool"}
    assert tools["t1"].decision is not None and tools["t1"].decision.by == "evaluator:reviewer"
    assert tools["t2"].decision is not None and tools["t2"].decision.by == "dana"
    assert tools["t2"].content.endswith("not today")


async def test_a_conversation_turn_is_answered_paused_only_once_its_evaluations_end(
    temporal_client: Client,
) -> None:
    """The evaluator approves t1 and leaves t2 to a person after a while: meanwhile the
    inbox lists t2 alone and the send waits; then it answers paused with t2, and t1 is
    refused to a person as the evaluator's."""
    executed: list[int] = []
    release = asyncio.Event()

    async def reviewer(ctx: Any, call: Any) -> Approve | Ask:
        if call.id == "t1":
            return Approve()
        await release.wait()
        return Ask()

    agent = asks_two(executed)
    agent.approval_policy = ApprovalPolicy(evaluator=reviewer)
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        sent = asyncio.ensure_future(conv.send("pay"))

        async def t2_alone() -> bool:
            listed = await pending(temporal_client, conversation=conv.id)
            return [c.call_id for c in listed] == ["t2"]

        await eventually(t2_alone, what="the inbox listing t2 alone")
        still_sending = not sent.done()  # t2's evaluation still runs
        release.set()
        paused = await asyncio.wait_for(sent, 30)
        with pytest.raises(ValueError) as twice:
            await conv.approve({"t1": True}, by="erin")
        done = await conv.approve({"t2": True}, by="dana")
    assert still_sending
    assert [c.id for c in paused.pending_approvals] == ["t2"]
    assert "calls ['t1'] are decided already (t1 by evaluator:reviewer)" in str(twice.value)
    assert not done.paused and executed == [1, 2]


class _HeardLate(Interceptor):
    """Workflows on this worker hear a run's pause report 3 s late."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _HeardLateInbound


class _HeardLateInbound(WorkflowInboundInterceptor):
    async def handle_signal(self, input: HandleSignalInput) -> None:
        if input.signal == names.PAUSED:
            await workflow.sleep(3)
        await super().handle_signal(input)


async def test_an_approval_sent_before_the_conversation_heard_of_the_pause_waits_for_it(
    temporal_client: Client,
) -> None:
    """The turn's run lists its calls as waiting (what ``approve`` checks, and a person
    reads) a little before its conversation hears of the pause: an answer in between goes
    again until the conversation knows, instead of "no turn of this conversation waits"."""
    executed: list[int] = []
    agent = asks_two(executed)
    tq = f"late-{uuid.uuid4().hex[:8]}"
    plugin = GolemPlugin(agent)
    async with Worker(
        temporal_client, task_queue=tq, plugins=[plugin], interceptors=[_HeardLate()]
    ):
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        sent = asyncio.ensure_future(conv.send("pay"))

        async def the_run_waits() -> bool:
            return [c.id for c in await conv._waiting()] == ["t1", "t2"]

        await eventually(the_run_waits, what="the turn's run waiting for t1 and t2")
        done = await asyncio.wait_for(conv.approve({"t1": True, "t2": True}, by="dana"), 30)
        paused = await asyncio.wait_for(sent, 30)
    assert [c.id for c in paused.pending_approvals] == ["t1", "t2"]
    assert not done.paused and executed == [1, 2]


@pytest.mark.parametrize("inline", [False, True], ids=["child runs", "inline"])
async def test_a_forged_paused_report_leaves_what_a_conversation_waits_for(
    temporal_client: Client, inline: bool
) -> None:
    """Any client may signal ``golem.paused`` to a conversation: a report naming no run it
    started (neither its turn's run nor a delegate of its inline turn) changes nothing."""
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation(inline_turns=inline)
        paused = await conv.send("pay")
        forged = Paused(
            run_id="made-up-run",
            conversation_id=conv.id,
            pending_approvals=[ToolCall(id="f1", name="transfer", args="{}")],
        )
        await conv.handle.signal(names.PAUSED, forged)
        partial = await conv.approve({"t1": True})  # an update, handled after the signal
        listed = await conv.handle.query(names.PENDING, result_type=list[ToolCall] | None)
        done = await conv.approve({"t2": True})
    assert [c.id for c in paused.pending_approvals] == ["t1", "t2"]
    assert [c.id for c in partial.pending_approvals] == ["t2"]
    assert listed is None or [c.id for c in listed] == ["t2"]  # child turns: none listed here
    assert not done.paused and executed == [1, 2]
