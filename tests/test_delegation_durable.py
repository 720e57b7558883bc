"""Delegation as Temporal sees it: child workflows with lineage, a child's approval answered
from the top, a cancel that reaches every child, and the children's events in the
caller's stream."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from delegation_agents import (
    caller_agent,
    calls,
    echo_agent,
    refund_agent,
    results_of,
    triage_of,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker
from test_conversation import serve
from test_durable_approvals import slow_reviewer
from waiting import eventually

from golem import Agent, ApprovalPolicy, RunContext, RunError, RunEvent
from golem.client import DurableAgent, pending
from golem.client.deployments import WorkerDeployment
from golem.messages import ToolCall
from golem.wire import Paused, names
from golem.wire.lineage import AGENT, CONVERSATION_ID, PARENT_RUN_ID
from golem.worker import GolemPlugin
from golem.workflows.agent_run import AgentRunWorkflow


async def test_a_child_run_is_a_child_workflow_with_the_callers_lineage(
    temporal_client: Client,
) -> None:
    triage = triage_of(echo_agent("billing"))
    async with serve(temporal_client, triage) as tq:
        result = await DurableAgent(temporal_client, triage, task_queue=tq).run("help")
    [child] = result.sub_runs
    description = await temporal_client.get_workflow_handle(child).describe()
    assert description.parent_id == result.run_id  # Temporal's parent link: the UI's tree
    attributes = description.typed_search_attributes
    assert attributes.get(PARENT_RUN_ID) == result.run_id
    assert attributes.get(CONVERSATION_ID) == result.conversation_id
    assert attributes.get(AGENT) == "billing"
    # No activity between the caller and its child: the caller's history starts it.
    events = [
        e async for e in temporal_client.get_workflow_handle(result.run_id).fetch_history_events()
    ]
    tools = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "golem.tool" not in tools
    assert (
        sum(e.HasField("start_child_workflow_execution_initiated_event_attributes") for e in events)
        == 1
    )


def asking_billing() -> tuple[Agent[Any, Any], Agent[Any, Any]]:
    """A caller whose tool asks billing with ctx.delegate, and billing."""
    billing = echo_agent("billing")
    caller = caller_agent("caller", lambda p: calls(("c1", "ask", {})))

    @caller.tool
    async def ask(ctx: RunContext[Any]) -> str:
        """Ask billing."""
        return (await ctx.delegate(billing, "refund")).output

    return caller, billing


async def started_eagerly(client: Client, result: Any) -> bool:
    """Whether the run's one sub-run's first workflow task came back with its start."""
    [sub_run] = result.sub_runs
    events = client.get_workflow_handle(sub_run).fetch_history_events()
    started = await anext(aiter(events))
    return started.workflow_execution_started_event_attributes.eager_execution_accepted


async def test_a_ctx_delegate_sub_run_starts_eagerly_on_the_worker_that_starts_it(
    temporal_client: Client,
) -> None:
    caller, billing = asking_billing()
    async with serve(temporal_client, caller, billing) as tq:
        result = await DurableAgent(temporal_client, caller, task_queue=tq).run("help")
    # No trip through the task queue: the worker running the tool runs its first task.
    assert await started_eagerly(temporal_client, result)


async def test_a_versioned_workers_ctx_delegate_sub_run_goes_through_the_task_queue(
    temporal_client: Client,
) -> None:
    caller, billing = asking_billing()
    task_queue, name = f"eager-{uuid.uuid4().hex[:8]}", f"eager-{uuid.uuid4().hex[:6]}"
    plugin = GolemPlugin(caller, billing, deployment=(name, "v1"))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        await WorkerDeployment(temporal_client, name).set_current("v1", timeout=20)
        result = await DurableAgent(temporal_client, caller, task_queue=task_queue).run("help")
    assert result.output == "done: refund"
    # The version that runs it is the deployment's to route, as for any run started.
    assert not await started_eagerly(temporal_client, result)


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
async def test_a_delegates_approval_surfaces_at_the_top_and_is_answered_there(
    temporal_client: Client, depth: int
) -> None:
    refunds: list[int] = []
    billing = refund_agent(refunds)
    mid = caller_agent(
        "mid", lambda p: calls(("m1", "billing", {"prompt": p})), delegates=[billing]
    )
    top_delegate = billing if depth == 1 else mid
    triage = caller_agent(
        "triage",
        lambda p: calls(("t1", top_delegate.name, {"prompt": "refund 5"})),
        delegates=[top_delegate],
    )
    async with serve(temporal_client, triage) as tq:
        durable = DurableAgent(temporal_client, triage, task_queue=tq)
        assert durable.may_pause  # a delegate's tool needs approval
        run = await durable.start("I was charged twice")
        paused = await run.result()
        [call] = paused.pending_approvals
        assert call.name == "refund" and refunds == []
        waiting = paused.pending_runs[call.id]
        assert waiting != paused.run_id
        described = await temporal_client.get_workflow_handle(waiting).describe()
        assert described.typed_search_attributes.get(AGENT) == "billing"
        final = await run.approve({call.id: True})
    assert refunds == [5]
    assert not final.paused
    assert final.output == "refunded 5"


def triage_refunding(prompt: str) -> tuple[list[int], Agent[Any, Any]]:
    """A caller that delegates ``prompt`` to billing, whose refund needs approval; the
    refunds billing makes."""
    refunds: list[int] = []
    billing = refund_agent(refunds)
    triage = caller_agent(
        "triage", lambda p: calls(("t1", "billing", {"prompt": prompt})), delegates=[billing]
    )
    return refunds, triage


async def test_a_forged_paused_report_naming_no_child_of_the_run_is_dropped(
    temporal_client: Client,
) -> None:
    """Any client may signal ``golem.paused``: a report naming a run this one never started
    leaves what it waits for as it was (its outcome, its pending query)."""
    refunds, triage = triage_refunding("refund 5")
    async with serve(temporal_client, triage) as tq:
        run = await DurableAgent(temporal_client, triage, task_queue=tq).start("go")
        [call] = (await run.result()).pending_approvals
        forged = Paused(
            run_id="made-up-child",
            conversation_id="",
            pending_approvals=[ToolCall(id="f1", name="refund", args="{}")],
        )
        await run.handle.signal(names.PAUSED, forged)
        after = await run.result()  # an update, handled after the signal
        assert [c.id for c in after.pending_approvals] == [call.id]
        assert list(after.pending_runs) == [call.id]
        assert [c.id for c in await run.handle.query(AgentRunWorkflow.pending)] == [call.id]
        final = await run.approve({call.id: True})
    assert final.output == "refunded 5" and refunds == [5]


async def test_a_denied_delegate_call_is_answered_as_denied_in_the_child(
    temporal_client: Client,
) -> None:
    refunds, triage = triage_refunding("x")
    async with serve(temporal_client, triage) as tq:
        run = await DurableAgent(temporal_client, triage, task_queue=tq).start("go")
        paused = await run.result()
        final = await run.approve({paused.pending_approvals[0].id: False})
    assert refunds == []
    assert final.output == "the user denied this tool call; it was not executed"


@pytest.mark.parametrize("how", ["delegates", "ctx.delegate"])
async def test_cancelling_the_caller_cancels_its_children(
    temporal_client: Client, how: str
) -> None:
    started = asyncio.Event()
    worker = caller_agent("worker", lambda p: calls(("w1", "hang", {})))

    @worker.tool
    async def hang() -> str:
        """Work forever."""
        started.set()
        await asyncio.Event().wait()
        return ""

    if how == "delegates":
        boss = caller_agent(
            "boss", lambda p: calls(("b1", "worker", {"prompt": "go"})), delegates=[worker]
        )
        extra: tuple[Agent[Any, Any], ...] = ()
    else:
        boss = caller_agent("boss", lambda p: calls(("b1", "ask", {})))

        @boss.tool
        async def ask(ctx: RunContext[Any]) -> str:
            """Ask the worker."""
            return (await ctx.delegate("worker", "go")).output

        extra = (worker,)
    async with serve(temporal_client, boss, *extra) as tq:
        run = await DurableAgent(temporal_client, boss, task_queue=tq).start("go")
        await asyncio.wait_for(started.wait(), 20)
        await run.cancel()
        with pytest.raises(RunError) as caught:
            await run.result()
        assert caught.value.stage == "canceled"

        async def child_status() -> WorkflowExecutionStatus | None:
            found = [
                e
                async for e in temporal_client.list_workflows(f"GolemParentRunId = '{run.run_id}'")
            ]
            return found[0].status if found else None

        async def child_canceled() -> bool:
            return await child_status() == WorkflowExecutionStatus.CANCELED

        await eventually(child_canceled, what="the child run to end canceled", timeout=20)


async def test_the_callers_stream_carries_its_childrens_events_marked_with_their_runs(
    temporal_client: Client,
) -> None:
    triage = triage_of(echo_agent("billing"))
    async with serve(temporal_client, triage) as tq:
        stream = DurableAgent(temporal_client, triage, task_queue=tq).run_stream("help")
        events = [event async for event in stream]
    result = stream.result
    [child] = result.sub_runs
    kinds = [
        (e.agent, e.kind) for e in events if e.kind in ("model_start", "model_end", "tool_end")
    ]
    assert ("billing", "model_start") in kinds and ("billing", "model_end") in kinds
    assert {e.run_id for e in events if e.agent == "billing"} == {child}
    assert {e.run_id for e in events if e.agent == "triage"} == {result.run_id}
    assert any(e.kind == "text_delta" and e.agent == "billing" for e in events)
    assert results_of(result.messages)[0].content == "done: refund"


async def test_a_stream_cut_after_any_event_resumes_with_the_runs_below_each_event_once(
    temporal_client: Client,
) -> None:
    """Two delegates called in one batch: a stream cut after any event (a delegate's, or the
    caller's after a delegate was named) and resumed from its offset with the runs below
    where it left them (``resume_below``, as ``DurableRun.followed``) yields the rest of
    the events, none again and none lost."""
    caller = caller_agent(
        "caller",
        lambda p: calls(("c1", "billing", {"prompt": "a"}), ("c2", "ledger", {"prompt": "b"})),
        delegates=[echo_agent("billing"), echo_agent("ledger")],
    )
    async with serve(temporal_client, caller) as tq:
        durable = DurableAgent(temporal_client, caller, task_queue=tq)
        run = await durable.start("go")
        whole = [e async for e in run.stream()]
        cuts = []
        for cut in range(len(whole)):
            stream = (await durable.attach(run.run_id)).stream()
            seen: list[RunEvent] = []
            async for event in stream:
                seen.append(event)
                if len(seen) > cut:
                    offset, below = stream.offset, stream.resume_below(run.run_id)
                    break
            again = await durable.attach(run.run_id)
            again.followed.update(below)
            cuts.append((seen, [e async for e in again.stream(offset)]))

    def of_each_run(events: list[RunEvent]) -> dict[str, list[RunEvent]]:
        """The runs' events are read side by side: each run's keep their order."""
        runs: dict[str, list[RunEvent]] = {}
        for event in events:
            runs.setdefault(event.run_id, []).append(event)
        return runs

    assert {e.agent for e in whole} == {"caller", "billing", "ledger"}
    for seen, rest in cuts:
        assert of_each_run(seen + rest) == of_each_run(whole), f"cut after {seen[-1]}"


async def test_a_person_who_answers_a_delegates_call_first_cancels_its_evaluation(
    temporal_client: Client,
) -> None:
    """The delegate's evaluator is still thinking when a person answers the call at the
    top run: that answer decides it, the evaluation is cancelled; the top run's result
    waited meanwhile (it pauses only once the evaluation ends, as for a run on its own)."""
    refunds: list[int] = []
    thinking, cancelled = asyncio.Event(), asyncio.Event()
    billing = refund_agent(refunds)
    billing.approval_policy = ApprovalPolicy(evaluator=slow_reviewer(thinking, cancelled))
    triage = caller_agent(
        "triage", lambda p: calls(("t1", "billing", {"prompt": "x"})), delegates=[billing]
    )
    async with serve(temporal_client, triage) as tq:
        run = await DurableAgent(temporal_client, triage, task_queue=tq).start("go")
        result = asyncio.ensure_future(run.result())
        await asyncio.wait_for(thinking.wait(), 30)
        [waiting] = await eventually(
            lambda: pending(temporal_client, agent="billing"), what="the delegate's call listed"
        )
        still_waiting = not result.done()
        final = await run.approve({waiting.call_id: True}, by="dana")
        await asyncio.wait_for(cancelled.wait(), 30)
    assert still_waiting
    assert refunds == [5]
    assert not final.paused and final.output == "refunded 5"
