"""An agent as approval evaluator: another golem ``Agent`` whose output is a ``Verdict``
decides a call before a person does, in both executors, and never fails open."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import FAST_RETRY, ask, call, scripted
from runners import Runner

from golem import Agent, ApprovalPolicy, Message, Verdict
from golem.models import FunctionModel


def reviewer(seen: list[str]) -> Agent[Any, Verdict]:
    """Reads the call from its prompt: refund 1 is allowed, 2 denied with a reason, 3 asks a
    person, 4 makes the reviewer's model fail and 5 answers something that is no verdict."""

    def answer(messages: list[Message], tools: Any) -> Message:
        prompt = messages[-1].content
        seen.append(prompt)
        amount = json.loads(prompt.split("Arguments: ", 1)[1].splitlines()[0])["amount"]
        if amount == 4:
            raise RuntimeError("reviewer model down")
        verdicts = {
            1: '{"decide": "allow", "reason": "small"}',
            2: '{"decide": "deny", "reason": "over the limit; offer store credit"}',
            3: '{"decide": "ask", "reason": "a person should look"}',
        }
        return Message.assistant(verdicts.get(amount, "maybe?"))

    return Agent(
        FunctionModel(answer),
        name="refund-reviewer",
        output_type=Verdict,
        output_retries=0,
        model_retry=FAST_RETRY,
    )


async def test_an_agent_evaluator_allows_denies_and_leaves_the_rest_to_a_person(
    runner: Runner,
) -> None:
    seen: list[str] = []
    agent, _ = scripted(
        [
            ask(*[call(f"r{n}", "refund", amount=n) for n in (1, 2, 3, 4, 5)]),
            Message.assistant("done"),
        ],
        approval_policy=ApprovalPolicy(evaluator=reviewer(seen)),
    )
    ran: list[int] = []

    @agent.tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund."""
        ran.append(amount)
        return f"refunded {amount}"

    paused = await runner(agent, "refund my five orders")

    assert [c.id for c in paused.pending_approvals] == ["r3", "r4", "r5"]
    assert ran == []  # the batch waits whole for the person
    assert "Tool: refund" in seen[0] and "refund my five orders" in seen[0]
    decided = dict.fromkeys(["r3", "r4", "r5"], False)
    result = await runner(agent, history=paused.messages, approvals=decided)
    assert ran == [1]
    tools = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert tools["r1"].decision is not None
    assert tools["r1"].decision.by == "evaluator:refund-reviewer"
    assert tools["r2"].content == "over the limit; offer store credit" and tools["r2"].failed
    assert tools["r2"].decision is not None
    assert tools["r2"].decision.by == "evaluator:refund-reviewer"
    for person in ("r3", "r4", "r5"):
        assert tools[person].decision is not None and tools[person].decision.by != (
            "evaluator:refund-reviewer"
        )


def test_an_agent_evaluator_must_answer_a_verdict() -> None:
    chatty, _ = scripted([], name="chatty")
    with pytest.raises(ValueError, match=r"chatty.*Verdict"):
        ApprovalPolicy(evaluator=chatty)
