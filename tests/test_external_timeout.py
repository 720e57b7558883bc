"""``Agent(external_timeout=...)``: a durable run waits for a client-run tool's result only
so long; then the call gets a failed result saying so, the model reads it, and a later
``complete`` is refused naming the timeout. Approvals in the same batch keep their own
``approval_timeout``; in a conversation's turn the conversation keeps both deadlines."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent
from golem.models import FunctionModel
from golem.phases.batch import NO_DECISION_RESULT, NO_EXTERNAL_RESULT
from golem.worker import GolemPlugin
from tests.test_durable_approvals import timer_fired

DATE = {"type": "object", "properties": {}}


def date_agent(
    release: asyncio.Event,
    *,
    external_timeout: timedelta | None,
    approval_timeout: timedelta | None = None,
    with_transfer: bool = False,
    executed: list[int] | None = None,
) -> Agent[Any, str]:
    """Asks the application for a date (and, with ``transfer``, for a transfer that needs
    approval); its answer after the results waits for ``release``, so the run still goes
    on when a late answer arrives."""

    async def answer(messages: list[Message], tools: Any) -> Message:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            calls = [ToolCall(id="d1", name="pick_date", args="{}")]
            if with_transfer:
                calls.append(ToolCall(id="t1", name="transfer", args='{"amount": 5}'))
            return Message.assistant("", calls)
        await release.wait()
        return Message.assistant(" | ".join(m.content for m in results))

    agent: Agent[Any, str] = Agent(
        FunctionModel(answer),
        name=f"dates-{uuid.uuid4().hex[:6]}",
        external_timeout=external_timeout,
        approval_timeout=approval_timeout,
    )
    agent.external_tool("pick_date", "Ask the user for a date", DATE)

    if with_transfer:

        @agent.tool(requires_approval=True)
        def transfer(amount: int) -> str:
            """Move money."""
            (executed if executed is not None else []).append(amount)
            return f"moved {amount}"

    return agent


@asynccontextmanager
async def serve(client: Client, agent: Agent[Any, Any]) -> AsyncIterator[str]:
    task_queue = f"exttimeout-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        yield task_queue


async def test_an_unanswered_external_call_times_out_and_a_late_complete_is_refused(
    temporal_client: Client,
) -> None:
    release = asyncio.Event()
    agent = date_agent(release, external_timeout=timedelta(milliseconds=300))
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("book")
        paused = await run.result()
        assert [c.id for c in paused.pending_calls] == ["d1"]
        await timer_fired(temporal_client, run.run_id)
        with pytest.raises(ValueError, match=r"external timeout \(0.3 s\) ran out.*\['d1'\]"):
            await run.complete({"d1": "2026-12-24"})
        release.set()
        done = await run.result(final=True)
    assert done.output == NO_EXTERNAL_RESULT  # what the model read
    result = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "d1")
    assert result.failed and result.content == NO_EXTERNAL_RESULT


async def test_an_external_call_answered_in_time_is_not_touched_by_its_timeout(
    temporal_client: Client,
) -> None:
    release = asyncio.Event()
    release.set()
    agent = date_agent(release, external_timeout=timedelta(seconds=30))
    async with serve(temporal_client, agent) as tq:
        run = await DurableAgent(temporal_client, agent, task_queue=tq).start("book")
        await run.result()
        done = await run.complete({"d1": "2026-12-24"})
    assert done.output == "2026-12-24"


async def waiting_booking(
    client: Client, agent: Agent[Any, str], task_queue: str, where: str
) -> tuple[Any, str]:
    """The booking, waiting, as a run or as a conversation's turn: what answers it (each has
    ``approve`` and ``complete``) and the workflow whose timers bound its calls."""
    durable = DurableAgent(client, agent, task_queue=task_queue)
    answerer: Any
    if where == "run":
        run = await durable.start("book")
        paused = await run.result()
        answerer, workflow_id = run, run.run_id
    else:  # the conversation keeps its turn's deadlines
        conv = await durable.conversation()
        paused = await conv.send("book")
        answerer, workflow_id = conv, conv.id
    assert {c.id for c in paused.pending_calls} == {"d1"}
    return answerer, workflow_id


@pytest.mark.parametrize("where", ["run", "conversation"])
async def test_a_mixed_batch_bounds_each_kind_by_its_own_timeout(
    temporal_client: Client, where: str
) -> None:
    """The external timeout runs out first: the date call is closed while the transfer still
    waits for a person, who approves it well within the (long) approval timeout."""
    release = asyncio.Event()
    release.set()
    executed: list[int] = []
    agent = date_agent(
        release,
        external_timeout=timedelta(milliseconds=300),
        approval_timeout=timedelta(seconds=60),
        with_transfer=True,
        executed=executed,
    )
    async with serve(temporal_client, agent) as tq:
        waiting, workflow_id = await waiting_booking(temporal_client, agent, tq, where)
        await timer_fired(temporal_client, workflow_id)
        with pytest.raises(ValueError, match=r"external timeout \(0.3 s\) ran out.*\['d1'\]"):
            await waiting.complete({"d1": "2026-12-24"})
        done = await waiting.approve({"t1": True})  # the transfer still waited for a person
    assert executed == [5]
    assert done.output == f"{NO_EXTERNAL_RESULT} | moved 5"
    result = next(m for m in done.messages if m.role == "tool" and m.tool_call_id == "d1")
    assert result.failed and result.content == NO_EXTERNAL_RESULT


@pytest.mark.parametrize("where", ["run", "conversation"])
async def test_a_mixed_batch_with_no_external_timeout_leaves_the_call_to_the_application(
    temporal_client: Client, where: str
) -> None:
    """The approval timeout runs out and answers the transfer; the date call, which no
    external timeout bounds, still waits for the application."""
    release = asyncio.Event()
    release.set()
    executed: list[int] = []
    agent = date_agent(
        release,
        external_timeout=None,
        approval_timeout=timedelta(milliseconds=300),
        with_transfer=True,
        executed=executed,
    )
    async with serve(temporal_client, agent) as tq:
        waiting, workflow_id = await waiting_booking(temporal_client, agent, tq, where)
        await timer_fired(temporal_client, workflow_id)
        with pytest.raises(ValueError, match=r"approval timeout \(0.3 s\) ran out"):
            await waiting.approve({"t1": True})
        done = await waiting.complete({"d1": "2026-12-24"})
    assert executed == []
    assert done.output == f"2026-12-24 | {NO_DECISION_RESULT}"
