"""The pending inbox: every call that waits, across runs and conversations, served by
Temporal visibility (``GolemWaiting`` and the run's memo), cleared however the wait ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from delegation_agents import caller_agent, calls, refund_agent
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_conversation import serve as delegation_serve
from test_durable_approvals import delivery_agent, serve, transfer_agent
from waiting import eventually

from golem import Agent, Message, RunContext, ToolCall
from golem.client import WAITING, DurableAgent, PendingCall, pending
from golem.client.conversations import started_by_first_turn
from golem.models import FunctionModel, ToolDefinition
from golem.testing import STARTUP_TIMEOUT, temporal_cli
from golem.wire import ConversationInput
from golem.wire.converter import golem_data_converter
from golem.wire.inbox import ARGS_LISTED, WAITING_MEMO
from golem.wire.lineage import PARENT_RUN_ID, SEARCH_ATTRIBUTES, TURN_RUNS
from golem.worker import GolemPlugin


async def listed(client: Client, conversation: str, count: int) -> list[PendingCall]:
    """The conversation's waiting calls, once the inbox lists ``count`` of them."""

    async def calls() -> tuple[list[PendingCall]] | None:
        found = await pending(client, conversation=conversation)
        return (found,) if len(found) == count else None  # a tuple: an empty list counts

    result: tuple[list[PendingCall]] = await eventually(
        calls, what=f"{count} waiting calls listed in {conversation}", interval=0.1
    )
    return result[0]


async def unlisted(client: Client, run_id: str) -> None:
    """Until the run's own record says it waits for nothing: count 0, no memo entry."""

    async def cleared() -> bool:
        description = await client.get_workflow_handle(run_id).describe()
        memo = await description.memo()
        return description.typed_search_attributes.get(WAITING) == 0 and WAITING_MEMO not in memo

    await eventually(cleared, what=f"run {run_id} cleared from the inbox", interval=0.1)


async def test_a_waiting_run_is_listed_with_each_call_and_leaves_once_answered(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = delivery_agent(executed)
    before = datetime.now(UTC) - timedelta(seconds=2)
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("deliver")
        await run.result()
        both = await listed(temporal_client, run.conversation_id, 2)
        by_agent = await pending(temporal_client, agent="delivery")
        await run.complete({"d1": "2026-12-24"})
        left = await listed(temporal_client, run.conversation_id, 1)
        await run.approve({"t1": True})
        await listed(temporal_client, run.conversation_id, 0)
        await unlisted(temporal_client, run.run_id)
    date, transfer = both
    assert (date.call_id, date.tool, date.args, date.kind) == ("d1", "pick_date", "{}", "external")
    assert (transfer.tool, transfer.args, transfer.kind) == (
        "transfer",
        '{"amount": 5}',
        "approval",
    )
    assert {c.run_id for c in both} == {run.run_id} and {c.agent for c in both} == {"delivery"}
    assert {c.answers for c in both} == {run.run_id}
    assert date.since == transfer.since and before < date.since < datetime.now(UTC)
    assert date.who == "the application" and transfer.who == "a person"
    assert date.command == f"golem complete {run.run_id} d1 --result JSON"
    assert transfer.command == f"golem approve {run.run_id} t1"
    assert {(c.run_id, c.call_id) for c in both} <= {(c.run_id, c.call_id) for c in by_agent}
    assert [c.call_id for c in left] == ["t1"] and left[0].since == transfer.since
    assert executed == [5]


async def test_a_conversations_turn_is_listed_with_the_conversation_to_answer(
    temporal_client: Client,
) -> None:
    agent = transfer_agent([])
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        paused = await conv.send("pay")
        [call] = await listed(temporal_client, conv.id, 1)
        await conv.approve({"t1": True})
        await listed(temporal_client, conv.id, 0)
    assert call.run_id == paused.run_id != conv.id
    assert call.answers == conv.id and call.conversation_id == conv.id
    assert call.command == f"golem approve {conv.id} t1"


async def test_a_timeout_and_a_cancel_clear_the_listing(temporal_client: Client) -> None:
    timed = transfer_agent([], approval_timeout=timedelta(milliseconds=500))
    held = transfer_agent([])
    async with serve(temporal_client, timed) as tq, serve(temporal_client, held) as tq2:
        run = await DurableAgent(temporal_client, timed, task_queue=tq).start("pay")
        await run.result()
        await run.result(final=True)  # nobody answers: the timeout decides
        await unlisted(temporal_client, run.run_id)
        canceled = await DurableAgent(temporal_client, held, task_queue=tq2).start("pay")
        await canceled.result()
        await listed(temporal_client, canceled.conversation_id, 1)
        await canceled.handle.cancel()
        await unlisted(temporal_client, canceled.run_id)
        await listed(temporal_client, canceled.conversation_id, 0)


async def test_long_arguments_are_listed_cut_and_say_so(temporal_client: Client) -> None:
    long = '{"note": "' + "x" * 3000 + '"}'

    def answer(messages: list[Message], tools: Any) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message.assistant("done")
        return Message.assistant("", [ToolCall(id="n1", name="note", args=long)])

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="notes")

    @agent.tool(requires_approval=True)
    def note(note: str) -> str:
        """Keep a note."""
        return "kept"

    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("note")
        await run.result()
        [call] = await listed(temporal_client, run.conversation_id, 1)
        await run.approve({"n1": True})
    assert call.args_cut and call.args == long[:ARGS_LISTED]


@asynccontextmanager
async def server_without(attribute: str) -> AsyncIterator[Client]:
    """A dev server whose namespace lacks golem's search attribute ``attribute``, as one an
    older golem set up does."""
    older = [k for k in SEARCH_ATTRIBUTES if k.name != attribute]
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        dev_server_startup_timeout=STARTUP_TIMEOUT,
        data_converter=golem_data_converter,
        search_attributes=older,
    )
    try:
        yield env.client
    finally:
        await env.shutdown()


async def test_a_namespace_without_golem_waiting_runs_unlisted_and_the_inbox_says_why() -> None:
    async with server_without(WAITING.name) as client:
        agent = transfer_agent([])
        async with Worker(client, task_queue="older", plugins=[GolemPlugin(agent)]):
            run = await DurableAgent(client, agent, task_queue="older").start("pay")
            await run.result()
            done = await run.approve({"t1": True})
            with pytest.raises(LookupError) as refused:
                await pending(client)
            described = await run.handle.describe()
    assert done.output == "moved 5 | balance 100"
    assert described.typed_search_attributes.get(WAITING) is None
    assert str(refused.value) == (
        "namespace default has no GolemWaiting search attribute, so nothing is listed as "
        "waiting: run `golem setup` (`golem dev` has it)"
    )


async def test_runs_waiting_in_many_conversations_are_all_listed_oldest_first(
    temporal_client: Client,
) -> None:
    agent = transfer_agent([])
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        runs = [await durable.start("pay") for _ in range(3)]
        await asyncio.gather(*(r.result() for r in runs))
        mine = {r.run_id for r in runs}

        async def all_three() -> list[PendingCall] | None:
            found = [c for c in await pending(temporal_client, agent="bank") if c.run_id in mine]
            return found if len(found) == 3 else None

        found = await eventually(all_three, what="three waiting runs listed", interval=0.1)
        for run in runs:
            await run.approve({"t1": True})
    assert [c.since for c in found] == sorted(c.since for c in found)


@pytest.mark.parametrize("how", ["delegates", "ctx.delegate"])
async def test_a_delegates_call_is_listed_in_the_run_that_waits_for_it(
    temporal_client: Client, how: str
) -> None:
    refunds: list[int] = []
    billing = refund_agent(refunds)
    if how == "delegates":
        top = caller_agent(
            "triage", lambda p: calls(("t1", "billing", {"prompt": "x"})), delegates=[billing]
        )
        extra: tuple[Agent[Any, Any], ...] = ()
    else:
        top = caller_agent("triage", lambda p: calls(("t1", "ask", {})))

        @top.tool
        async def ask(ctx: RunContext[Any]) -> str:
            """Ask billing."""
            return str((await ctx.delegate("billing", "refund 5")).output)

        extra = (billing,)
    async with delegation_serve(temporal_client, top, *extra) as tq:
        run = await DurableAgent(temporal_client, top, task_queue=tq).start("go")
        # The top agent may not know it can pause (ctx.delegate): the inbox knows.
        [call] = await listed(temporal_client, run.conversation_id, 1)
        final = await run.approve({call.call_id: True})
        await listed(temporal_client, run.conversation_id, 0)
    waiting = await temporal_client.get_workflow_handle(call.run_id).describe()
    assert waiting.typed_search_attributes.get(PARENT_RUN_ID) == run.run_id != call.run_id
    assert (call.agent, call.tool, call.answers) == ("billing", "refund", run.run_id)
    assert refunds == [5] and final.output == "refunded 5"


async def test_a_runs_own_external_tool_is_listed_and_completed_in_the_same_run(
    temporal_client: Client,
) -> None:
    def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return Message.assistant(f"seat {results[-1].content}")
        return Message.assistant("", [ToolCall(id="s1", name="pick_seat", args="{}")])

    agent: Agent[Any, str] = Agent(FunctionModel(answer), name="seats")
    seat = ToolDefinition(name="pick_seat", description="Ask the user for a seat")
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        run = await durable.start("book", external_tools=[seat])
        paused = await run.result()
        [call] = await listed(temporal_client, run.conversation_id, 1)
        done = await run.complete({"s1": "3C"})
    assert [c.id for c in paused.pending_calls] == ["s1"]
    assert call.kind == "external"
    assert call.command == f"golem complete {run.run_id} s1 --result JSON"
    assert done.output == "seat 3C" and done.run_id == run.run_id


@pytest.mark.parametrize(
    ("attribute", "inline_turns"), [(WAITING.name, False), (TURN_RUNS.name, True)]
)
async def test_a_first_turn_that_starts_its_conversation_runs_where_the_namespace_lacks_one(
    attribute: str, inline_turns: bool
) -> None:
    """golem serve's new thread: its first turn starts the conversation (update-with-start),
    a call whose start carried what the namespace lacks; it goes again without it."""
    async with server_without(attribute) as client:
        agent = transfer_agent([])
        async with Worker(client, task_queue="older", plugins=[GolemPlugin(agent)]):
            durable = DurableAgent(client, agent, task_queue="older")
            input = ConversationInput(agent=agent.name, inline_turns=inline_turns)
            first = started_by_first_turn(durable, "thread-1", input, "")
            waiting = await first.send("pay")
            done = await first.approve({"t1": True})
            described = await first.handle.describe()
            again = started_by_first_turn(durable, "thread-2", input, "")  # lacking is known
            assert (await again.send("pay")).pending_approvals
            await again.approve({"t1": False})
    assert [c.id for c in waiting.pending_approvals] == ["t1"]
    assert done.output == "moved 5 | balance 100"
    assert described.search_attributes.get(attribute) is None
