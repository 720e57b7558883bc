"""Conversation behaviours a planted bug once slipped past (issue 20, "Pin first"): approving
calls that are not pending, a transcript rewritten by a repair, a failed turn's evidence
that needs repair before a by-reference turn, and a send retried after continue-as-new."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest
from temporalio.client import Client
from test_conversation import echo_agent, serve
from test_conversation_approvals import details
from test_conversation_boundaries import budgeted, continued
from test_durable_approvals import asks_two
from waiting import eventually

from golem import Agent, Message, ToolCall
from golem.client import DurableAgent, fetch_run
from golem.history import normalize_history
from golem.models import FunctionModel
from golem.results import RunError

BOUND = 20.0  # seconds: a refusal comes at once; an update wrongly accepted waits forever


async def refusal(attempt: Awaitable[Any], what: str) -> BaseException:
    """What ``attempt`` raised at once; a clear failure if it was accepted and waits."""
    task = asyncio.ensure_future(attempt)
    done, _ = await asyncio.wait({task}, timeout=BOUND)
    if not done:
        task.cancel()
        raise AssertionError(f"{what} was accepted (still waiting after {BOUND:g} s)")
    error = task.exception()
    assert error is not None, f"{what} was accepted"
    return error


def repairs(messages: list[Message]) -> bool:
    """Whether a provider would need ``messages`` repaired (a call without its result, a
    duplicate result, a result out of place)."""
    return normalize_history(messages)[1].changed


async def test_an_approval_naming_a_call_not_pending_is_refused_whole_and_both_calls_wait(
    temporal_client: Client,
) -> None:
    executed: list[int] = []
    agent = asks_two(executed)
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation()
        paused = await conv.send("pay")
        unknown = await refusal(conv.approve({"nope": True}), "approving a call not pending")
        # A pending id beside one that is not: nothing of it is recorded.
        mixed = await refusal(conv.approve({"t1": True, "nope": False}), "approving t1 and nope")
        still = await details(conv)
        done = await conv.approve({"t1": True, "t2": False})
    assert [c.id for c in paused.pending_approvals] == ["t1", "t2"]
    for error in (unknown, mixed):
        assert isinstance(error, ValueError) and "nope" in str(error)
    assert "transfer (t1), transfer (t2)" in still  # both still wait, t1 undecided
    assert done.run_id == paused.run_id and not done.paused
    assert executed == [1] and done.output.startswith("moved 1 | ")


def seeded_agent() -> tuple[Agent[Any, str], FunctionModel]:
    def answer(messages: list[Message], tools: Any) -> Message:
        return Message.assistant(f"answer to {messages[-1].content}")

    model = FunctionModel(answer)
    return Agent(model, name="seeded-rewrite"), model


async def test_a_seed_repaired_in_its_middle_is_taken_by_reference_and_read_back_the_same(
    temporal_client: Client,
) -> None:
    """The conversation's repair inserts a result before later messages (a rewrite, not an
    append): the turn that takes the repaired transcript by reference gets it whole."""
    agent, model = seeded_agent()
    seed = [
        Message.user("look it up"),
        Message.assistant("", [ToolCall(id="lost", name="lookup", args="{}")]),
        Message.user("never mind, hello"),
        Message.assistant("hello"),
    ]
    async with serve(temporal_client, agent) as tq:
        durable = DurableAgent(temporal_client, agent, task_queue=tq)
        conv = await durable.conversation(history=seed)
        first = await conv.send("one")
        second = await conv.send("two")
        transcript = await conv.messages()
        fork = await conv.fork(at_run_id=first.run_id)
        branch = await fork.send("three")
    record = await fetch_run(temporal_client, second.run_id)  # no worker: from the histories
    assert [m.tool_call_id for m in transcript[:4] if m.role == "tool"] == ["lost"]
    assert not repairs(transcript)
    assert transcript == second.messages == record.messages
    assert [r.messages for r in model.requests[:2]] == [
        first.messages[:-1],
        second.messages[:-1],
    ]
    assert branch.messages[: len(first.messages)] == first.messages
    assert model.requests[-1].messages == branch.messages[:-1]


def duplicating_agent() -> tuple[Agent[Any, str], FunctionModel, list[str]]:
    """On "break": two calls under one id (as a faulty proxy may send), one of which fails,
    so the failed turn's evidence holds two results for one call and needs repair."""
    ran: list[str] = []

    def answer(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "user" and messages[-1].content == "break":
            calls = [ToolCall(id="c9", name="fine", args="{}"), ToolCall(id="c9", name="explode")]
            return Message.assistant("", calls)
        return Message.assistant(f"answer to {messages[-1].content}")

    model = FunctionModel(answer)
    agent: Agent[Any, str] = Agent(model, name="duplicated")

    @agent.tool
    def fine() -> str:
        """Works."""
        ran.append("fine")
        return "fine"

    @agent.tool
    def explode() -> str:
        """Fails for real."""
        ran.append("explode")
        raise RuntimeError("boom")

    return agent, model, ran


async def test_a_failed_turns_evidence_is_repaired_before_the_next_turn_takes_it_by_reference(
    temporal_client: Client,
) -> None:
    agent, model, ran = duplicating_agent()
    async with serve(temporal_client, agent) as tq:
        conv = await DurableAgent(temporal_client, agent, task_queue=tq).conversation()
        await conv.send("hello")
        with pytest.raises(RunError) as failed:
            await conv.send("break")
        after = await conv.send("continue")
        transcript = await conv.messages()
    partial = failed.value.partial
    assert failed.value.stage == "tool" and partial is not None
    assert set(ran) == {"explode", "fine"}  # both ran (a raising tool is retried durably)
    assert repairs(partial.messages)  # the evidence as the failed run left it
    seen = model.requests[-1].messages  # the next turn's request, by reference
    assert not repairs(seen)
    assert seen == after.messages[:-1] and transcript == after.messages
    assert [(m.tool_call_id, m.content) for m in transcript if m.role == "tool"] == [("c9", "fine")]


async def test_a_send_retried_after_continue_as_new_returns_the_conversation_through_its_turn(
    temporal_client: Client,
) -> None:
    agent, model = echo_agent("echo-retried")
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=2)
        await conv.send("one")
        run_id = str(uuid.uuid4())
        two = await conv.send("two", run_id=run_id)

        async def switched() -> bool:
            return await continued(temporal_client, conv.id) >= 1

        await eventually(switched, what="the conversation continued as new after two turns")
        three = await conv.send("three")
        again = await conv.send("two", run_id=run_id)  # retried: the turn that ran answers
    assert again.run_id == run_id and again.output == two.output == "2: two"
    assert len(two.messages) == 4  # the conversation through that turn, not the run's own
    assert again.messages == two.messages == three.messages[:4]
    assert len(model.requests) == 3
