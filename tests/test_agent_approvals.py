"""Approvals: a tool that needs a person's decision pauses the run until a later run decides."""

from __future__ import annotations

from typing import Any

import pytest
from agents import answered, ask, call, scripted
from runners import Runner

from golem.agent import Agent
from golem.loop import DENIED_RESULT
from golem.messages import Message
from golem.models.function import ScriptedModel
from golem.results import RunError


def transfer_agent(*answers: Message) -> tuple[Agent[Any, Any], ScriptedModel, list[int]]:
    agent, model = scripted(list(answers))
    sent: list[int] = []

    @agent.tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        sent.append(amount)
        return f"sent {amount}"

    @agent.tool
    def balance() -> str:
        """The balance."""
        return "100"

    return agent, model, sent


def test_an_agent_may_pause_once_it_has_a_tool_that_needs_approval() -> None:
    agent, _ = scripted([])
    agent.tool(name="balance")(lambda: "100")
    assert not agent.may_pause
    agent.tool(name="transfer", requires_approval=True)(lambda: "sent")
    assert agent.may_pause


async def test_a_tool_requiring_approval_pauses_the_run(runner: Runner) -> None:
    agent, _, sent = transfer_agent(ask(call("c1", "transfer", amount=5)))

    result = await runner(agent, "pay 5")

    assert result.output is None
    assert result.pending_approvals == [call("c1", "transfer", amount=5)]
    assert result.paused
    assert sent == []
    ids = (result.run_id, result.conversation_id)
    assert result.messages == [
        Message.user("pay 5").stamped(*ids),
        answered(ask(call("c1", "transfer", amount=5))).stamped(*ids),
    ]


async def test_an_approved_call_runs_and_the_run_continues(runner: Runner) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5)), Message.assistant("done")
    )
    paused = await runner(agent, "pay 5")

    result = await runner(agent, history=paused.messages, approvals={"c1": True})

    assert sent == [5]
    assert result.output == "done"
    assert result.pending_approvals == []
    assert result.conversation_id == paused.conversation_id
    assert result.run_id != paused.run_id
    assert result.messages == [
        *paused.messages,
        *[
            m.stamped(result.run_id, result.conversation_id)
            for m in (Message.tool("c1", "transfer", "sent 5"), answered(Message.assistant("done")))
        ],
    ]
    assert model.requests[1].messages == result.messages[:-1]


async def test_a_denied_call_is_closed_with_a_failed_denied_result(runner: Runner) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=500)), Message.assistant("ok, not sent")
    )
    paused = await runner(agent, "pay 500")

    result = await runner(agent, history=paused.messages, approvals={"c1": False})

    assert sent == []
    assert result.output == "ok, not sent"
    assert model.requests[1].messages[-1] == Message.tool(
        "c1", "transfer", DENIED_RESULT, failed=True
    ).stamped(result.run_id, result.conversation_id)


async def test_a_paused_batch_waits_whole_and_runs_in_call_order_once_decided(
    runner: Runner,
) -> None:
    agent, _, sent = transfer_agent(
        ask(
            call("c1", "balance"),
            call("c2", "transfer", amount=5),
            call("c3", "transfer", amount=7),
        ),
        Message.assistant("done"),
    )
    paused = await runner(agent, "check, then pay twice")

    assert paused.pending_approvals == [
        call("c2", "transfer", amount=5),
        call("c3", "transfer", amount=7),
    ]
    assert paused.tool_calls == 0

    result = await runner(agent, history=paused.messages, approvals={"c2": True, "c3": False})

    assert sent == [5]
    assert [(m.tool_call_id, m.content, m.failed) for m in result.messages[2:5]] == [
        ("c1", "100", False),
        ("c2", "sent 5", False),
        ("c3", DENIED_RESULT, True),
    ]
    assert result.output == "done"


async def test_deciding_some_calls_keeps_the_run_paused_on_the_rest(
    runner: Runner, request: pytest.FixtureRequest
) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5), call("c2", "transfer", amount=7)),
        Message.assistant("done"),
    )
    paused = await runner(agent, "pay twice")

    still = await runner(agent, history=paused.messages, approvals={"c1": True})

    assert sent == [5]
    assert still.output is None
    assert still.pending_approvals == [call("c2", "transfer", amount=7)]
    assert len(model.requests) == 1

    done = await runner(agent, history=still.messages, approvals={"c2": True})

    assert sent == [5, 7]
    assert done.output == "done"
    assert [m.content for m in done.messages if m.role == "tool"] == ["sent 5", "sent 7"]


async def test_approvals_naming_a_call_that_is_not_pending_fail_at_history(
    runner: Runner,
) -> None:
    agent, model, sent = transfer_agent(ask(call("c1", "transfer", amount=5)))
    paused = await runner(agent, "pay 5")

    with pytest.raises(RunError) as caught:
        await runner(agent, history=paused.messages, approvals={"c9": True})

    assert caught.value.stage == "history"
    assert "['c9']" in str(caught.value)
    assert sent == []
    assert len(model.requests) == 1


async def test_a_new_prompt_instead_of_a_decision_closes_the_pending_call_by_repair(
    runner: Runner,
) -> None:
    agent, model, sent = transfer_agent(
        ask(call("c1", "transfer", amount=5)), Message.assistant("fine, nothing sent")
    )
    paused = await runner(agent, "pay 5")

    result = await runner(agent, "never mind", history=paused.messages)

    assert sent == []
    assert result.output == "fine, nothing sent"
    assert (
        model.requests[1].messages[2].content
        == "interrupted before execution; no result was produced"
    )
